"""The trade a serving layout makes against another, in one sentence a report can print.

Disaggregating prefill from decode usually buys inter-token latency with time to first token (the KV
cache crosses a link before decoding starts) and changes throughput per accelerator either way; the
sentence names all three changes against the reference, e.g. ``disaggregated 3P1D (P TP2, D TP2)
against TP2 ×4: TPOT −38 %, TTFT +22 %, tokens/s/GPU +12 %`` (a negative latency change is a gain).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Figures:
    """The figures a layout is compared on: mean TTFT and TPOT (ms) and output tokens/s per GPU."""

    ttft_ms: float
    tpot_ms: float
    tokens_per_s_per_gpu: float


def change_pct(value: float, reference: float) -> float:
    """``value`` against ``reference`` in %, (value − reference) / reference."""
    return (value - reference) / reference * 100.0


def _signed(pct: float) -> str:
    return f"{'+' if pct >= 0 else '−'}{abs(pct):.0f} %"


def trade_sentence(label: str, figures: Figures, reference_label: str, reference: Figures) -> str:
    """``label`` against ``reference_label``: its TPOT, TTFT and tokens/s/GPU changes, then who wins."""
    gain = figures.tokens_per_s_per_gpu / reference.tokens_per_s_per_gpu
    winner = label if gain >= 1 else reference_label
    factor = gain if gain >= 1 else 1 / gain
    return (
        f"{label} against {reference_label}: TPOT {_signed(change_pct(figures.tpot_ms, reference.tpot_ms))}, "
        f"TTFT {_signed(change_pct(figures.ttft_ms, reference.ttft_ms))}, tokens/s/GPU "
        f"{_signed(change_pct(figures.tokens_per_s_per_gpu, reference.tokens_per_s_per_gpu))} "
        f"({winner} by {factor:.2f}×)"
    )
