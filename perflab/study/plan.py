"""The staged strategy: a stage's listed candidates, each on top of the best configuration so far.

:class:`Candidates` is the :class:`~perflab.study.strategy.StageStrategy` of a stage with
``candidates:``. It builds the stage's candidates on top of the best configuration before it; once
every candidate has an outcome, the stage keeps its winner and the next stage starts from it
(:func:`perflab.study.study_plan.plan_study` walks the stages). Pure. The rules, from the seed
studies:

- a candidate whose configuration the engine cannot run, or that fails to start, is **failed**: its
  error is recorded and it is skipped;
- one the infrastructure kept from being measured, even after the retries (host unreachable, port
  taken, …; see :mod:`perflab.study.measure`), is **unmeasured**: neither failed nor beaten. Its stage
  picks no winner over it, so the study stops there, ``incomplete``, with the best so far as a
  provisional answer, until the missing candidates are measured;
- one whose success rate is below the threshold is **disqualified** ("Success rate: 51.6%, optimization
  skipped");
- one that breaks an SLO of the study (``slos``) is **infeasible**, whatever its value; one that meets
  them beats a best so far that breaks one (:func:`perflab.study.decide.feasibility`);
- one that does not beat the best so far by at least ``min_gain`` is **not better**; so is a better one
  beaten by another candidate of its stage;
- the best of the rest is the stage's **winner**;
- a candidate whose configuration equals the best so far (or a candidate before it in the same stage)
  is **reused**: it takes that run's measurement and is never launched again.

**Balanced launch order.** A study that measures its noise compares a candidate only with launches of
its reference taken beside its own, in **rounds**: the stage starts from the reference's latest launch;
each round launches every open candidate once (in stage order in odd rounds, reversed in even ones),
then the reference once more. Each candidate's launches thus sit between the reference's (R C R C R …),
so the mean launch position of a candidate equals its reference's at every look, and a drift of the
host's speed through the study (warming up, load from elsewhere) cancels from the comparison instead of
reading as a gain; the reference's earlier launches, which any drift would set apart, take no part. The
launches of a candidate are judged at each look (:func:`perflab.study.decide.decide_family`: the
sequential verdict of :mod:`perflab.study.verdict`, α shared among the stage's candidates by Holm's
rule) once the study's spread has the degrees of freedom to judge (the first such look is kept in the
stage's record, so the α of a look that was not taken is left to the later ones). Before the reference
is launched again, a candidate whose estimate is already too weak to go on stops (futility and "not
better" never keep anything, so they need no balance), and the reference is launched only for those
left.

**A decision is an event.** Every candidate's outcome, verdict and note are stored in the stage's record
(``StageStep.stored``, kept by the coordinator in ``study.state``) the moment they are made, with the
stage's winner once every candidate has one; later advances read them back and never judge a decided
candidate again, so later launches (the winner is the next stage's reference), a wider pooled spread or
a reused one cannot flip a verdict, restart a stopped candidate or change the path.

Write-ups imported from elsewhere (one measurement of everything) are decided at once
(:func:`decide_stage`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from statistics import fmean
from typing import Any

from perflab.engines.config import EngineConfig
from perflab.study.configs import CandidateConfigError, build_config, config_fields
from perflab.study.decide import STAGE_LEAD, Decision, decide_family, feasibility, round_order
from perflab.study.strategy import StageInput
from perflab.study.types import (
    TOO_SHORT,
    UNMEASURED,
    CandidatePlan,
    Measurement,
    Rules,
    StagePlan,
    StageStep,
    gain_text,
    retry_note,
    unmeasured_note,
)
from perflab.study.verdict import MIN_DF, NOISE_UNKNOWN, Verdict, launches_text, too_little_text

# Decisions taken before a candidate's verdict: it is not one of the hypotheses its stage tests.
_UNTESTED = frozenset({"failed", "reused", "disqualified", "infeasible", UNMEASURED, TOO_SHORT})
# A kept candidate's stored outcome until its stage picks the winner among the kept.
KEPT = "kept"


@dataclass
class StageRecord:
    """What a stage of listed candidates keeps between advances: the reference's launch that leads the
    stage (0-based), each candidate's launch count at its first look, every decision made (position →
    decision, note and verdict) and, once decided, the winner."""

    reference_since: int | None = None
    first: dict[int, int] = field(default_factory=dict)
    decided: dict[int, dict[str, Any]] = field(default_factory=dict)
    winner: int | None = None
    done: bool = False

    @classmethod
    def read(cls, stored: Any) -> StageRecord:
        if not isinstance(stored, dict):
            return cls()
        return cls(
            reference_since=stored.get("reference_since"),
            first={int(key): int(value) for key, value in (stored.get("first") or {}).items()},
            decided={int(key): dict(value) for key, value in (stored.get("decided") or {}).items()},
            winner=stored.get("winner"),
            done=bool(stored.get("done", False)),
        )

    def stored(self) -> dict[str, Any]:
        return {
            "reference_since": self.reference_since,
            "first": {str(key): value for key, value in self.first.items()},
            "decided": {str(key): value for key, value in self.decided.items()},
            "winner": self.winner,
            "done": self.done,
        }

    def keep(self, candidate: CandidatePlan, outcome: str) -> CandidatePlan:
        """Store ``candidate``'s decision (``outcome``: its decision, or :data:`KEPT`) as made now."""
        verdict = candidate.verdict.to_dict() if candidate.verdict is not None else None
        self.decided[candidate.position] = {"decision": outcome, "note": candidate.note, "verdict": verdict}
        return candidate

    def recall(self, candidate: CandidatePlan) -> CandidatePlan | None:
        """``candidate`` with its stored decision, or None when it has none."""
        stored = self.decided.get(candidate.position)
        if stored is None:
            return None
        verdict = Verdict.from_dict(stored["verdict"]) if stored.get("verdict") else None
        decision = None if stored["decision"] == KEPT else stored["decision"]
        return replace(candidate, decision=decision, note=stored.get("note"), verdict=verdict, again=False)


def _before_verdict(candidate: CandidatePlan, reference: CandidatePlan, rules: Rules) -> CandidatePlan | None:
    """The decision a finished measurement takes before any verdict (failed, disqualified, SLOs…), or
    None when the candidate is one its stage tests."""
    measurement = candidate.measurement
    if measurement.state == "unmeasured":
        return replace(candidate, decision=UNMEASURED, note=unmeasured_note(measurement))
    if measurement.state == "failed":
        return replace(candidate, decision="failed", note=measurement.error or "failed")
    if measurement.state == TOO_SHORT:
        return replace(candidate, decision=TOO_SHORT, note=f"{measurement.error}: neither kept nor beaten")
    if measurement.value is None and not measurement.violations:
        return replace(candidate, decision="failed", note="the result has no value for the objective")
    rate = measurement.success_rate
    if rate is not None and rate < rules.min_success:
        return replace(
            candidate, decision="disqualified", note=f"Success rate: {rate * 100:.1f}%, optimization skipped"
        )
    slo = feasibility(measurement, reference.measurement, reference.label)
    if slo is not None and slo.outcome == "infeasible":
        return replace(candidate, decision="infeasible", note=slo.note)
    if slo is not None:
        return replace(candidate, note=slo.gain)  # kept: it meets the SLOs its reference breaks
    return None


def _with_decision(candidate: CandidatePlan, found: Decision) -> CandidatePlan:
    """The candidate after a look: decided (its decision), kept (no decision yet), or open."""
    candidate = replace(candidate, verdict=found.verdict, again=found.outcome == "undecided")
    if found.outcome == "undecided":
        return replace(candidate, note=found.note)
    if found.outcome == "better":
        return replace(candidate, note=None)
    return replace(candidate, decision=found.outcome, note=found.note)


def _pick(judged: Sequence[CandidatePlan], rules: Rules) -> CandidatePlan | None:
    """The kept candidate with the best mean over its compared launches."""
    kept = [candidate for candidate in judged if candidate.decision is None and candidate.compared]
    pick = min if rules.lower_is_better else max
    return pick(kept, key=lambda candidate: fmean(candidate.compared), default=None)


def _winner_notes(judged: Sequence[CandidatePlan], winner: CandidatePlan | None, best: CandidatePlan) -> list:
    """The kept candidates' notes once the stage is decided: the winner over the best so far, the
    others beaten by it."""
    decided = []
    for candidate in judged:
        if candidate.decision is None:
            verdict = candidate.verdict
            if verdict is not None:
                gain = verdict.published_text()
            elif candidate.value is not None and best.value:
                gain = f"{gain_text(candidate.value, best.value)} ({NOISE_UNKNOWN})"
            else:
                gain = NOISE_UNKNOWN
            if candidate.note:  # it meets the SLOs its reference breaks
                gain = f"{candidate.note} ({gain})"
            if candidate is winner:
                candidate = replace(candidate, decision="winner", note=f"{gain} over {best.label}")
            else:
                note = f"{gain}, but {winner.label} is better, skipped"
                candidate = replace(candidate, decision="not_better", note=note)
        decided.append(candidate)
    return decided


def decide_stage(
    candidates: Sequence[CandidatePlan], best: CandidatePlan, rules: Rules
) -> tuple[list[CandidatePlan], CandidatePlan | None, bool]:
    """A stage decided at once from one measurement of each candidate and of ``best`` (a write-up
    imported from elsewhere): the candidates, the winner (or None), and whether the stage is decided."""
    judged = []
    tested = {}
    for candidate in candidates:
        if candidate.decision is not None or _pending(candidate.measurement) or candidate.measurement is None:
            judged.append(candidate)
            continue
        early = _before_verdict(candidate, best, rules)
        judged.append(early if early is not None else candidate)
        if early is None or (early.decision is None and early.note is None):
            tested[candidate.position] = candidate.measurement.samples
    found = decide_family(tested, best.measurement.samples, rules, final=True)
    judged = [
        _with_decision(candidate, found[candidate.position]) if candidate.position in found else candidate
        for candidate in judged
    ]
    if any(candidate.waiting or candidate.decision == UNMEASURED for candidate in judged):
        return judged, None, False
    winner = _pick(judged, rules)
    decided = _winner_notes(judged, winner, best)
    return decided, next((c for c in decided if c.decision == "winner"), None), True


def _build(stage: StageInput) -> list[CandidatePlan]:
    built = []
    for position, spec in enumerate(stage.spec.candidates):
        try:
            config = build_config(
                config_fields(stage.best.config),
                spec.changes,
                gpus_per_node=stage.gpus_per_node,
                gpus=stage.gpus,
            )
            error = None
        except CandidateConfigError as exc:
            config, error = None, str(exc)
        built.append(
            CandidatePlan(
                stage_index=stage.index,
                stage_name=stage.spec.name,
                position=position,
                label=spec.label,
                changes=dict(spec.changes),
                config=config,
                error=error,
            )
        )
    return built


def _resolved(
    candidate: CandidatePlan,
    first_of: dict[str, CandidatePlan],
    best: CandidatePlan,
    measurements: Mapping[str, Measurement],
) -> CandidatePlan:
    """A built candidate failed (cannot be built), reused (a configuration already in the stage) or
    with its measurement."""
    if candidate.error is not None:
        return replace(candidate, decision="failed", note=candidate.error)
    fingerprint = candidate.fingerprint
    if fingerprint in first_of:
        same = first_of[fingerprint]
        where = "the best so far" if same is best else "an earlier candidate"
        return replace(
            candidate,
            measurement=same.measurement,
            decision="reused",
            note=f"same configuration as {where} ({same.label}); its run is reused",
        )
    first_of[fingerprint] = candidate
    measurement = measurements.get(fingerprint)
    note = retry_note(measurement) if measurement is not None else None
    return replace(candidate, measurement=measurement, note=note)


def _pending(measurement: Measurement | None) -> bool:
    """Whether a launch of it is still to come back (queued, running or waiting out a retry)."""
    return measurement is not None and measurement.state == "pending"


@dataclass
class _Look:
    """A look at a stage of listed candidates, worked out from the measurements and its record."""

    rules: Rules
    record: StageRecord
    reference: CandidatePlan

    def judged(
        self, candidates: Sequence[CandidatePlan], launches: int, *, before_reference: bool
    ) -> list[CandidatePlan]:
        """The open candidates with ``launches`` compared launches judged, α shared by Holm's rule among
        the stage's tested candidates; ``before_reference``: the look before the reference's launch of
        the round, which may only stop a candidate (the reference's launch balances a keep)."""
        rules, spread = self.rules, self.rules.spread
        ready = {
            candidate.position: candidate.compared
            for candidate in candidates
            if candidate.again and len(candidate.compared) == launches and launches >= rules.relaunches
        }
        if not ready:
            return list(candidates)
        if spread is None or not spread.known or spread.df < MIN_DF:
            return [
                self._no_verdict(candidate, before_reference) if candidate.position in ready else candidate
                for candidate in candidates
            ]
        for position, values in ready.items():
            self.record.first.setdefault(position, len(values))
        tested = sum(1 for candidate in candidates if candidate.decision not in _UNTESTED)
        kept = sum(1 for stored in self.record.decided.values() if stored["decision"] == KEPT)
        found = decide_family(
            ready,
            self.reference.compared,
            rules,
            kept=kept,
            tested=tested,
            first=self.record.first,
            lead=STAGE_LEAD,
        )
        judged = []
        for candidate in candidates:
            decision = found.get(candidate.position)
            stops = decision is not None and (
                decision.outcome == "not_better"
                or (decision.verdict is not None and decision.verdict.futility)
            )
            if decision is None or (before_reference and not stops):
                judged.append(candidate)
                continue
            candidate = _with_decision(candidate, decision)
            if not candidate.again:
                self.record.keep(candidate, candidate.decision or KEPT)
            judged.append(candidate)
        return judged

    def _no_verdict(self, candidate: CandidatePlan, before_reference: bool) -> CandidatePlan:
        """An open candidate while the spread cannot judge it: measured again, or at its last launch
        stopped with nothing kept."""
        spread = self.rules.spread
        if spread is not None and spread.known:
            why = too_little_text(spread.launches)
        else:
            why = f"{NOISE_UNKNOWN} yet"
        last = len(candidate.compared) >= max(self.rules.max_launches, self.rules.relaunches)
        if last and not before_reference:
            stopped = replace(
                candidate, again=False, decision="noise_unknown", note=f"{why}: nothing is kept on it"
            )
            return self.record.keep(stopped, "noise_unknown")
        return replace(candidate, note=f"{why}, measuring both again")


@dataclass(frozen=True)
class Candidates:
    """The staged strategy: the stage's candidates on top of the best so far, decided together in
    balanced rounds, each decision stored when made."""

    def step(self, stage: StageInput) -> StageStep:
        """The stage's candidates with their outcomes, and the configurations it still needs run."""
        best, rules = stage.best, stage.rules
        first_of: dict[str, CandidatePlan] = {best.fingerprint: best}
        resolved = [_resolved(candidate, first_of, best, stage.measurements) for candidate in _build(stage)]
        if not rules.measures_noise:
            judged, winner, decided = decide_stage(resolved, best, rules)
            wanted = tuple(c.config for c in resolved if c.decision is None and c.measurement is None)
            plan = StagePlan(stage.index, stage.spec.name, tuple(judged), best, winner, decided)
            return StageStep(plan, wanted=wanted)
        record = StageRecord.read(stage.evidence.stored.get(str(stage.index)))
        if best.measurement is not None and best.measurement.state == "failed" and not record.done:
            why = f"{best.label}, the stage's reference, failed on a later launch: {best.measurement.error}"
            return StageStep(StagePlan(stage.index, stage.spec.name, tuple(resolved), best), failure=why)
        if record.reference_since is None:
            record.reference_since = _lead(best, resolved)
        reference = replace(best, since=record.reference_since)
        candidates = [_known(candidate, record, reference, rules) for candidate in resolved]
        candidates, wanted, tuning_only = _launches(candidates, _Look(rules, record, reference), best)
        open_ = [candidate for candidate in candidates if _open(candidate, record)]
        blocked = any(candidate.decision == UNMEASURED for candidate in candidates)
        winner = None
        if not record.done and not open_ and not blocked:
            winner = _pick(candidates, rules)
            record.winner, record.done = (winner.position if winner else None), True
        if record.done:
            winner = next((c for c in candidates if c.position == record.winner), None)
            candidates = _winner_notes(candidates, winner, best)
            winner = next((c for c in candidates if c.decision == "winner"), None)
        plan = StagePlan(stage.index, stage.spec.name, tuple(candidates), reference, winner, record.done)
        return StageStep(plan, wanted=wanted, tuning_only=tuning_only, stored=record.stored())


def _launches(
    candidates: list[CandidatePlan], look: _Look, best: CandidatePlan
) -> tuple[list[CandidatePlan], tuple[EngineConfig, ...], frozenset[str]]:
    """The looks this advance takes, then the launches of the round and those of them that run the
    tuning profile alone: the open candidates behind the reference (in the round's order), else the
    reference once every open candidate has its launch of the round. Nothing while a launch of the
    stage is in flight."""
    record = look.record
    open_ = [candidate for candidate in candidates if _open(candidate, record)]
    waiting = _pending(best.measurement) or any(_pending(c.measurement) for c in open_)
    if not open_ or waiting:
        return candidates, (), frozenset()
    rounds = len(look.reference.compared)
    if any(len(candidate.compared) < rounds for candidate in open_):
        candidates = look.judged(candidates, rounds - 1, before_reference=False)
        behind = [
            candidate
            for candidate in round_order(candidates, rounds)
            if _open(candidate, record) and len(candidate.compared) < rounds
        ]
        again = frozenset(c.fingerprint for c in behind if c.measurement is not None)
        return candidates, tuple(c.config for c in behind), again
    candidates = look.judged(candidates, rounds, before_reference=True)
    if any(_open(candidate, record) for candidate in candidates):
        return candidates, (best.config,), frozenset({best.fingerprint})
    return candidates, (), frozenset()


def _lead(best: CandidatePlan, candidates: Sequence[CandidatePlan]) -> int:
    """The reference's launch that leads a stage reached for the first time: its latest, the launch
    before the candidates' first round. A stage first read with launches of its candidates already made
    (a study stored before the stage kept a record) takes the rounds they show: the reference's latest
    launches, one more than the most any candidate has."""
    launched = [
        len(c.measurement.samples) for c in candidates if c.decision is None and c.measurement is not None
    ]
    return max(len(best.measurement.samples) - 1 - max(launched, default=0), 0) if best.measurement else 0


def _open(candidate: CandidatePlan, record: StageRecord) -> bool:
    """Whether a candidate still awaits its verdict (not decided, not kept)."""
    return candidate.decision is None and candidate.position not in record.decided


def _known(
    candidate: CandidatePlan, record: StageRecord, reference: CandidatePlan, rules: Rules
) -> CandidatePlan:
    """The candidate as it stands before this advance's look: its stored decision, one taken on its
    measurement before any verdict (stored, except an unmeasured one, which may be measured again),
    waiting for its first launch, or open."""
    recalled = record.recall(candidate)
    if recalled is not None:
        return recalled
    if candidate.decision is not None:
        return record.keep(candidate, candidate.decision)
    measurement = candidate.measurement
    if measurement is None or (measurement.state == "pending" and not candidate.compared):
        return candidate
    if measurement.state != "pending":
        early = _before_verdict(candidate, reference, rules)
        if early is not None and early.decision == UNMEASURED:
            return early
        if early is not None:
            return record.keep(early, early.decision or KEPT)
    return replace(candidate, again=True, note=candidate.note or _open_note(candidate, rules))


def _open_note(candidate: CandidatePlan, rules: Rules) -> str:
    """What an open candidate's note says between looks: its launches, and why no verdict is given."""
    measured = f"{launches_text(len(candidate.compared))} measured"
    spread = rules.spread
    if spread is None or not spread.known:
        return f"{measured}, {NOISE_UNKNOWN} yet"
    if spread.df < MIN_DF:
        return f"{measured}, {too_little_text(spread.launches)}"
    return f"{measured}, measuring both again"
