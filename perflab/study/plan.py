"""The study's decisions, as a pure function of its spec and what has been measured so far.

:func:`plan_study` walks the stages in order. Each stage builds its candidates on top of the best
configuration so far; once every candidate of the stage has an outcome, the stage keeps its winner and
the next stage starts from it. The rules, from the seed studies:

- a candidate whose configuration the engine cannot run, or that fails to start, is **failed**: its
  error is recorded and it is skipped;
- one the infrastructure kept from being measured, even after the retries (host unreachable, port
  taken, …; see :mod:`perflab.study.measure`), is **unmeasured**: neither failed nor beaten. Its stage
  picks no winner over it, so the study stops there, ``incomplete``, with the best so far as a
  provisional answer, until the missing candidates are measured;
- one whose success rate is below the threshold is **disqualified** ("Success rate: 51.6%, optimization
  skipped");
- one that does not beat the best so far by at least ``min_gain`` is **not better** ("lower than
  previous, skipped"); so is a better one beaten by another candidate of its stage;
- the best of the rest is the stage's **winner**;
- a candidate whose configuration equals the best so far (or a candidate before it in the same stage)
  is **reused**: it takes that run's measurement and is never launched again. A configuration measured
  in an earlier stage is likewise taken from its run.

Measurements are keyed by configuration fingerprint, so every distinct configuration is launched once.
The plan says which configurations still need a run (``wanted``) and which may still become the final
winner (``may_win``: the baseline, the best so far and the open stage's contenders), whose runs keep
their validation profiles; every other run may drop them. Once every stage is decided the study is
``validating`` until every run has ended (the baseline's and the winner's with their validation
profiles), then ``done``. A baseline that could not be measured makes the study ``incomplete`` too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from perflab.engines.config import EngineConfig
from perflab.study.configs import CandidateConfigError, build_config, config_fields
from perflab.study.spec import StageSpec

MeasurementState = Literal["pending", "measured", "failed", "unmeasured"]
PlanStatus = Literal["running", "validating", "done", "failed", "incomplete"]
BASELINE_STAGE = "Baseline"
UNMEASURED = "unmeasured"


@dataclass(frozen=True)
class Measurement:
    """What the run of one configuration has shown: ``pending`` until its tuning result is stored (or,
    with ``retry_at``, until the infrastructure failure in ``error`` is retried), ``unmeasured`` when
    the infrastructure kept it from being measured.

    ``finished`` says the run has ended, so no more of its profiles will be measured.
    """

    state: MeasurementState
    run_id: int | None = None
    value: float | None = None
    success_rate: float | None = None
    error: str | None = None
    finished: bool = False
    retry_at: datetime | None = None


@dataclass(frozen=True)
class Rules:
    """How a stage is decided: the lowest acceptable success rate and the smallest gain kept (fractions);
    ``lower_is_better`` for an objective such as cost, whose gain is a fall by ``min_gain``."""

    min_success: float = 1.0
    min_gain: float = 0.01
    lower_is_better: bool = False

    def better(self, value: float, reference: float) -> bool:
        """Whether ``value`` is on the better side of ``reference`` (not necessarily by ``min_gain``)."""
        return value < reference if self.lower_is_better else value > reference


@dataclass(frozen=True)
class CandidatePlan:
    """One candidate (or the baseline) with its configuration, measurement and decision."""

    stage_index: int
    stage_name: str
    position: int
    label: str
    changes: Mapping[str, Any]
    config: EngineConfig | None
    error: str | None = None
    measurement: Measurement | None = None
    decision: str | None = None
    note: str | None = None
    role: str = "candidate"

    @property
    def fingerprint(self) -> str | None:
        return self.config.fingerprint() if self.config is not None else None

    @property
    def retrying(self) -> bool:
        """Whether the infrastructure failed its last run and a new attempt waits for its backoff."""
        return self.measurement is not None and self.measurement.retry_at is not None

    @property
    def value(self) -> float | None:
        measured = self.measurement is not None and self.measurement.state == "measured"
        return self.measurement.value if measured else None


@dataclass(frozen=True)
class StagePlan:
    """A reached stage: its candidates, the best configuration before it and, once decided, its winner."""

    index: int
    name: str
    candidates: tuple[CandidatePlan, ...]
    reference: CandidatePlan
    winner: CandidatePlan | None = None
    decided: bool = False

    @property
    def unmeasured(self) -> tuple[CandidatePlan, ...]:
        """Candidates the infrastructure kept from being measured."""
        return tuple(candidate for candidate in self.candidates if candidate.decision == UNMEASURED)

    @property
    def improvement(self) -> float | None:
        """The winner's gain over the best before the stage (a fraction), or None without a winner."""
        if self.winner is None or not self.reference.value:
            return None
        return self.winner.value / self.reference.value - 1.0


@dataclass(frozen=True)
class StudyPlan:
    """Where a study stands: reached stages, the best so far, what to run next."""

    baseline: CandidatePlan
    stages: tuple[StagePlan, ...]
    best: CandidatePlan
    status: PlanStatus
    wanted: tuple[EngineConfig, ...] = ()
    may_win: frozenset[str] = field(default_factory=frozenset)
    failure: str | None = None

    def candidates(self) -> list[CandidatePlan]:
        """The baseline, then every reached stage's candidates in order."""
        return [self.baseline, *(candidate for stage in self.stages for candidate in stage.candidates)]

    def unmeasured(self) -> list[CandidatePlan]:
        """Every candidate (the baseline included) the infrastructure kept from being measured."""
        return [candidate for candidate in self.candidates() if candidate.decision == UNMEASURED]


def gain_text(value: float, reference: float) -> str:
    """``+22.2%`` / ``-1.4%``: ``value`` against ``reference``."""
    return f"{(value / reference - 1.0) * 100:+.1f}%"


def _beats(value: float, reference: float, rules: Rules) -> bool:
    if rules.lower_is_better:
        return value < reference * (1.0 - rules.min_gain)
    return value > reference * (1.0 + rules.min_gain)


def _outcome(candidate: CandidatePlan, best: CandidatePlan, rules: Rules) -> CandidatePlan:
    """The decision for a candidate with a finished measurement (None when it is a contender)."""
    measurement = candidate.measurement
    if measurement.state == "unmeasured":
        return replace(candidate, decision=UNMEASURED, note=unmeasured_note(measurement))
    if measurement.state == "failed":
        return replace(candidate, decision="failed", note=measurement.error or "failed")
    if measurement.value is None:
        return replace(candidate, decision="failed", note="the result has no value for the objective")
    rate = measurement.success_rate
    if rate is not None and rate < rules.min_success:
        return replace(
            candidate, decision="disqualified", note=f"Success rate: {rate * 100:.1f}%, optimization skipped"
        )
    gain = gain_text(measurement.value, best.value)
    if rules.better(best.value, measurement.value):
        worse = "higher" if rules.lower_is_better else "lower"
        return replace(candidate, decision="not_better", note=f"{gain}: {worse} than previous, skipped")
    if not _beats(measurement.value, best.value, rules):
        minimum = f"{rules.min_gain * 100:g}%"
        return replace(
            candidate, decision="not_better", note=f"{gain}: below the {minimum} minimum gain, skipped"
        )
    return candidate


def unmeasured_note(measurement: Measurement) -> str:
    """Why a candidate has no measurement: the infrastructure failure of its last attempt."""
    return f"not measured (infrastructure): {measurement.error}"


def retry_note(measurement: Measurement) -> str | None:
    """When and why a configuration is measured again, for one waiting out its backoff."""
    if measurement.retry_at is None:
        return None
    return f"measured again from {measurement.retry_at:%H:%M:%S} UTC after {measurement.error}"


def _waiting(candidate: CandidatePlan) -> bool:
    measurement = candidate.measurement
    return candidate.decision is None and (measurement is None or measurement.state == "pending")


def decide_stage(
    candidates: Sequence[CandidatePlan], best: CandidatePlan, rules: Rules
) -> tuple[list[CandidatePlan], CandidatePlan | None, bool]:
    """A stage's decisions against ``best``: the candidates, the winner (or None), and whether the
    stage is decided. While a candidate waits for its measurement, or could not be measured at all,
    the others are judged already (a failure or a value that does not beat ``best`` is final) but no
    winner is chosen. Candidates decided before (failed, reused) keep their decision."""
    judged = [
        candidate
        if candidate.decision is not None or _waiting(candidate)
        else _outcome(candidate, best, rules)
        for candidate in candidates
    ]
    if any(_waiting(candidate) or candidate.decision == UNMEASURED for candidate in judged):
        return judged, None, False
    pick = min if rules.lower_is_better else max
    winner = pick((c for c in judged if c.decision is None), key=lambda c: c.value, default=None)
    decided = []
    for candidate in judged:
        gain = gain_text(candidate.value, best.value) if candidate.decision is None else ""
        if candidate is winner:
            candidate = replace(candidate, decision="winner", note=f"{gain} over {best.label}")
        elif candidate.decision is None:
            candidate = replace(
                candidate, decision="not_better", note=f"{gain}, but {winner.label} is better, skipped"
            )
        decided.append(candidate)
    return decided, next((c for c in decided if c.decision == "winner"), None), True


def _build(
    stage_index: int,
    stage: StageSpec,
    best: CandidatePlan,
    gpus_per_node: int | None,
) -> list[CandidatePlan]:
    built = []
    for position, spec in enumerate(stage.candidates):
        try:
            config = build_config(config_fields(best.config), spec.changes, gpus_per_node=gpus_per_node)
            error = None
        except CandidateConfigError as exc:
            config, error = None, str(exc)
        built.append(
            CandidatePlan(
                stage_index=stage_index,
                stage_name=stage.name,
                position=position,
                label=spec.label,
                changes=dict(spec.changes),
                config=config,
                error=error,
            )
        )
    return built


def _stage(
    stage_index: int,
    stage: StageSpec,
    best: CandidatePlan,
    measurements: Mapping[str, Measurement],
    rules: Rules,
    gpus_per_node: int | None,
) -> tuple[StagePlan, list[EngineConfig]]:
    """The stage's candidates with their outcomes, and the configurations it still needs run."""
    wanted: list[EngineConfig] = []
    resolved: list[CandidatePlan] = []
    first_of: dict[str, CandidatePlan] = {best.fingerprint: best}
    for candidate in _build(stage_index, stage, best, gpus_per_node):
        fingerprint = candidate.fingerprint
        if candidate.error is not None:
            resolved.append(replace(candidate, decision="failed", note=candidate.error))
            continue
        if fingerprint in first_of:
            same = first_of[fingerprint]
            where = "the best so far" if same is best else "an earlier candidate"
            resolved.append(
                replace(
                    candidate,
                    measurement=same.measurement,
                    decision="reused",
                    note=f"same configuration as {where} ({same.label}); its run is reused",
                )
            )
            continue
        first_of[fingerprint] = candidate
        measurement = measurements.get(fingerprint)
        note = retry_note(measurement) if measurement is not None else None
        candidate = replace(candidate, measurement=measurement, note=note)
        if measurement is None:
            wanted.append(candidate.config)
        resolved.append(candidate)
    judged, winner, decided = decide_stage(resolved, best, rules)
    return StagePlan(stage_index, stage.name, tuple(judged), best, winner, decided), wanted


def _contenders(stage: StagePlan) -> set[str]:
    return {
        candidate.fingerprint
        for candidate in stage.candidates
        if candidate.decision is None and candidate.fingerprint is not None
    }


def plan_study(
    *,
    baseline: EngineConfig,
    stages: Sequence[StageSpec],
    measurements: Mapping[str, Measurement],
    rules: Rules,
    gpus_per_node: int | None = None,
) -> StudyPlan:
    """The study's plan given ``measurements`` (by configuration fingerprint)."""
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
    base_fingerprint = base.fingerprint
    measurement = base.measurement
    if measurement is None or measurement.state == "pending":
        wanted = (baseline,) if measurement is None else ()
        base = replace(base, note=retry_note(measurement) if measurement is not None else None)
        return StudyPlan(base, (), base, "running", wanted, frozenset({base_fingerprint}))
    if measurement.state == "unmeasured":
        unmeasured = replace(base, decision=UNMEASURED, note=unmeasured_note(measurement))
        return StudyPlan(unmeasured, (), unmeasured, "incomplete", may_win=frozenset({base_fingerprint}))
    if measurement.state == "failed" or measurement.value is None:
        error = measurement.error or "the result has no value for the objective"
        failed = replace(base, decision="failed", note=error)
        return StudyPlan(failed, (), failed, "failed", failure=f"the baseline failed: {error}")
    rate = measurement.success_rate
    note = "the reference every stage starts from"
    if rate is not None and rate < rules.min_success:
        note += f" (success rate {rate * 100:.1f}%, below the threshold)"
    base = replace(base, decision="kept", note=note)
    best = base
    reached: list[StagePlan] = []
    finished = all(measurement.finished for measurement in measurements.values())
    for stage_index, stage in enumerate(stages, start=1):
        stage_plan, wanted = _stage(stage_index, stage, best, measurements, rules, gpus_per_node)
        reached.append(stage_plan)
        if not stage_plan.decided:
            may_win = frozenset({base_fingerprint, best.fingerprint, *_contenders(stage_plan)})
            blocked = not any(_waiting(candidate) for candidate in stage_plan.candidates)
            status: PlanStatus = "incomplete" if blocked and finished else "running"
            return StudyPlan(base, tuple(reached), best, status, tuple(wanted), may_win)
        if stage_plan.winner is not None:
            best = stage_plan.winner
    may_win = frozenset({base_fingerprint, best.fingerprint})
    return StudyPlan(base, tuple(reached), best, "done" if finished else "validating", (), may_win)
