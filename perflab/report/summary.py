"""How the seeds compute and print their improvement percentages.

- **Conclusion table**: the optimized node total against the baseline's, per benchmark case
  (seed 000: ``3019.19×2`` = 6038.38 against 3792.50 → ``+59.2%``).
- **Summary of Optimization Options** ("Throughput Improvement"): a stage that kept a winner shows
  the winner against the best configuration kept before it *on the winner's engine*, the baseline when
  that engine had none (seed 000: Engine Selection = SGLang 4635.31 against vLLM 3792.50 → +22.2%;
  Parallelism = vLLM TP4 ×2 against vLLM's best so far, the baseline 3792.50 → +59.2%, though SGLang
  had been kept in between; seed 003: Quantization = SGLang FP8 against SGLang → +23.8%). A stage that
  kept nothing shows ``-``.
- **Against the baseline** (seed 002's summary): each stage's best candidate against the baseline,
  with its note when it was not kept ("lower than previous", "Success rate: 51.6%").

A loss is written as how much more the other side achieved, negated (seed 001's Very Long Prompt:
baseline 1798.45, optimized 1580.36 → 1798.45 / 1580.36 − 1 = ``-13.8%``); a gain is new ÷ old − 1.
Seeds 000, 001, 003 and 004 print one decimal, seed 002 two. Gains are coloured
``background-color:lightgreen``, losses ``background-color:#fbcaca``, no change not at all.
"""

from __future__ import annotations

from collections.abc import Sequence

from perflab.report.model import CandidateSection, StageSection, SummaryRow, relative_change

GAIN_COLOUR = "lightgreen"
LOSS_COLOUR = "#fbcaca"


def percent_text(change: float, decimals: int = 1) -> str:
    """``0.592`` → ``+59.2%`` (``decimals`` places, explicit sign)."""
    return f"{change * 100:+.{decimals}f}%"


def coloured(text: str, change: float) -> str:
    """``text`` in a span coloured as the seeds colour gains and losses; no change (a configuration
    against itself, as while only the baseline is measured) is neither, and left plain."""
    if change == 0:
        return text
    colour = GAIN_COLOUR if change > 0 else LOSS_COLOUR
    return f'<span style="background-color:{colour};">{text}</span>'


def _measured(candidate: CandidateSection) -> bool:
    return candidate.value is not None and candidate.decision not in ("failed", "disqualified")


def ranked(stage: StageSection, *, lower_is_better: bool = False) -> list[CandidateSection]:
    """The stage's candidates measured by their own run (not failed, not reused), best first."""
    measured = [c for c in stage.candidates if c.value is not None and c.decision not in ("failed", "reused")]
    return sorted(measured, key=lambda c: c.value, reverse=not lower_is_better)


def _best_candidate(stage: StageSection, lower_is_better: bool) -> CandidateSection | None:
    if stage.winner is not None:
        return next(candidate for candidate in stage.candidates if candidate.label == stage.winner)
    return next(iter(ranked(stage, lower_is_better=lower_is_better)), None)


def cost_change(new: float, old: float) -> float:
    """A lower-is-better value (cost) against its reference: new ÷ old − 1 (−38 % is 38 % cheaper)."""
    return new / old - 1.0


def summary_rows(
    baseline: CandidateSection, stages: Sequence[StageSection], *, lower_is_better: bool = False
) -> list[SummaryRow]:
    """One row per decided stage, by the rules above; for a lower-is-better objective (cost) the
    reference is the cheapest kept and changes are :func:`cost_change`."""
    change = cost_change if lower_is_better else relative_change
    pick = min if lower_is_better else max
    kept: list[CandidateSection] = [baseline]
    rows = []
    for stage in stages:
        if not stage.decided:
            continue
        best = _best_candidate(stage, lower_is_better)
        improvement = None
        if stage.winner is not None and best is not None:
            same_engine = [c for c in kept if c.engine == best.engine and _measured(c)]
            reference = pick(same_engine, key=lambda c: c.value) if same_engine else baseline
            improvement = change(best.value, reference.value)
            kept.append(best)
        versus = change(best.value, baseline.value) if best is not None and baseline.value else None
        note = best.note if best is not None and stage.winner is None else None
        rows.append(SummaryRow(stage.name, improvement, versus, note))
    return rows
