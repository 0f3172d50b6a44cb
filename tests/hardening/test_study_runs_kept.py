"""Runs a study uses are not deleted from under it: every launch, repeat and validation run it queued
(not only the run a candidate row points to), on every path that deletes a run, with the reason; once
the study is deleted its runs may go."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.views import run_delete


def _relaunched_study(engine: Engine) -> tuple[int, list[int]]:
    """A finished ``relaunches: 2`` study: two launches of one configuration, the candidate row
    pointing to the second; returns the study id and its run ids."""
    with new_session(engine) as session:
        study = crud.create_study(session, name="batch <b>", spec={"relaunches": 2})
        runs = [
            crud.create_run(
                session, engine="vllm", model="m", host_name="h", status="done", study_id=study.id
            )
            for _ in range(2)
        ]
        crud.add_candidate(
            session, study_id=study.id, stage_index=0, stage_name="Batch", config={}, run_id=runs[-1].id
        )
        return int(study.id), [int(run.id) for run in runs]


def test_the_first_launch_of_a_relaunched_study_is_not_deleted(runs_db: Engine) -> None:
    study_id, (first, second) = _relaunched_study(runs_db)
    reason = (
        f"Run {first} is a measurement of study #{study_id} (batch <b>): its decisions and report rest on it."
    )
    with new_session(runs_db) as session:
        assert run_delete.delete_blocker(session, first) == reason
        with pytest.raises(run_delete.RunNotDeletable, match="is a measurement of study"):
            run_delete.delete_run(session, first)
        with pytest.raises(crud.RunInUse) as refused:
            crud.delete_run(session, run_id=first)
        assert str(refused.value) == reason
        with pytest.raises(crud.RunInUse):
            crud.delete_run(session, run_id=second)
        assert crud.get_run(session, run_id=first) is not None
        assert crud.get_run(session, run_id=second) is not None


def test_a_deleted_study_frees_its_runs(runs_db: Engine) -> None:
    study_id, (first, second) = _relaunched_study(runs_db)
    with new_session(runs_db) as session:
        assert crud.delete_study(session, study_id=study_id)
        assert run_delete.delete_blocker(session, first) is None
        run_delete.delete_run(session, first)
        assert crud.delete_run(session, run_id=second)
        assert crud.get_run(session, run_id=first) is None
