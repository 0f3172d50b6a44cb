"""The one decision both strategies make: does a candidate beat its reference, and how sure is it?

:func:`decide` takes the launch values of a candidate and of its reference (one value per launch, the
mean of that launch's runs) and the study's :class:`~perflab.study.types.Rules`, and answers with a
:class:`Decision` from the :class:`~perflab.study.verdict.Verdict` of :func:`verdict` — the
group-sequential test on the study's spread (:mod:`perflab.study.verdict`):

- ``better`` when the gain clears the look's boundary above ``min_gain``;
- ``not_better`` when the whole interval lies below it;
- ``undecided`` while neither holds and launches remain (measure again), or while the spread rests on
  too few launches to judge;
- ``within_noise`` at the last look, or when the estimate is too weak to reach the bar (futility);
- ``noise_unknown`` when no spread could be had: never a reason to keep anything.

Several candidates against one reference are decided together by :func:`decide_family`: α shared among
them by Holm's step-down rule, so the chance that the family keeps any candidate whose true gain is at
most the minimum gain stays within the one-sided α however many there are — a stage's candidates, or a
search's finalists measured on launches of their own (the best of N, picked with family-wise control).
``final`` marks a last look (no launch will follow). Before any comparison of values,
:func:`feasibility` applies the study's SLOs: a candidate that breaks one is ``infeasible``, whatever
its value; one that meets them all is better than a reference that breaks one.

Write-ups imported from elsewhere (``rules.measures_noise`` false) are decided on their one measurement
as their authors did — ``better`` when the candidate beats the reference by at least ``min_gain`` — and
every such figure says it is one measurement with its noise unknown.

The staged plan (:mod:`perflab.study.plan`) and the search (:mod:`perflab.study.search`,
:mod:`perflab.study.search_stage`) both call them, so the procedure is replaced here for both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import fmean
from typing import Literal, TypeVar

from perflab.study.types import CandidatePlan, Measurement, Rules, StudyPlan, gain_text
from perflab.study.verdict import (
    NOISE_UNKNOWN,
    Verdict,
    detectable_gain_pct,
    holm_shares,
    judge,
)

Outcome = Literal["better", "not_better", "within_noise", "undecided", "noise_unknown", "infeasible"]
Key = TypeVar("Key")
# The staged plan launches a stage's reference once more than each of its candidates (before and after).
STAGE_LEAD = 1
Member = TypeVar("Member")


def round_order(members: Sequence[Member], round_number: int) -> list[Member]:
    """A round's launches (1-based ``round_number``): in the order given in odd rounds, reversed in even
    ones, so a linear drift of the host's speed gives every member the same mean launch position over
    each pair of rounds."""
    return list(members) if round_number % 2 == 1 else list(reversed(members))


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
    first: int | None = None,
    lead: int | None = None,
) -> Verdict:
    """The verdict on ``candidate``'s launch values against ``reference``'s under ``rules``; ``first``
    is the candidate's launch count at its first look (default: ``rules.relaunches``), ``lead`` how many
    more launches the design gives the reference (default: as many as it has now)."""
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
        first=rules.relaunches if first is None else first,
        most=max(rules.max_launches, rules.relaunches),
        alpha_share=alpha_share,
        final=final,
        lead=lead,
        spread_launches=spread.launches if spread is not None else None,
    )


def design_df(rules: Rules, candidates: int = 1) -> int:
    """The degrees of freedom a stage of ``candidates`` candidates has of its own at its last look: each
    candidate's launches less one and the reference's (one more than theirs) less one."""
    most = max(rules.max_launches, rules.relaunches)
    return candidates * (most - 1) + most + STAGE_LEAD - 1


def detectable_gain(rules: Rules, candidates: int = 1) -> float | None:
    """The true gain, in %, that a stage of ``candidates`` candidates deciding under ``rules`` keeps 80 %
    of the time at the study's spread (before the study has one: at the spread an earlier study offered
    it), on the launches the design gives it; None while no spread is known. A property of the host (its
    spread) and of the design, not of any outcome."""
    spread = rules.spread
    cv_pct = None
    if spread is not None:
        cv_pct = spread.cv_pct if spread.known else (spread.reused.cv_pct if spread.reused else None)
    return detectable_gain_pct(
        min_gain_pct=rules.min_gain * 100.0,
        cv_pct=cv_pct,
        df=float(design_df(rules, candidates)),
        confidence=rules.confidence,
        first=rules.relaunches,
        most=rules.max_launches,
        lead=STAGE_LEAD,
        candidates=candidates,
        lower_is_better=rules.lower_is_better,
    )


def detectable_text(gain_pct: float, candidates: int = 1) -> str:
    """What the detectable gain says, worded so a kept smaller gain cannot contradict it."""
    where = "" if candidates <= 1 else f" among {candidates} candidates of a stage"
    return (
        f"this host and design keep a true gain of {gain_pct:.1f} %{where} 4 times in 5 (80 % power); "
        "smaller true gains are kept less often, larger ones more"
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
    if found.too_little:
        notes["undecided"] = f"{text}, measuring both again"
        notes["noise_unknown"] = f"{text}: nothing is kept on it"
    return Decision(found.outcome, found.published_text(), notes[found.outcome], found)


def decide(
    candidate: Sequence[float],
    reference: Sequence[float],
    rules: Rules,
    *,
    final: bool = False,
    alpha_share: float = 1.0,
    first: int | None = None,
    lead: int | None = None,
) -> Decision:
    """The decision on a candidate from its and its reference's launch values (see the module)."""
    if rules.measures_noise:
        found = verdict(
            candidate, reference, rules, final=final, alpha_share=alpha_share, first=first, lead=lead
        )
        return _judged(found)
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


def decide_family(
    candidates: Mapping[Key, Sequence[float]],
    reference: Sequence[float],
    rules: Rules,
    *,
    kept: int = 0,
    tested: int | None = None,
    final: bool = False,
    first: Mapping[Key, int] | None = None,
    lead: int | None = None,
    references: Mapping[Key, Sequence[float]] | None = None,
) -> dict[Key, Decision]:
    """Each of ``candidates`` (launch values by key) decided against one ``reference``, α shared among
    the family's ``tested`` hypotheses (default: the candidates given) by Holm's step-down rule (Holm
    1979): ``kept`` of the family were kept before (decisions that stand), and each candidate kept now
    passes its share on to the others, which are judged again until no more is kept — recycled into the
    sequential tests as in Maurer & Bretz (2013). The chance that the family keeps any candidate whose
    true gain is at most the minimum gain stays within the one-sided α. ``first`` gives a candidate's
    launch count at its first look (default ``rules.relaunches``); ``lead`` and ``final`` as for
    :func:`decide`; ``references`` a candidate's own launches of the reference (those beside its own),
    ``reference`` for the others.

    The best of N finalists picked with family-wise control: give every finalist's own (fresh) launches;
    the kept ones are those whose decision is ``better``, and the pick among them stands on that."""
    tested = len(candidates) if tested is None else tested
    first, references = first or {}, references or {}
    now = kept
    while True:
        share = holm_shares(now, tested)
        found = {
            key: decide(
                values,
                references.get(key, reference),
                rules,
                final=final,
                alpha_share=share,
                first=first.get(key),
                lead=lead,
            )
            for key, values in candidates.items()
        }
        better = kept + sum(1 for decision in found.values() if decision.outcome == "better")
        if better <= now:
            return found
        now = better


def feasibility(candidate: Measurement, reference: Measurement, reference_label: str) -> Decision | None:
    """What the SLOs decide before any value is compared: ``infeasible`` for a candidate that breaks
    one, ``better`` for one that meets every SLO its reference breaks; None when both meet them."""
    if candidate.violations:
        return Decision("infeasible", "", f"breaks the SLOs: {'; '.join(candidate.violations)}, skipped")
    if reference.violations:
        return Decision("better", f"meets the SLOs, which {reference_label} breaks")
    return None


def _direct(best: CandidatePlan, baseline: CandidatePlan, rules: Rules) -> Verdict:
    """The comparison of every launch of the best configuration with every launch of the baseline, at
    the study's confidence (one look: a description, not a test: the best was selected on them)."""
    ours, theirs = best.measurement.samples, baseline.measurement.samples
    return verdict(ours, theirs, rules, final=True, first=len(ours), lead=max(len(theirs) - len(ours), 0))


def recommendation(plan: StudyPlan, rules: Rules) -> Verdict | None:
    """How sure the study is that its recommended configuration beats the baseline: the comparison of
    all their launches, published on the fresh launches of the confirmation (:mod:`perflab.study.confirm`)
    once measured, before that as the product of the kept stages' published gains, to be confirmed
    (None while either has no value, or when nothing is recommended over the baseline)."""
    if not rules.measures_noise or plan.best is plan.baseline:
        return None
    if plan.best.value is None or plan.baseline.value is None:
        return None
    found = _direct(plan.best, plan.baseline, rules)
    confirmation = plan.confirmation
    if confirmation is not None and confirmation.closing is not None:
        closing = confirmation.closing
        return found.with_confirmation(
            closing.gain_pct, closing.half_width_pct, (closing.n_candidate, closing.n_reference)
        )
    kept = [stage.winner.verdict for stage in plan.stages if stage.winner and stage.winner.verdict]
    if not kept:
        return found
    sign = -1.0 if rules.lower_is_better else 1.0
    ratio = math.prod(1.0 + sign * stage.published_gain_pct / 100.0 for stage in kept)
    return replace(found, adjusted_gain_pct=sign * (ratio - 1.0) * 100.0)
