"""The study's decisions, as a pure function of its spec and what has been measured so far.

:func:`plan_study` measures the baseline, then walks the stages in order, asking each stage's strategy
(:mod:`perflab.study.strategy`) where it stands on top of the best configuration so far: a stage with
``candidates:`` is the staged strategy (:class:`perflab.study.plan.Candidates`), one with ``search:``
the search (:class:`perflab.study.search_stage.Search`). A decided stage's winner is the next stage's
starting point; the first undecided stage is where the study stands.

The plan says which configurations still need a run (``wanted``, with how each stage wants them run)
and which may still become the final winner (``may_win``: the baseline, the best so far and the open
stage's contenders), whose runs keep their validation profiles; every other run may drop them. Once
every stage is decided the study is ``validating`` until every run has ended, then ``done``: the
baseline and the winner always run their validation profiles first — one whose launches all dropped
them (or never had them) gets a launch of the validation profiles alone (``validate``). A stage whose
candidates the infrastructure kept from being measured, or a baseline it kept from being measured,
makes the study ``incomplete``; a failed baseline, or a stage whose strategy cannot go on, makes it
``failed``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from db.models import FINISHED_RUN_STATUSES
from perflab.engines.config import EngineConfig
from perflab.study.plan import Candidates
from perflab.study.search_stage import Search
from perflab.study.spec import StageSpec
from perflab.study.strategy import Evidence, StageInput, StageStrategy, StrategyFor
from perflab.study.types import (
    BASELINE_STAGE,
    UNMEASURED,
    CandidatePlan,
    Measurement,
    PlanStatus,
    Rules,
    StagePlan,
    StageStep,
    StudyPlan,
    retry_note,
    unmeasured_note,
)

CANDIDATES = Candidates()
SEARCH = Search()


def strategy_of(stage: StageSpec) -> StageStrategy:
    """The strategy of a stage as its spec writes it: a search, or listed candidates."""
    return SEARCH if stage.search is not None else CANDIDATES


def _contenders(stage: StagePlan) -> set[str]:
    return {
        candidate.fingerprint
        for candidate in stage.candidates
        if candidate.decision is None and candidate.fingerprint is not None
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
    base = replace(base, decision="kept", note=note)
    if rules.measures_noise and measurement.launches < rules.relaunches:
        wanted = (baseline,) if measurement.finished else ()
        note = f"launch {measurement.launches + 1} of {rules.relaunches}"
        measuring = replace(base, decision=None, note=note)
        return StudyPlan(measuring, (), base, "running", wanted, fingerprint)
    return base


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
) -> StudyPlan:
    """The study's plan given ``measurements`` (by configuration fingerprint); with an accelerator
    budget ``gpus`` every candidate is filled to it (the baseline is filled by its caller). Each stage
    is asked through ``strategy_for``; with ``propose`` false no strategy proposes anything new."""
    evidence = evidence or Evidence()
    base = _baseline(baseline, measurements, rules)
    if isinstance(base, StudyPlan):
        return base
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
        steps.append(step)
        stage_plan = step.stage
        reached.append(stage_plan)
        finished = finished and not step.wanted
        if step.failure is not None:
            failure = f"stage {stage_index} ({stage.name}): {step.failure}"
            return StudyPlan(base, tuple(reached), best, "failed", failure=failure, steps=tuple(steps))
        if not stage_plan.decided:
            may_win = frozenset({base.fingerprint, best.fingerprint, *_contenders(stage_plan)})
            blocked = not any(candidate.waiting for candidate in stage_plan.candidates)
            status: PlanStatus = "incomplete" if blocked and finished else "running"
            return StudyPlan(base, tuple(reached), best, status, step.wanted, may_win, steps=tuple(steps))
        earlier |= {candidate.fingerprint for candidate in stage_plan.candidates if candidate.fingerprint}
        if stage_plan.winner is not None:
            best = stage_plan.winner
    may_win = frozenset({base.fingerprint, best.fingerprint})
    validate = _unvalidated((base, best), evidence)
    ended = all(run.status in FINISHED_RUN_STATUSES for run in evidence.runs)
    status = "done" if finished and ended and not validate else "validating"
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
    )
