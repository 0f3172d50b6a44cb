"""The sentence that explains a layout's trade against another, the point of a run its figures are read
at, and a stage's choice between the best split and the best aggregated layout."""

from __future__ import annotations

from perflab.engines.config import EngineConfig
from perflab.study.layout_trade import (
    Contender,
    Figures,
    choose_layout,
    launch_figures,
    layout_of,
    objective_point,
    point_figures,
    trade_sentence,
)
from perflab.study.noise import StudySpread
from perflab.study.types import Rules


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


def _point(rate: float, tpot: float, ttft: float, output: float) -> tuple[dict, dict]:
    sweep = {"kind": "request_rate", "value": rate, "index": 0, "points": 3}
    return sweep, {"mean_tpot_ms": tpot, "mean_ttft_ms": ttft, "output_throughput": output}


def test_the_objective_point_is_the_best_load_within_the_slos() -> None:
    curve = [_point(2, 9.0, 100.0, 1000.0), _point(6, 11.0, 400.0, 2900.0), _point(9, 14.0, 5000.0, 3100.0)]
    slos = {"mean_tpot_ms": 12.0, "mean_ttft_ms": 2000.0}
    assert objective_point(curve, "output_throughput", slos) == (curve[1][1], True)
    # none meets a tighter limit: the lowest load, where it comes closest
    assert objective_point(curve, "output_throughput", {"mean_tpot_ms": 5.0}) == (curve[0][1], False)
    # an unswept result is its own point
    assert objective_point([(None, curve[2][1])], "output_throughput", slos) == (curve[2][1], False)
    assert point_figures(curve[1][1], accelerators=8) == Figures(400.0, 11.0, 2900.0 / 8)
    assert launch_figures([curve, curve], "output_throughput", slos, 8) == Figures(400.0, 11.0, 2900.0 / 8)


def test_a_choice_compares_the_best_of_each_side_or_says_why_one_has_none() -> None:
    rules = Rules(spread=StudySpread.given(2.0))
    split = Contender("disaggregated 3P1D (P TP2, D TP2)", True, (280.0, 282.0), Figures(250.0, 8.0, 35.0))
    slow = Contender("disaggregated 1P7D (P TP1, D TP1)", True, (150.0,), Figures(900.0, 20.0, 19.0))
    whole = Contender("aggregated TP2 ×4", False, (100.0, 101.0), Figures(150.0, 11.0, 12.6))
    choice = choose_layout("Serving layout", split.layout, [slow, whole, split], rules)
    assert choice is not None and choice.split is split and choice.aggregated is whole
    assert choice.verdict is not None and choice.verdict.outcome == "better"
    assert choice.text().startswith(
        "Serving layout: chose disaggregated 3P1D (P TP2, D TP2). Disaggregated 3P1D (P TP2, D TP2) against "
        "aggregated TP2 ×4: TPOT −27 %, TTFT +67 %, tokens/s/GPU +178 %"
    )
    broken = Contender(whole.layout, False, (100.0,), whole.figures, ("mean_tpot_ms 14.0 > 12",))
    choice = choose_layout("Layout", split.layout, [split, broken], rules)
    assert choice is not None and choice.verdict is None
    assert choice.why_not == (
        "No aggregated layout met the SLOs; the best, aggregated TP2 ×4: mean_tpot_ms 14.0 > 12; its "
        "figures: TPOT 11.0 ms, TTFT 150 ms, 13 tokens/s/GPU.",
    )
    assert choose_layout("Layout", split.layout, [split, slow], rules) is None


def test_a_layout_is_named_as_people_write_it() -> None:
    assert layout_of(EngineConfig(engine="sglang", model="m", tp=2, replicas=4)) == "aggregated TP2 ×4"
    moe = EngineConfig(engine="sglang", model="m", tp=2, dp=4, ep=8, dp_attention=True)
    assert layout_of(moe) == "aggregated TP2 DP4 EP8 attention-DP"
    split = EngineConfig(
        engine="sglang", model="m", disaggregation={"prefill": {"workers": 3, "tp": 2}, "decode": {"tp": 2}}
    )
    assert layout_of(split) == "disaggregated 3P1D (P TP2, D TP2)"
