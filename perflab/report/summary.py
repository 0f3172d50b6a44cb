"""The Summary of Optimization Options, and how gains and losses are coloured.

- **Throughput Improvement** (the seeds' column): a stage that kept a winner on a decision with its
  noise shows that decision's published gain (:mod:`perflab.report.published`) against the best
  configuration before the stage, its reference. A stage of an imported write-up (one measurement
  each) shows the winner against the best configuration kept before it *on the winner's engine*, the
  baseline when that engine had none, as the seeds computed it (seed 000: Engine Selection = SGLang
  4635.31 against vLLM 3792.50 → +22.2%; Parallelism = vLLM TP4 ×2 against vLLM's best so far, the
  baseline 3792.50 → +59.2%, though SGLang had been kept in between). A stage that kept nothing shows
  ``-``.
- **Against the baseline** (seed 002's summary): a kept winner's published gains so far, one after
  the other; the last kept winner, the recommendation, shows the recommendation's published gain (and
  so does its own column when it was measured against the baseline itself: a winner kept because it
  alone met the SLOs publishes no gain of its own); a stage's best candidate that was not
  kept, or a write-up's, measured against the baseline, with its note ("lower than previous",
  "Success rate: 51.6%").

Every change is new ÷ old − 1, a gain or a loss (docs/studies.md § Reports). Seeds 000, 001, 003 and
004 print one decimal, seed 002 two. Gains are coloured ``background-color:lightgreen``, losses
``background-color:#fbcaca``, no change not at all.
"""

from __future__ import annotations

from collections.abc import Sequence

from perflab.report.model import CandidateSection, StageSection, SummaryRow
from perflab.report.published import PublishedGain, as_change, chained, measured_gain, published_gain

GAIN_COLOUR = "lightgreen"
LOSS_COLOUR = "#fbcaca"


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


def summary_rows(
    baseline: CandidateSection,
    stages: Sequence[StageSection],
    *,
    lower_is_better: bool = False,
    recommendation: PublishedGain | None = None,
) -> list[SummaryRow]:
    """One row per decided stage, by the rules above; ``recommendation`` is what the recommendation over
    the baseline publishes, as a change of the objective (the last kept winner's figure against the
    baseline)."""
    pick = min if lower_is_better else max
    kept: list[CandidateSection] = [baseline]
    published: list[PublishedGain] = []
    rows: list[SummaryRow] = []
    last_kept = None
    on_baseline = False  # the last kept winner was measured against the baseline itself
    for stage in stages:
        if not stage.decided:
            continue
        best = _best_candidate(stage, lower_is_better)
        improvement = None
        versus = measured_gain(best.value, baseline.value) if best is not None and baseline.value else None
        if stage.winner is not None and best is not None:
            if best.verdict is not None:
                improvement = as_change(published_gain(best.verdict), lower_is_better=lower_is_better)
                published.append(improvement)
                versus, on_baseline = chained(published), False
            else:
                same_engine = [c for c in kept if c.engine == best.engine and _measured(c)]
                reference = pick(same_engine, key=lambda c: c.value) if same_engine else baseline
                improvement = measured_gain(best.value, reference.value)
                on_baseline = reference is baseline
            kept.append(best)
            last_kept = len(rows)
        note = best.note if best is not None and stage.winner is None else None
        rows.append(SummaryRow(stage.name, improvement, versus, note))
    if recommendation is not None and last_kept is not None:
        # the last kept winner is the recommendation: against the baseline it is the pair the
        # recommendation publishes, and so is its own gain where nothing was kept before it
        row = rows[last_kept]
        improvement = recommendation if on_baseline else row.improvement
        rows[last_kept] = SummaryRow(row.option, improvement, recommendation, row.note)
    return rows
