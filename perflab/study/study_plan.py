"""The study's decisions, as a pure function of its spec and what has been measured so far.

:func:`plan_study` measures the baseline, then walks the stages in order, asking each stage's strategy
(:mod:`perflab.study.strategy`) where it stands on top of the best configuration so far: a stage with
``candidates:`` is the staged strategy (:class:`perflab.study.plan.Candidates`), one with ``search:``
the search (:class:`perflab.study.search_stage.Search`). A decided stage's winner is the next stage's
starting point; the first undecided stage is where the study stands.

The plan says which configurations still need a run (``wanted``, with how each stage wants them run)
and which may still become the final winner (``may_win``: the baseline, the best so far and the open
stage's contenders), whose runs keep their validation profiles; every other run may drop them.

A decided stage is an event: its winner (or that it kept nothing) is stored in the plan's record
(``stored``, kept by the coordinator in ``study.state``) the moment it is decided, and every later plan
takes the path from there, whatever later launches would suggest. Once every stage is decided, a study
that kept a change launches its path again for the confirmation (:mod:`perflab.study.confirm`):
the published gains and the closing test on the recommendation, which falls back to the baseline when
the kept changes do not hold up. The study is then ``validating`` until every run has ended, then
``done``: the baseline and the recommended configuration always run their validation profiles first —
one whose launches all dropped them (or never had them) gets a launch of the validation profiles alone
(``validate``). A stage whose candidates the infrastructure kept from being measured, or a baseline
it kept from being measured, makes the study ``incomplete``; a failed baseline, or a stage whose
strategy cannot go on, makes it ``failed``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from db.models import FINISHED_RUN_STATUSES
from perflab.engines.config import EngineConfig
from perflab.study.confirm import confirm, stored_form
from perflab.study.plan import Candidates
from perflab.study.search_stage import Search
from perflab.study.spec import StageSpec
from perflab.study.strategy import Evidence, StageInput, StageStrategy, StrategyFor
from perflab.study.types import (
    BASELINE_STAGE,
    TOO_SHORT,
    UNMEASURED,
    CandidatePlan,
    Confirmation,
    Measurement,
    PlanStatus,
    Rules,
    StagePlan,
    StageStep,
    StudyPlan,
    retry_note,
    unmeasured_note,
)

# ``evidence.stored`` key of the plan's own record (by the stage strategies' records, keyed by index).
STUDY_RECORD = "study"
CANDIDATES = Candidates()
SEARCH = Search()


def stored_records(plan: StudyPlan) -> dict[str, Any]:
    """What the coordinator keeps of ``plan`` for the next advance (``study.state["stage_state"]``): each
    stage's record by its index, and the plan's own."""
    stored = {str(step.stage.index): step.stored for step in plan.steps if step.stored is not None}
    if plan.stored:
        stored[STUDY_RECORD] = plan.stored
    return stored


def strategy_of(stage: StageSpec) -> StageStrategy:
    """The strategy of a stage as its spec writes it: a search, or listed candidates."""
    return SEARCH if stage.search is not None else CANDIDATES


def _contenders(stage: StagePlan) -> set[str]:
    """The stage's candidates that may still win and are not waiting to be launched again: a close
    call's launch ends with its tuning profile, so its next launch starts at once (a winner whose
    launches dropped the validation profiles gets a launch of them at the end)."""
    return {
        candidate.fingerprint
        for candidate in stage.candidates
        if candidate.decision is None and not candidate.again and candidate.fingerprint is not None
    }


def _baseline(
    baseline: EngineConfig, measurements: Mapping[str, Measurement], rules: Rules
) -> StudyPlan | CandidatePlan:
    """The baseline kept as the reference every stage starts from, or the plan of a study that waits
    for it, cannot measure it or saw it fail."""
    base = CandidatePlan(
        stage_index=0,
        stage_name=BASELINE_STAGE,
        position=0,
        label=BASELINE_STAGE,
        changes={},
        config=baseline,
        measurement=measurements.get(baseline.fingerprint()),
        role="baseline",
    )
    fingerprint = frozenset({base.fingerprint})
    measurement = base.measurement
    if measurement is not None and measurement.state == "pending" and measurement.values:
        measurement = replace(measurement, state="measured")  # measured; a further launch is running
    if measurement is None or measurement.state == "pending":
        wanted = (baseline,) if measurement is None else ()
        base = replace(base, note=retry_note(measurement) if measurement is not None else None)
        return StudyPlan(base, (), base, "running", wanted, fingerprint)
    if measurement.state == "unmeasured":
        unmeasured = replace(base, decision=UNMEASURED, note=unmeasured_note(measurement))
        return StudyPlan(unmeasured, (), unmeasured, "incomplete", may_win=fingerprint)
    if measurement.state == TOO_SHORT:
        failed = replace(base, decision=TOO_SHORT, note=measurement.error)
        failure = (
            f"the baseline's tuning benchmark is {measurement.error}: raise the study's scale or the "
            "tuning profile's prompts"
        )
        return StudyPlan(failed, (), failed, "failed", failure=failure)
    if measurement.state == "failed" or (measurement.value is None and not measurement.violations):
        error = measurement.error or "the result has no value for the objective"
        failed = replace(base, decision="failed", note=error)
        return StudyPlan(failed, (), failed, "failed", failure=f"the baseline failed: {error}")
    rate = measurement.success_rate
    note = "the reference every stage starts from"
    if rate is not None and rate < rules.min_success:
        note += f" (success rate {rate * 100:.1f}%, below the threshold)"
    if measurement.violations:
        note += f"; it breaks the SLOs: {'; '.join(measurement.violations)}"
    return replace(base, decision="kept", note=note)


def _unvalidated(candidates: Sequence[CandidatePlan], evidence: Evidence) -> list[EngineConfig]:
    """The configurations among ``candidates`` no launch of which carries the validation profiles (a
    cancelled one does not count; a failed one does: its failure is the validation's)."""
    wanted: dict[str, EngineConfig] = {}
    for candidate in candidates:
        if candidate.config is None or not evidence.validation:
            continue
        carried = any(
            run.config_fingerprint == candidate.fingerprint
            and run.status != "cancelled"
            and any(profile.get("name") in evidence.validation for profile in run.profiles)
            for run in evidence.runs
        )
        if not carried:
            wanted.setdefault(candidate.fingerprint, candidate.config)
    return list(wanted.values())


def _standing(stage_plan: StagePlan, decided: Mapping[str, Any] | None) -> StagePlan:
    """The stage as its stored decision has it: once decided, its winner (or none) stands whatever a
    strategy would say now (a decision is an event; later launches refine figures, never the path)."""
    if decided is None:
        return stage_plan
    fingerprint = decided.get("winner")
    winner = next((c for c in stage_plan.candidates if fingerprint and c.fingerprint == fingerprint), None)
    if stage_plan.decided and (stage_plan.winner.fingerprint if stage_plan.winner else None) == fingerprint:
        return stage_plan
    return replace(stage_plan, winner=winner, decided=True)


def plan_study(
    *,
    baseline: EngineConfig,
    stages: Sequence[StageSpec],
    measurements: Mapping[str, Measurement],
    rules: Rules,
    gpus_per_node: int | None = None,
    gpus: int | None = None,
    evidence: Evidence | None = None,
    strategy_for: StrategyFor = strategy_of,
    propose: bool = True,
    seed: int = 0,
) -> StudyPlan:
    """The study's plan given ``measurements`` (by configuration fingerprint); with an accelerator
    budget ``gpus`` every candidate is filled to it (the baseline is filled by its caller). Each stage
    is asked through ``strategy_for``; with ``propose`` false no strategy proposes anything new. What
    the plan stored before (``evidence.stored[STUDY_RECORD]``: the decided stages, the confirmation)
    stands; ``seed`` (the study's) orders the confirmation launches."""
    evidence = evidence or Evidence()
    base = _baseline(baseline, measurements, rules)
    if isinstance(base, StudyPlan):
        return base
    record = dict(evidence.stored.get(STUDY_RECORD) or {})
    decided_stages: dict[str, Any] = dict(record.get("stages") or {})
    best = base
    reached: list[StagePlan] = []
    steps: list[StageStep] = []
    earlier = {base.fingerprint}
    finished = all(measurement.finished for measurement in measurements.values())
    for stage_index, stage in enumerate(stages, start=1):
        asked = StageInput(
            index=stage_index,
            spec=stage,
            best=best,
            measurements=measurements,
            rules=rules,
            gpus_per_node=gpus_per_node,
            gpus=gpus,
            earlier=frozenset(earlier),
            evidence=evidence,
            propose=propose,
        )
        step = strategy_for(stage).step(asked)
        stored_stage = decided_stages.get(str(stage_index))
        stage_plan = _standing(step.stage, stored_stage)
        if stored_stage is not None:
            step = replace(step, stage=stage_plan, wanted=())
        steps.append(step)
        reached.append(stage_plan)
        finished = finished and not step.wanted
        if step.failure is not None and stored_stage is None:
            failure = f"stage {stage_index} ({stage.name}): {step.failure}"
            return StudyPlan(base, tuple(reached), best, "failed", failure=failure, steps=tuple(steps))
        if not stage_plan.decided:
            may_win = frozenset({base.fingerprint, best.fingerprint, *_contenders(stage_plan)})
            blocked = not any(candidate.waiting for candidate in stage_plan.candidates)
            status: PlanStatus = "incomplete" if blocked and finished else "running"
            stored = {**record, "stages": decided_stages}
            return StudyPlan(
                base, tuple(reached), best, status, step.wanted, may_win, steps=tuple(steps), stored=stored
            )
        winner = stage_plan.winner
        decided_stages[str(stage_index)] = {"winner": winner.fingerprint if winner is not None else None}
        earlier |= {candidate.fingerprint for candidate in stage_plan.candidates if candidate.fingerprint}
        if winner is not None:
            best = winner
    path = [base, *(stage.winner for stage in reached if stage.winner is not None)]
    confirmation, wanted = None, ()
    if rules.measures_noise and len(path) > 1:
        confirmation, wanted = confirm(
            path,
            reached,
            measurements,
            rules,
            stored=record.get("confirmation"),
            seed=seed,
            stage_count=len(stages),
        )
        reached = [_confirmed(stage, confirmation) for stage in reached]
        best = next(stage.winner for stage in reversed(reached) if stage.winner is not None)
        if confirmation.confirmed is False:
            best = base
    stored = {
        "stages": decided_stages,
        **({"confirmation": stored_form(confirmation)} if confirmation else {}),
    }
    if wanted:
        may_win = frozenset({base.fingerprint, best.fingerprint})
        return StudyPlan(
            base,
            tuple(reached),
            best,
            "running",
            wanted,
            may_win,
            steps=tuple(steps),
            confirmation=confirmation,
            stored=stored,
        )
    may_win = frozenset({base.fingerprint, best.fingerprint})
    confirming = confirmation is not None and not confirmation.measured
    validate = [] if confirming else _unvalidated((base, best), evidence)
    ended = all(run.status in FINISHED_RUN_STATUSES for run in evidence.runs)
    status: PlanStatus = "done" if finished and ended and not validate else "validating"
    if confirming:
        status = "running"
    fingerprints = frozenset(config.fingerprint() for config in validate)
    return StudyPlan(
        base,
        tuple(reached),
        best,
        status,
        tuple(validate),
        may_win,
        steps=tuple(steps),
        validate=fingerprints,
        confirmation=confirmation,
        stored=stored,
    )


def _confirmed(stage: StagePlan, confirmation: Confirmation) -> StagePlan:
    """The stage with its winner's verdict carrying the gain its confirmation launches measured."""
    found = confirmation.verdicts.get(stage.index)
    if found is None or stage.winner is None:
        return stage
    note = stage.winner.note
    if note is not None and stage.winner.verdict is not None:
        note = note.replace(stage.winner.verdict.published_text(), found.published_text())
    winner = replace(stage.winner, verdict=found, note=note)
    candidates = tuple(winner if candidate is stage.winner else candidate for candidate in stage.candidates)
    return replace(stage, candidates=candidates, winner=winner)
