"""The search's final pick: its finalists measured again until decided, and kept over the reference only
on launches that took no part in choosing them.

A search launches many configurations once each and ranks them by that one launch, so its best trial
is partly the best because its launch came out high (best-of-N selection). Testing it on that launch,
against the configuration the stage started from (the reference: the baseline, or an earlier stage's
winner), would keep a no-gain pick far more often than α. :func:`final_pick` therefore:

1. takes as **finalists** the :data:`MAX_FINALISTS` best trials by their first launch (the search's own
   measurement, or its screening) among the feasible ones and the **borderline** ones: those that broke
   an SLO by at most :data:`BORDERLINE_SPREADS` launch spreads (the study's CV, as a fraction of the
   limit) on their screening or one launch of the full profile, or by at most that many spreads of
   the mean (the CV ÷ √n) on the mean of their ``n`` launches. One launch's noise moves an SLO's figure
   as it moves the objective's, so a configuration whose true figure lies just within its limit breaks
   it on some launches — a search that took one such launch, or the mean of two, for the truth would
   discard a feasible optimum. A borderline finalist is launched (on the full profile) again in every
   round until the mean of its launches settles its SLOs: it meets them, or breaks them by more than
   that band, or its launches (the search's and ``max_measurements`` more) have run out and it breaks
   them; then it is a finalist like any feasible one, or leaves. No pick is made while a finalist's
   SLOs are unsettled, so a pick's mean never breaks an SLO. Its first launch of the full profile counts
   as the search's, as every finalist's does;
2. launches each finalist again (**confirmation launches**, the tuning profile only) in **rounds**
   beside the reference (below), and judges each against the reference on its confirmation launches
   and the reference's launches of the same rounds alone, with
   :func:`perflab.study.decide.decide_family` (the family decision a stage's candidates get): the
   group-sequential verdict at the study's confidence and minimum gain, one look per round up to
   ``max_measurements``, α shared among the finalists by Holm's step-down rule. A close call, or no
   verdict yet while the study's spread rests on too few launches, gets another round; no finalist is
   dropped while launches remain;
3. among the finalists kept over the reference, separates the best from the others by the same
   verdict on all their launches: the best stands when it is better, the cheaper (fewer accelerators,
   then the smaller batch) when they are equivalent, the higher mean when the launches allowed could
   not tell them apart (and the pick says so).

**The false-change rate.** The confirmation launches are independent of the launches that chose the
finalists, so each finalist's keep test holds its α share whatever the search did before, and Holm's
rule keeps the chance that the stage keeps any configuration whose true gain over the reference is at
most the minimum gain within the one-sided α = (1 − confidence) / 2 (2.5 % at 95 %) — however many
trials the search made. The spread the verdicts use is the study's (pooled over every configuration
measured on two launches or more, the finalists' included), or the search's ``noise_cv_pct`` when the
spec states one; a search that states ``noise_cv_pct: 0`` (launches that measure without noise) judges
its finalists on all their launches, against all the reference's, and needs no confirmation launch.
When the reference breaks an SLO, every feasible finalist beats it
(:func:`perflab.study.decide.feasibility`), its rounds launch no reference and only step 3 remains.

**Launch order: balanced rounds.** Each round launches the reference beside every finalist still to
measure, in an order that mirrors from one round to the next (:func:`perflab.study.decide.round_order`,
the order of a stage's rounds): R F1 F2 F3, then F3 F2 F1 R. Over each pair of rounds every
configuration's launches then have the same mean position, so a drift of the host's speed that is
linear over the pair (warming up, load leaving) cancels from each comparison instead of reading as a
gain, and the reference's launches before the search, which a drift would set apart, take no part. The
rounds are read from the launches alone: a round that takes a finalist to a launch no finalist has had
yet launches the reference too, so the reference's launches of the confirmation are its latest ``N``
(``N`` the most confirmation launches of any finalist) and a finalist with ``n`` is judged on the first
``n`` of them. A look after an odd round is left the drift of that round (at most a launch's drift per
finalist, divided by ``N``). A round that only catches up a finalist whose decision reopened after it
had stopped launches no reference, and compares that finalist's later launches with earlier rounds of
the reference. The separation of step 3 launches the finalists it compares in the same mirrored rounds
(the reference with them), on all their launches, the search's included. The search stage looks only
once every launch of a round is back (:mod:`perflab.study.search_stage`) and queues a round in its
order; a host takes a study's queued launches oldest first.

Pure: every advance calls it again with all the launches so far.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from statistics import fmean

from perflab.study.decide import Decision, decide_family, round_order, verdict
from perflab.study.noise import StudySpread
from perflab.study.search import Trial, directions, feasible, pareto_front
from perflab.study.search_space import SearchSpec
from perflab.study.types import Measurement, Rules
from perflab.study.verdict import Verdict

# Finalists measured again for the final pick: the best trials by their first launch.
MAX_FINALISTS = 3
# A trial that broke an SLO by at most this many launch spreads (the study's CV) is a borderline finalist.
BORDERLINE_SPREADS = 2.0


@dataclass(frozen=True)
class FinalPick:
    """The search's recommendation and how it was reached.

    ``trial`` is the pick among the finalists kept over the reference (None: none was, or nothing was
    feasible); ``kept`` each finalist's decision against the reference (by trial number); ``versus``
    the verdict that separated the pick from ``runner_up``; ``order`` the round of launches due first,
    in launch order (trial numbers, None for the reference).
    """

    trial: Trial | None
    finalists: tuple[int, ...] = ()
    kept: Mapping[int, Decision] = field(default_factory=dict)
    runner_up: Trial | None = None
    versus: Verdict | None = None
    order: tuple[int | None, ...] = ()
    reason: str = ""
    front: tuple[int, ...] = ()

    @property
    def remeasure(self) -> tuple[int, ...]:
        """The finalists the next round launches, in launch order."""
        return tuple(number for number in self.order if number is not None)

    @property
    def reference_again(self) -> bool:
        """Whether the next round launches the reference."""
        return None in self.order

    @property
    def decision(self) -> Decision | None:
        """The pick's decision against the reference (None without a pick)."""
        return self.kept.get(self.trial.number) if self.trial is not None else None

    @property
    def waiting(self) -> bool:
        """Whether launches are still due before the pick stands."""
        return bool(self.order)


def confirmations(trial: Trial, spec: SearchSpec) -> tuple[float, ...]:
    """A finalist's launches after the one that measured it during the search (all of them when the
    search states that its launches measure without noise, ``noise_cv_pct: 0``: a launch that cannot
    come out high selects nothing by chance)."""
    return tuple(trial.samples if spec.noise_cv_pct == 0 else trial.samples[1:])


def rounds(chosen: Sequence[Trial], spec: SearchSpec) -> int:
    """The confirmation rounds so far: the most confirmation launches any finalist has (the first round
    launches every finalist)."""
    return max((len(confirmations(trial, spec)) for trial in chosen), default=0)


def reference_rounds(reference: Measurement, spec: SearchSpec, count: int) -> tuple[float, ...]:
    """The reference's launches of the ``count`` confirmation rounds so far: its latest ``count`` (a round
    that takes a finalist to a launch no finalist has had yet launches the reference once); all of them
    under ``noise_cv_pct: 0``."""
    samples = tuple(reference.samples)
    if spec.noise_cv_pct == 0:
        return samples
    return samples[max(len(samples) - count, 0) :] if count else ()


def _round(
    members: Sequence[int], chosen: Sequence[Trial], reference: Measurement, spec: SearchSpec
) -> tuple[int | None, ...]:
    """The next round's launches in order: the ``members`` (in the finalists' order) and the reference,
    when the round takes a finalist to a launch no finalist has had yet and the reference's values take
    part (it meets the SLOs), first in odd rounds and last in even ones (R F1 F2, then F2 F1 R)."""
    count = rounds(chosen, spec)
    launches = {trial.number: len(confirmations(trial, spec)) for trial in chosen}
    ordered = [trial.number for trial in chosen if trial.number in members]
    beside = not reference.violations and any(launches[number] == count for number in ordered)
    return tuple(round_order([None, *ordered] if beside else ordered, count + 1))


def pick_rules(spec: SearchSpec, rules: Rules, higher: bool) -> Rules:
    """The rules the final pick judges under: the study's confidence and minimum gain, one look per
    confirmation launch up to ``max_measurements``, the search's ``noise_cv_pct`` as a known spread when
    set (else the study's)."""
    known = spec.noise_cv_pct is not None
    return replace(
        rules,
        lower_is_better=not higher,
        relaunches=1,
        max_launches=spec.max_measurements,
        spread=StudySpread.given(spec.noise_cv_pct) if known else rules.spread,
    )


def borderline_margin(rules: Rules) -> float:
    """How far past an SLO's limit (a fraction of it) a trial is still a borderline finalist:
    :data:`BORDERLINE_SPREADS` of the pick's launch spread; none while the spread is unknown or zero."""
    cv_pct = rules.spread.cv_pct if rules.spread is not None else None
    return BORDERLINE_SPREADS * cv_pct / 100.0 if cv_pct else 0.0


def _cost(trial: Trial) -> tuple[int, int]:
    return (trial.accelerators or 0, trial.batch or 0)


def _mean(trial: Trial) -> float:
    return fmean(trial.samples or trial.values[:1])


def most_launches(spec: SearchSpec) -> int:
    """The most launches of the full profile a finalist gets: the search's and ``max_measurements``
    confirmations."""
    return 1 + spec.max_measurements


def borderline(trial: Trial, margin: float, launches_allowed: int) -> bool:
    """Whether ``trial`` broke an SLO by so little that more launches may find it within its SLOs: by at
    most ``margin`` (a fraction of the limit) on its screening or its one launch of the full profile, by
    at most ``margin / √n`` on the mean of its ``n`` launches (the spread of a mean of ``n``), while it
    has fewer than ``launches_allowed``."""
    launches = len(trial.samples)
    measured = trial.screening is not None or launches > 0
    within = 0.0 < trial.violation <= margin / math.sqrt(max(launches, 1))
    return trial.launched and measured and within and launches < launches_allowed


def finalists(
    trials: Sequence[Trial], objectives: Sequence[str], margin: float, launches_allowed: int
) -> list[Trial]:
    """The best launched trials by their first launch (or screening), feasible or :func:`borderline`
    within ``margin`` and ``launches_allowed``, at most :data:`MAX_FINALISTS`."""
    higher = directions(objectives)[0] == "maximize"
    launched = [
        trial
        for trial in trials
        if trial.launched and (feasible(trial) or borderline(trial, margin, launches_allowed))
    ]

    def first(trial: Trial) -> float:
        value = (*trial.samples, *(trial.values or ()), trial.screening)[0]
        assert value is not None  # a feasible trial has values, a borderline one a launch or a screening
        return -value if higher else value

    return sorted(launched, key=lambda trial: (first(trial), trial.number))[:MAX_FINALISTS]


def _against_reference(
    chosen: Sequence[Trial], reference: Measurement, label: str, rules: Rules, spec: SearchSpec
) -> dict[int, Decision]:
    """Each finalist's decision against the reference on its confirmation launches and the reference's
    launches of the same rounds: the family decision of :func:`perflab.study.decide.decide_family`, α
    shared by Holm's step-down rule as among a stage's candidates."""
    if reference.violations:
        meets = Decision("better", f"meets the SLOs, which {label} breaks")
        return {trial.number: meets for trial in chosen}
    launches = {trial.number: confirmations(trial, spec) for trial in chosen}
    beside = reference_rounds(reference, spec, rounds(chosen, spec))
    paired = {
        number: beside if spec.noise_cv_pct == 0 else beside[: len(values)]
        for number, values in launches.items()
    }
    return decide_family(launches, beside, rules, references=paired)


def _too_little(decision: Decision) -> bool:
    """Whether a decision is undecided only because the spread rests on too few launches."""
    return decision.verdict is not None and decision.verdict.too_little


def _separate(
    kept: Sequence[Trial], rules: Rules, spec: SearchSpec
) -> tuple[Trial, Trial | None, Verdict | None, tuple[int, ...], str]:
    """The pick among the finalists kept over the reference: the pick, the runner-up and the verdict
    between them, the trials to launch again first, and why."""
    higher = not rules.lower_is_better
    ranked = sorted(kept, key=lambda trial: (-_mean(trial) if higher else _mean(trial), trial.number))
    leader = ranked[0]
    if len(ranked) == 1:
        return leader, None, None, (), f"the only finalist kept over the reference (trial {leader.number})"
    min_gain_pct = rules.min_gain * 100.0
    equivalent = [leader]
    runner_up, versus, reasons = None, None, []
    for other in ranked[1:]:
        judged = verdict(list(leader.samples), list(other.samples), rules)
        runner_up, versus = (other, judged) if runner_up is None else (runner_up, versus)
        resolved = (
            math.isfinite(judged.half_width_pct) and judged.gain_pct + judged.half_width_pct < min_gain_pct
        )
        if judged.outcome == "better":
            reasons.append(f"better than trial {other.number}: {judged.text()}")
            continue
        remaining = [
            trial.number
            for trial in (leader, other)
            if len(confirmations(trial, spec)) < spec.max_measurements
        ]
        close = judged.outcome == "undecided" or (judged.outcome == "within_noise" and not resolved)
        if remaining and close:
            return leader, other, judged, tuple(remaining), f"against trial {other.number}: {judged.text()}"
        if resolved:
            equivalent.append(other)
            reasons.append(f"equivalent to trial {other.number} ({judged.text()})")
        else:
            reasons.append(
                f"not separated from trial {other.number} after {spec.max_measurements} confirmation "
                f"launches ({judged.text()}); the higher mean is kept"
            )
    cheapest = min(equivalent, key=lambda trial: (_cost(trial), trial is not leader))
    if cheapest is not leader:
        reasons.append(f"trial {cheapest.number} is the cheaper")
        runner_up = leader
    return cheapest, runner_up, versus, (), "; ".join(reasons)


def _measuring_again(
    undecided: Sequence[Trial], unsettled: Sequence[Trial], kept: Mapping[int, Decision], label: str
) -> str:
    """Why the pick launches another round: close calls against the reference, SLOs not yet settled."""
    reasons = []
    if undecided:
        texts = "; ".join(f"#{trial.number}: {kept[trial.number].gain}" for trial in undecided)
        why = (
            "no verdict yet" if all(_too_little(kept[trial.number]) for trial in undecided) else "close calls"
        )
        reasons.append(f"{why} against {label}, measuring again ({texts})")
    if unsettled:
        texts = "; ".join(
            f"#{trial.number}: {trial.violation * 100:.1f} % past a limit on the mean of "
            f"{len(trial.samples)} launch{'es' if len(trial.samples) != 1 else ''}"
            for trial in unsettled
        )
        reasons.append(f"SLOs within the noise, measuring again ({texts})")
    return "; ".join(reasons)


def final_pick(
    spec: SearchSpec,
    objectives: Sequence[str],
    trials: Sequence[Trial],
    *,
    rules: Rules,
    reference: Measurement,
    reference_label: str,
) -> FinalPick:
    """The search's recommendation over ``reference`` (see the module); the Pareto front is kept for
    two objectives."""
    front = tuple(trial.number for trial in pareto_front(trials, objectives))
    higher = directions(objectives)[0] == "maximize"
    rules = pick_rules(spec, rules, higher)
    chosen = finalists(trials, objectives, borderline_margin(rules), most_launches(spec))
    numbers = tuple(trial.number for trial in chosen)
    if not chosen:
        return FinalPick(None, reason="no configuration of the space was feasible", front=front)
    unconfirmed = tuple(trial.number for trial in chosen if not confirmations(trial, spec))
    if unconfirmed:
        listed = ", ".join(f"#{number}" for number in numbers)
        return FinalPick(
            None,
            numbers,
            order=_round(unconfirmed, chosen, reference, spec),
            reason=f"confirming the finalists ({listed}) on launches of their own",
            front=front,
        )
    kept = _against_reference(chosen, reference, reference_label, rules, spec)
    undecided = [trial for trial in chosen if kept[trial.number].outcome == "undecided"]
    # borderline finalists: their launches' mean breaks an SLO by less than its noise, so far
    unsettled = [trial for trial in chosen if trial.violation > 0]
    if undecided or unsettled:
        again = [trial.number for trial in (*undecided, *unsettled)]
        return FinalPick(
            None,
            numbers,
            kept,
            order=_round(again, chosen, reference, spec),
            reason=_measuring_again(undecided, unsettled, kept, reference_label),
            front=front,
        )
    winners = [trial for trial in chosen if kept[trial.number].outcome == "better"]
    if not winners:
        notes = "; ".join(f"#{trial.number}: {kept[trial.number].gain}" for trial in chosen)
        reason = f"no finalist beat {reference_label} on its confirmation launches ({notes})"
        return FinalPick(None, numbers, kept, reason=reason, front=front)
    pick, runner_up, versus, again, why = _separate(winners, rules, spec)
    return FinalPick(
        None if again else pick,
        numbers,
        kept,
        runner_up,
        versus,
        order=_round(again, chosen, reference, spec) if again else (),
        reason=why,
        front=front,
    )
