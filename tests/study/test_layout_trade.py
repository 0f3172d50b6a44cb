"""The sentence that explains a layout's trade against another."""

from __future__ import annotations

from perflab.study.layout_trade import Figures, trade_sentence


def test_the_trade_names_every_change_and_the_winner() -> None:
    split = Figures(ttft_ms=122.0, tpot_ms=6.2, tokens_per_s_per_gpu=112.0)
    aggregated = Figures(ttft_ms=100.0, tpot_ms=10.0, tokens_per_s_per_gpu=100.0)
    assert trade_sentence("3P1D (P TP2, D TP2)", split, "TP2", aggregated) == (
        "3P1D (P TP2, D TP2) against TP2: TPOT −38 %, TTFT +22 %, tokens/s/GPU +12 % "
        "(3P1D (P TP2, D TP2) by 1.12×)"
    )
    assert trade_sentence("1P1D (P TP4, D TP4)", Figures(90.0, 9.0, 50.0), "TP8", aggregated).endswith(
        "(TP8 by 2.00×)"
    )
