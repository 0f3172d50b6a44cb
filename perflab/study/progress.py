"""A study as it stands, read from the database: its spec, its runs' outcomes and the plan they lead to.

The coordinator acts on it; the study page, the report and ``study show`` draw it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlmodel import Session

from db import crud
from db.models import ProfileResult, Run, Study
from perflab.cost.stored import cost_scorer
from perflab.study.measure import (
    MEASURE_FROM_RUN,
    RunOutcome,
    measurements,
    outcomes,
    repetition_values,
    results_by_run,
    study_runs,
)
from perflab.study.noise import Spread, estimate_spread
from perflab.study.objective import LOWER_IS_BETTER
from perflab.study.plan import CandidatePlan, Rules, SearchContext, plan_study
from perflab.study.search_stage import (
    SEARCH_TRIALS,
    objectives_of,
    observations,
    run_gpu_hours,
    screening_profile,
)
from perflab.study.spec import StudySpec, StudySpecError, spec_from_data


class StudyProgress:
    """A study with its spec, its runs' outcomes and the plan they lead to (read-only)."""

    def __init__(
        self,
        study: Study,
        spec: StudySpec,
        found: Mapping[str, RunOutcome],
        runs: Sequence[Run],
        search: SearchContext | None = None,
        results: Mapping[int, Sequence[ProfileResult]] | None = None,
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
        stored = state.get("prior_spread") or {}
        prior = Spread(**{key: stored[key] for key in Spread.__dataclass_fields__}) if stored else None
        self.rules = Rules(
            min_success=spec.min_success_pct / 100.0,
            min_gain=spec.min_gain_pct / 100.0,
            confidence=spec.confidence,
            relaunches=spec.relaunches,
            max_launches=max(spec.max_launches, spec.relaunches),
            measures_noise=spec.measures_noise,
            prior_cv_pct=prior.per_launch_cv_pct(spec.repeats) if prior else None,
            prior_df=prior.df if prior else None,
            lower_is_better=spec.objective in LOWER_IS_BETTER,
        )
        self.plan = plan_study(
            baseline=baseline,
            stages=spec.stages,
            measurements=measurements(found),
            rules=self.rules,
            gpus_per_node=self.gpus_per_node,
            gpus=self.gpus,
            search=search,
        )

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


def load_progress(session: Session, *, study_id: int) -> StudyProgress:
    """The study's progress from the database; raises NotFound or StudySpecError."""
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
    )
    search = _search_context(study, spec, runs, results, found)
    progress = StudyProgress(study, spec, found, runs, search, results)
    progress.spread = measured_spread(runs, results, progress.plan.baseline.fingerprint, spec)
    return progress


def _search_context(
    study: Study,
    spec: StudySpec,
    runs: Sequence[Run],
    results: Mapping[int, Sequence[ProfileResult]],
    found: Mapping[str, RunOutcome],
) -> SearchContext | None:
    """The stored trials and the runs' observations, for a study with a search stage."""
    search = next((stage.search for stage in spec.stages if stage.search is not None), None)
    if search is None:
        return None
    tuning = spec.tuning()
    seen = observations(
        runs,
        results,
        found,
        tuning=tuning,
        screening=screening_profile(tuning, search.screening),
        objectives=objectives_of(search, spec.objective),
        slos=spec.slos,
    )
    stored = (study.state or {}).get(SEARCH_TRIALS) or {}
    hours = sum(run_gpu_hours(run) for run in runs)
    return SearchContext(stored=stored, runs=seen, objective=spec.objective, gpu_hours=hours)
