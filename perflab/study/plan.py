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
- a study that measures its noise (``repeats`` or ``relaunches`` above 1) decides with a
  :class:`~perflab.study.verdict.Verdict` instead: a candidate is kept only when its gain's interval lies
  above ``min_gain`` at the study's confidence, is **not better** when it lies below, and a close call
  (the interval straddles the threshold) is measured again, reference then candidate (A B A B), until
  ``max_launches``; one still inseparable is **within noise**, neither kept nor beaten. Each verdict
  (gain, interval, confidence, n) stays with its candidate;
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
from perflab.study.verdict import Verdict, judge

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
    values: tuple[float, ...] = ()

    @property
    def launches(self) -> int:
        """Launches measured (one when a measured value carries no per-launch values)."""
        return len(self.values) or (1 if self.state == "measured" else 0)


@dataclass(frozen=True)
class SearchContext:
    """What search stages need beyond measurements: their stored trials (by stage index, as text),
    the runs' observations (:class:`~perflab.study.search_stage.SearchRuns`), the study objective and
    the GPU-hours spent."""

    stored: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    runs: Any = None
    objective: str = "total_token_throughput"
    gpu_hours: float = 0.0


@dataclass(frozen=True)
class Rules:
    """How a stage is decided: the lowest acceptable success rate and the smallest gain kept (fractions);
    with measured noise, the confidence, the launches per configuration (first and at most) and the
    spread reused from earlier studies (``prior_cv_pct`` with ``prior_df`` degrees of freedom);
    ``lower_is_better`` for an objective such as cost, whose gain is a fall by ``min_gain``."""

    min_success: float = 1.0
    min_gain: float = 0.01
    confidence: float = 0.95
    relaunches: int = 1
    max_launches: int = 4
    measures_noise: bool = False
    prior_cv_pct: float | None = None
    prior_df: int | None = None
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
    verdict: Verdict | None = None
    again: bool = False  # a close call or too few launches: measure it (and its reference) again

    @property
    def fingerprint(self) -> str | None:
        return self.config.fingerprint() if self.config is not None else None

    @property
    def retrying(self) -> bool:
        """Whether the infrastructure failed its last run and a new attempt waits for its backoff."""
        return self.measurement is not None and self.measurement.retry_at is not None

    @property
    def value(self) -> float | None:
        """The measured value (the mean of its launches), also while a further launch is pending."""
        measurement = self.measurement
        if measurement is None:
            return None
        relaunching = measurement.state == "pending" and bool(measurement.values)
        measured = measurement.state == "measured" or relaunching
        return measurement.value if measured else None


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
    searches: tuple[Any, ...] = ()  # SearchStagePlan of each reached search stage

    def search_fingerprints(self, attribute: str) -> frozenset[str]:
        """The union of one fingerprint set (``remeasure``, ``not_promising``) over the search stages."""
        return frozenset().union(*(getattr(search, attribute) for search in self.searches))

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
    if rules.measures_noise:
        return _judged(candidate, best, rules)
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


def verdict_of(candidate: CandidatePlan, reference: CandidatePlan, rules: Rules) -> Verdict:
    """The verdict on ``candidate`` against ``reference`` from their launches' values."""
    return judge(
        candidate.measurement.values or (candidate.measurement.value,),
        reference.measurement.values or (reference.measurement.value,),
        higher_is_better=not rules.lower_is_better,
        min_gain_pct=rules.min_gain * 100,
        confidence=rules.confidence,
        max_n=rules.max_launches,
        prior_cv_pct=rules.prior_cv_pct,
        prior_df=rules.prior_df,
    )


def _judged(candidate: CandidatePlan, best: CandidatePlan, rules: Rules) -> CandidatePlan:
    """A measured candidate decided by its verdict (a contender, with no decision, when better)."""
    if candidate.measurement.launches < rules.relaunches:
        launch = candidate.measurement.launches + 1
        return replace(candidate, again=True, note=f"launch {launch} of {rules.relaunches}")
    verdict = verdict_of(candidate, best, rules)
    candidate = replace(candidate, verdict=verdict)
    if verdict.outcome == "not_better":
        return replace(candidate, decision="not_better", note=f"{verdict.text()}: not better, skipped")
    if verdict.outcome == "within_noise":
        return replace(
            candidate,
            decision="within_noise",
            note=f"{verdict.text()}: {verdict.outcome_text()}, neither kept nor beaten",
        )
    if verdict.outcome == "undecided":
        note = f"{verdict.text()}: a close call, measuring both again (A B A B)"
        return replace(candidate, again=True, note=note)
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
    pending = measurement is None or measurement.state == "pending"
    return candidate.decision is None and (pending or candidate.again)


def decide_stage(
    candidates: Sequence[CandidatePlan], best: CandidatePlan, rules: Rules
) -> tuple[list[CandidatePlan], CandidatePlan | None, bool]:
    """A stage's decisions against ``best``: the candidates, the winner (or None), and whether the
    stage is decided. While a candidate waits for its measurement, or could not be measured at all,
    the others are judged already (a failure or a value that does not beat ``best`` is final) but no
    winner is chosen. Candidates decided before (failed, reused) keep their decision."""
    judged = [
        candidate
        if candidate.decision is not None or (_waiting(candidate) and not candidate.again)
        else _outcome(replace(candidate, again=False), best, rules)
        for candidate in candidates
    ]
    if any(_waiting(candidate) or candidate.decision == UNMEASURED for candidate in judged):
        return judged, None, False
    pick = min if rules.lower_is_better else max
    winner = pick((c for c in judged if c.decision is None), key=lambda c: c.value, default=None)
    decided = []
    for candidate in judged:
        gain = gain_text(candidate.value, best.value) if candidate.decision is None else ""
        if candidate.verdict is not None and candidate.decision is None:
            gain = candidate.verdict.text()
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
    gpus: int | None,
) -> list[CandidatePlan]:
    built = []
    for position, spec in enumerate(stage.candidates):
        try:
            config = build_config(
                config_fields(best.config), spec.changes, gpus_per_node=gpus_per_node, gpus=gpus
            )
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
    gpus: int | None = None,
) -> tuple[StagePlan, list[EngineConfig]]:
    """The stage's candidates with their outcomes, and the configurations it still needs run."""
    wanted: list[EngineConfig] = []
    resolved: list[CandidatePlan] = []
    first_of: dict[str, CandidatePlan] = {best.fingerprint: best}
    for candidate in _build(stage_index, stage, best, gpus_per_node, gpus):
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
    wanted += _measure_again(judged, best)
    return StagePlan(stage_index, stage.name, tuple(judged), best, winner, decided), wanted


def _ended(candidate: CandidatePlan) -> bool:
    """Whether the candidate's last launch has ended, so another may start."""
    return candidate.measurement is not None and candidate.measurement.finished


def _measure_again(judged: Sequence[CandidatePlan], best: CandidatePlan) -> list[EngineConfig]:
    """The launches the stage's close calls need: the reference first, then each candidate (A B)."""
    again = [candidate for candidate in judged if candidate.again and _ended(candidate)]
    if not again:
        return []
    close_calls = [candidate for candidate in again if candidate.verdict is not None]
    reference = [best.config] if close_calls and _ended(best) else []
    return reference + [candidate.config for candidate in again]


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
    gpus: int | None = None,
    search: SearchContext | None = None,
) -> StudyPlan:
    """The study's plan given ``measurements`` (by configuration fingerprint); with an accelerator
    budget ``gpus`` every candidate is filled to it (the baseline is filled by its caller)."""
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
    if measurement is not None and measurement.state == "pending" and measurement.values:
        measurement = replace(measurement, state="measured")  # measured; a further launch is running
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
    if rules.measures_noise and measurement.launches < rules.relaunches:
        wanted = (baseline,) if measurement.finished else ()
        note = f"launch {measurement.launches + 1} of {rules.relaunches}"
        measuring = replace(base, decision=None, note=note)
        return StudyPlan(measuring, (), base, "running", wanted, frozenset({base_fingerprint}))
    best = base
    reached: list[StagePlan] = []
    finished = all(measurement.finished for measurement in measurements.values())
    searches: list[Any] = []
    for stage_index, stage in enumerate(stages, start=1):
        if stage.search is not None:
            found = _search_stage(
                stage_index, stage, best, rules, gpus or gpus_per_node, search or SearchContext()
            )
            searches.append(found)
            stage_plan, wanted = found.stage, list(found.wanted)
            finished = finished and not wanted
        else:
            stage_plan, wanted = _stage(stage_index, stage, best, measurements, rules, gpus_per_node, gpus)
        reached.append(stage_plan)
        if not stage_plan.decided:
            may_win = frozenset({base_fingerprint, best.fingerprint, *_contenders(stage_plan)})
            blocked = not any(_waiting(candidate) for candidate in stage_plan.candidates)
            status: PlanStatus = "incomplete" if blocked and finished else "running"
            return StudyPlan(
                base, tuple(reached), best, status, tuple(wanted), may_win, searches=tuple(searches)
            )
        if stage_plan.winner is not None:
            best = stage_plan.winner
    may_win = frozenset({base_fingerprint, best.fingerprint})
    status = "done" if finished else "validating"
    return StudyPlan(base, tuple(reached), best, status, (), may_win, searches=tuple(searches))


def _search_stage(
    stage_index: int,
    stage: StageSpec,
    best: CandidatePlan,
    rules: Rules,
    gpus: int | None,
    context: SearchContext,
) -> Any:
    """A search stage's plan (:func:`perflab.study.search_stage.search_stage`) within the accelerator
    budget ``gpus``."""
    from perflab.study.search_stage import SearchRuns, objectives_of, search_stage  # it builds on this module

    return search_stage(
        stage_index,
        stage.name,
        stage.search,
        best,
        stored=context.stored.get(str(stage_index), ()),
        runs=context.runs or SearchRuns(),
        rules=rules,
        gpus=gpus,
        objectives=objectives_of(stage.search, context.objective),
        gpu_hours=context.gpu_hours,
    )
