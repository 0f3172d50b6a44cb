"""Deleting a run from the Run page: which runs may go (one that has ended and that no study uses:
none of a study's launches, repeats or validations while the study exists) and the deletion itself,
its profile results, request records and samples going with it (the schema's ``ON DELETE CASCADE``).
The study rule is :func:`db.crud.delete_run`'s own, so every path that deletes a run keeps it. Who may
delete is the page's business (:func:`perflab.ui.may_write`)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlmodel import Session

from db import crud
from db.models import FINISHED_RUN_STATUSES, Run


class RunNotDeletable(ValueError):
    """The run may not be deleted; ``str(error)`` says why."""


def delete_blocker(session: Session, run_id: int) -> str | None:
    """Why run ``run_id`` may not be deleted, or None when it may."""
    status = session.execute(sa.select(Run.status).where(Run.id == run_id)).scalar_one_or_none()
    if status is None:
        return f"Run {run_id} does not exist any more."
    if status not in FINISHED_RUN_STATUSES:
        return f"Run {run_id} is {status}: cancel it and wait until it has ended, then delete it."
    studies = crud.studies_using_run(session, run_id=run_id)
    return crud.run_in_use_message(run_id, studies) if studies else None


def delete_run(session: Session, run_id: int) -> None:
    """Delete run ``run_id`` with its results, request records and samples; raises
    :class:`RunNotDeletable` (nothing deleted) when :func:`delete_blocker` names a reason."""
    blocker = delete_blocker(session, run_id)
    if blocker is not None:
        raise RunNotDeletable(blocker)
    try:
        crud.delete_run(session, run_id=run_id)
    except crud.RunInUse as in_use:  # a study took the run up since the check
        raise RunNotDeletable(str(in_use)) from None
