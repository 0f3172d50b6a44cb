"""The one decision both strategies make: does a candidate beat its reference, and how sure is it?

:func:`decide` takes the launch values of a candidate and of its reference (one value per launch, the
mean of that launch's runs) and the study's :class:`~perflab.study.types.Rules`, and answers with a
:class:`Decision`:

- a study that measures its noise (``rules.measures_noise``) decides by the
  :class:`~perflab.study.verdict.Verdict` of :func:`verdict`: ``better`` when the gain's interval lies
  above ``min_gain``, ``not_better`` below it, ``undecided`` while it straddles the threshold and more
  launches are allowed (measure both again), ``within_noise`` once they are not;
- otherwise on the means, as the seeds did: ``better`` when the candidate beats the reference by at
  least ``min_gain``, else ``not_better`` ("lower than previous" or "below the minimum gain").

``final`` marks a last look (no launch will follow): a call still straddling the threshold is within
noise. Before any comparison of values, :func:`feasibility` applies the study's SLOs: a candidate
that breaks one is ``infeasible``, whatever its value; one that meets them all is better than a
reference that breaks one. The staged plan (:mod:`perflab.study.plan`) and the search
(:mod:`perflab.study.search`, :mod:`perflab.study.search_stage`) both call them, so the procedure is
replaced here for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Literal

from perflab.study.types import CandidatePlan, Measurement, Rules, gain_text
from perflab.study.verdict import Verdict, judge

Outcome = Literal["better", "not_better", "within_noise", "undecided", "infeasible"]


@dataclass(frozen=True)
class Decision:
    """A candidate against its reference: the outcome, the gain as text (the verdict's, with its
    interval, when there is one), why it is not kept (None when it is better) and the verdict."""

    outcome: Outcome
    gain: str
    note: str | None = None
    verdict: Verdict | None = None


def verdict(
    candidate: Sequence[float], reference: Sequence[float], rules: Rules, *, final: bool = False
) -> Verdict:
    """The verdict on ``candidate``'s launch values against ``reference``'s under ``rules``."""
    return judge(
        candidate,
        reference,
        higher_is_better=not rules.lower_is_better,
        min_gain_pct=rules.min_gain * 100.0,
        confidence=rules.confidence,
        max_n=len(candidate) if final else rules.max_launches,
        prior_cv_pct=rules.prior_cv_pct,
        prior_df=rules.prior_df,
    )


def _judged(candidate: Sequence[float], reference: Sequence[float], rules: Rules, final: bool) -> Decision:
    found = verdict(candidate, reference, rules, final=final)
    text = found.text()
    notes = {
        "better": None,
        "not_better": f"{text}: not better, skipped",
        "within_noise": f"{text}: {found.outcome_text()}, neither kept nor beaten",
        "undecided": f"{text}: a close call, measuring both again (A B A B)",
    }
    return Decision(found.outcome, text, notes[found.outcome], found)


def decide(
    candidate: Sequence[float], reference: Sequence[float], rules: Rules, *, final: bool = False
) -> Decision:
    """The decision on a candidate from its and its reference's launch values (see the module)."""
    if rules.measures_noise:
        return _judged(candidate, reference, rules, final)
    mine, theirs = fmean(candidate), fmean(reference)
    gain = gain_text(mine, theirs)
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


def over_baseline(best: CandidatePlan, baseline: CandidatePlan, rules: Rules) -> Verdict | None:
    """How sure a study that measures its noise is that its best configuration beats the baseline (None
    without measured noise, or while either has no value)."""
    if not rules.measures_noise or best is baseline or best.value is None or baseline.value is None:
        return None
    return verdict(best.measurement.samples, baseline.measurement.samples, rules)
