"""A study as it stands, read from the database: its spec, its runs' outcomes and the plan they lead to.

The coordinator acts on it; the study page, the report and ``study show`` draw it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlmodel import Session

from db import crud
from db.models import Run, Study
from perflab.cost.stored import cost_scorer
from perflab.study.measure import (
    MEASURE_FROM_RUN,
    RunOutcome,
    measurements,
    outcomes,
    results_by_run,
    study_runs,
)
from perflab.study.objective import LOWER_IS_BETTER
from perflab.study.plan import CandidatePlan, Rules, plan_study
from perflab.study.spec import StudySpec, StudySpecError, spec_from_data


class StudyProgress:
    """A study with its spec, its runs' outcomes and the plan they lead to (read-only)."""

    def __init__(
        self, study: Study, spec: StudySpec, found: Mapping[str, RunOutcome], runs: Sequence[Run]
    ) -> None:
        self.study = study
        self.spec = spec
        self.found = found
        self.runs = list(runs)
        self.gpus_per_node: int | None = (study.state or {}).get("gpus_per_node") or spec.gpus_per_node
        try:
            baseline = spec.baseline_config(self.gpus_per_node)
        except ValueError as error:
            raise StudySpecError([f"study {study.id} baseline: {error}"]) from None
        self.plan = plan_study(
            baseline=baseline,
            stages=spec.stages,
            measurements=measurements(found),
            rules=Rules(
                min_success=spec.min_success_pct / 100.0,
                min_gain=spec.min_gain_pct / 100.0,
                lower_is_better=spec.objective in LOWER_IS_BETTER,
            ),
            gpus_per_node=self.gpus_per_node,
        )

    def outcome(self, candidate: CandidatePlan) -> RunOutcome | None:
        """The run outcome behind a candidate (its own, or the one it reuses)."""
        return self.found.get(candidate.fingerprint) if candidate.fingerprint else None


def load_progress(session: Session, *, study_id: int) -> StudyProgress:
    """The study's progress from the database; raises NotFound or StudySpecError."""
    study = crud.get_study(session, study_id=study_id)
    if study is None:
        raise crud.NotFound("study", study_id)
    spec = spec_from_data(study.spec, name=f"study {study_id} spec")
    runs = study_runs(session, study_id=study_id)
    found = outcomes(
        runs,
        results_by_run(session, [run.id for run in runs]),
        tuning=spec.tuning(),
        objective=spec.objective,
        slos=spec.slos,
        measure_from_run=(study.state or {}).get(MEASURE_FROM_RUN, 0),
        scored=cost_scorer(session, spec.objective, runs),
    )
    return StudyProgress(study, spec, found, runs)
