"""The one decision both strategies make: does a candidate beat its reference, and how sure is it?

:func:`decide` takes the launch values of a candidate and of its reference (one value per launch, the
mean of that launch's runs) and the study's :class:`~perflab.study.types.Rules`, and answers with a
:class:`Decision` from the :class:`~perflab.study.verdict.Verdict` of :func:`verdict` — the
group-sequential test on the study's spread (:mod:`perflab.study.verdict`):

- ``better`` when the gain clears the look's boundary above ``min_gain``;
- ``not_better`` when the whole interval lies below it;
- ``undecided`` while neither holds and launches remain (measure again);
- ``within_noise`` at the last look, or when the estimate is too weak to reach the bar (futility);
- ``noise_unknown`` when no spread could be had: never a reason to keep anything.

A stage testing several candidates against one reference gives each its Holm share of α
(``alpha_share``). ``final`` marks a last look (no launch will follow). Before any comparison of values,
:func:`feasibility` applies the study's SLOs: a candidate that breaks one is ``infeasible``, whatever its
value; one that meets them all is better than a reference that breaks one.

Write-ups imported from elsewhere (``rules.measures_noise`` false) are decided on their one measurement
as their authors did — ``better`` when the candidate beats the reference by at least ``min_gain`` — and
every such figure says it is one measurement with its noise unknown.

The staged plan (:mod:`perflab.study.plan`) and the search (:mod:`perflab.study.search`,
:mod:`perflab.study.search_stage`) both call them, so the procedure is replaced here for both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from statistics import fmean
from typing import Literal

from perflab.study.types import CandidatePlan, Measurement, Rules, StudyPlan, gain_text
from perflab.study.verdict import NOISE_UNKNOWN, Verdict, detectable_gain_pct, judge

Outcome = Literal["better", "not_better", "within_noise", "undecided", "noise_unknown", "infeasible"]


@dataclass(frozen=True)
class Decision:
    """A candidate against its reference: the outcome, the gain as text (the verdict's, with its
    interval, when there is one), why it is not kept (None when it is better) and the verdict."""

    outcome: Outcome
    gain: str
    note: str | None = None
    verdict: Verdict | None = None


def verdict(
    candidate: Sequence[float],
    reference: Sequence[float],
    rules: Rules,
    *,
    final: bool = False,
    alpha_share: float = 1.0,
) -> Verdict:
    """The verdict on ``candidate``'s launch values against ``reference``'s under ``rules``."""
    spread = rules.spread
    known = spread is not None and spread.known
    return judge(
        candidate,
        reference,
        higher_is_better=not rules.lower_is_better,
        min_gain_pct=rules.min_gain * 100.0,
        cv_pct=spread.cv_pct if known else None,
        df=spread.df if known else 0.0,
        confidence=rules.confidence,
        first=rules.relaunches,
        most=max(rules.max_launches, rules.relaunches),
        alpha_share=alpha_share,
        final=final,
    )


def detectable_gain(rules: Rules) -> float | None:
    """The smallest gain, in %, that a study deciding under ``rules`` keeps 80 % of the time at its
    spread (None while the spread is unknown)."""
    spread = rules.spread
    return detectable_gain_pct(
        min_gain_pct=rules.min_gain * 100.0,
        cv_pct=spread.cv_pct if spread is not None else None,
        df=spread.df if spread is not None else 0.0,
        confidence=rules.confidence,
        first=rules.relaunches,
        most=rules.max_launches,
        reference_launches=rules.baseline_launches,
    )


def _judged(found: Verdict) -> Decision:
    text = found.text()
    notes = {
        "better": None,
        "not_better": f"{text}: not better, skipped",
        "within_noise": f"{text}: {found.outcome_text()}, neither kept nor beaten",
        "undecided": f"{text}: a close call, measuring both again",
        "noise_unknown": f"{text}: nothing is kept on one measurement",
    }
    return Decision(found.outcome, found.published_text(), notes[found.outcome], found)


def decide(
    candidate: Sequence[float],
    reference: Sequence[float],
    rules: Rules,
    *,
    final: bool = False,
    alpha_share: float = 1.0,
) -> Decision:
    """The decision on a candidate from its and its reference's launch values (see the module)."""
    if rules.measures_noise:
        return _judged(verdict(candidate, reference, rules, final=final, alpha_share=alpha_share))
    mine, theirs = fmean(candidate), fmean(reference)
    gain = f"{gain_text(mine, theirs)} ({NOISE_UNKNOWN})"
    if rules.better(theirs, mine):
        worse = "higher" if rules.lower_is_better else "lower"
        return Decision("not_better", gain, f"{gain}: {worse} than previous, skipped")
    factor = 1.0 - rules.min_gain if rules.lower_is_better else 1.0 + rules.min_gain
    beats = mine < theirs * factor if rules.lower_is_better else mine > theirs * factor
    if not beats:
        return Decision(
            "not_better", gain, f"{gain}: below the {rules.min_gain * 100:g}% minimum gain, skipped"
        )
    return Decision("better", gain)


def feasibility(candidate: Measurement, reference: Measurement, reference_label: str) -> Decision | None:
    """What the SLOs decide before any value is compared: ``infeasible`` for a candidate that breaks
    one, ``better`` for one that meets every SLO its reference breaks; None when both meet them."""
    if candidate.violations:
        return Decision("infeasible", "", f"breaks the SLOs: {'; '.join(candidate.violations)}, skipped")
    if reference.violations:
        return Decision("better", f"meets the SLOs, which {reference_label} breaks")
    return None


def _over_baseline(
    best: CandidatePlan, baseline: CandidatePlan, rules: Rules, kept: Sequence[Verdict]
) -> Verdict | None:
    """How sure the study is that its best configuration beats the baseline: the comparison of their
    launches at the study's confidence (one look, no selection adjustment), with the published gain the
    product of the gains adjusted for selection of the stages that ``kept`` a change on the way (None
    while either has no value, or when the best is the baseline)."""
    if not rules.measures_noise or best is baseline or best.value is None or baseline.value is None:
        return None
    ours, theirs = best.measurement.samples, baseline.measurement.samples
    spread = rules.spread
    known = spread is not None and spread.known
    found = judge(
        ours,
        theirs,
        higher_is_better=not rules.lower_is_better,
        min_gain_pct=rules.min_gain * 100.0,
        cv_pct=spread.cv_pct if known else None,
        df=spread.df if known else 0.0,
        confidence=rules.confidence,
        first=len(ours),
        most=len(ours),
        final=True,
    )
    if not kept:
        return found
    sign = -1.0 if rules.lower_is_better else 1.0
    ratio = math.prod(1.0 + sign * stage.published_gain_pct / 100.0 for stage in kept)
    return replace(found, adjusted_gain_pct=sign * (ratio - 1.0) * 100.0)


def recommendation(plan: StudyPlan, rules: Rules) -> Verdict | None:
    """How sure the study is that its best configuration beats the baseline: the direct comparison of
    their launches, its published gain the product of the gains, adjusted for selection, of the stages
    that kept a change on the way (None while either has no value, or when the best is the baseline)."""
    kept = [stage.winner.verdict for stage in plan.stages if stage.winner and stage.winner.verdict]
    return _over_baseline(plan.best, plan.baseline, rules, kept)
