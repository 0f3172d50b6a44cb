"""A study as it stands, read from the database: its spec, its runs' outcomes and the plan they lead to.

The coordinator acts on it; the study page, the report and ``study show`` draw it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlmodel import Session

from db import crud
from db.models import ProfileResult, Run, Study
from perflab.cost.stored import cost_scorer
from perflab.study.decide import detectable_gain
from perflab.study.measure import (
    MEASURE_FROM_RUN,
    RunOutcome,
    measurements,
    outcomes,
    repetition_values,
    results_by_run,
    study_runs,
)
from perflab.study.noise import Spread, StudySpread, estimate_spread, study_spread
from perflab.study.objective import LOWER_IS_BETTER
from perflab.study.spec import StudySpec, StudySpecError, spec_from_data
from perflab.study.spread_reuse import reused_spread
from perflab.study.stored_predictions import stored_predictor
from perflab.study.strategy import Evidence, StrategyFor
from perflab.study.study_plan import plan_study, strategy_of
from perflab.study.types import CandidatePlan, Rules

# ``study.state`` key: what each stage's strategy stored for its next step, by stage index (as text).
STAGE_STATE = "stage_state"


def study_rules(spec: StudySpec, spread: StudySpread) -> Rules:
    """How the study's stages decide, at the spread measured so far."""
    return Rules(
        min_success=spec.min_success_pct / 100.0,
        min_gain=spec.min_gain_pct / 100.0,
        confidence=spec.confidence,
        relaunches=spec.relaunches,
        max_launches=max(spec.max_launches, spec.relaunches),
        spread=spread,
        lower_is_better=spec.objective in LOWER_IS_BETTER,
    )


class StudyProgress:
    """A study with its spec, its runs' outcomes and the plan they lead to (read-only)."""

    def __init__(
        self,
        study: Study,
        spec: StudySpec,
        found: Mapping[str, RunOutcome],
        runs: Sequence[Run],
        results: Mapping[int, Sequence[ProfileResult]] | None = None,
        *,
        strategy_for: StrategyFor = strategy_of,
        propose: bool = True,
    ) -> None:
        self.study = study
        self.spec = spec
        self.found = found
        self.runs = list(runs)
        self.results = results or {}  # every run's stored results, by run id
        self.spread: Spread | None = None  # the baseline's measured spread, set by load_progress
        state = study.state or {}
        self.gpus_per_node: int | None = state.get("gpus_per_node") or spec.gpus_per_node
        self.gpus: int | None = state.get("gpus") or spec.gpus
        try:
            baseline = spec.baseline_config(self.gpus_per_node, self.gpus)
        except ValueError as error:
            raise StudySpecError([f"study {study.id} baseline: {error}"]) from None
        measured = measurements(found)
        reused, refused = reused_spread(state, runs)
        self.study_spread = study_spread(
            [measurement.values for measurement in measured.values()], reused, refused
        )
        self.rules = study_rules(spec, self.study_spread)
        evidence = Evidence(
            runs=tuple(self.runs),
            results=self.results,
            found=found,
            tuning=spec.tuning(),
            repeats=spec.repeats,
            validation=frozenset(profile.name for profile in spec.validation()),
            objective=spec.objective,
            slos=spec.slos,
            stored=state.get(STAGE_STATE) or {},
            predict=stored_predictor(study.id, state) if study.id is not None else None,
        )
        self.plan = plan_study(
            baseline=baseline,
            stages=spec.stages,
            measurements=measured,
            rules=self.rules,
            gpus_per_node=self.gpus_per_node,
            gpus=self.gpus,
            evidence=evidence,
            strategy_for=strategy_for,
            propose=propose,
        )

    @property
    def detectable_gain_pct(self) -> float | None:
        """The smallest gain the study's design keeps 80 % of the time at its spread (None unknown)."""
        return detectable_gain(self.rules)

    def outcome(self, candidate: CandidatePlan) -> RunOutcome | None:
        """The run outcome behind a candidate (its own, or the one it reuses)."""
        return self.found.get(candidate.fingerprint) if candidate.fingerprint else None


def measured_spread(
    runs: Sequence[Run],
    results: Mapping[int, Sequence[ProfileResult]],
    fingerprint: str | None,
    spec: StudySpec,
) -> Spread | None:
    """The run-to-run and launch-to-launch spread of one configuration's launches (its repetitions)."""
    groups = [
        repetition_values(results.get(run.id, ()), spec.tuning(), spec.objective, spec.slos)
        for run in runs
        if run.config_fingerprint == fingerprint
    ]
    return estimate_spread([group for group in groups if group])


def load_progress(
    session: Session, *, study_id: int, strategy_for: StrategyFor = strategy_of, propose: bool = False
) -> StudyProgress:
    """The study's progress from the database; raises NotFound or StudySpecError. Only the
    coordinator lets its strategies ``propose`` new configurations: a page or report reads the study
    as it stands."""
    study = crud.get_study(session, study_id=study_id)
    if study is None:
        raise crud.NotFound("study", study_id)
    spec = spec_from_data(study.spec, name=f"study {study_id} spec")
    runs = study_runs(session, study_id=study_id)
    results = results_by_run(session, [run.id for run in runs])
    found = outcomes(
        runs,
        results,
        tuning=spec.tuning(),
        objective=spec.objective,
        slos=spec.slos,
        measure_from_run=(study.state or {}).get(MEASURE_FROM_RUN, 0),
        repeats=spec.repeats,
        scored=cost_scorer(session, spec.objective, runs),
        validation={profile.name for profile in spec.validation()},
    )
    progress = StudyProgress(study, spec, found, runs, results, strategy_for=strategy_for, propose=propose)
    progress.spread = measured_spread(runs, results, progress.plan.baseline.fingerprint, spec)
    return progress
