"""Studies and their candidates."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, select

from db.crud.fields import check_choice, check_columns
from db.crud.writes import execute_write, lock_row
from db.models import (
    CANDIDATE_DECISIONS,
    CANDIDATE_ROLES,
    STUDY_STATUSES,
    Study,
    StudyCandidate,
    utcnow,
)
from db.session import begin_write, is_sqlite

FINISHED_STUDY_STATUSES: frozenset[str] = frozenset({"done", "failed", "cancelled", "incomplete"})


def create_study(session: Session, *, name: str, spec: dict[str, Any], queued_by: str | None = None) -> Study:
    """Store a new queued study."""
    if not name.strip():
        raise ValueError("study name must not be empty")
    begin_write(session)
    study = Study(name=name.strip(), spec=spec, queued_by=queued_by)
    session.add(study)
    session.commit()
    return study


def get_study(session: Session, *, study_id: int) -> Study | None:
    """The study with this id, or None."""
    return session.get(Study, study_id)


def list_studies(session: Session, *, status: str | None = None) -> list[Study]:
    """Studies, newest first, optionally of one status."""
    query = select(Study)
    if status is not None:
        query = query.where(Study.status == status)
    return list(session.exec(query.order_by(Study.created_at.desc(), Study.id.desc())))


def change_study(
    session: Session, *, study_id: int, decide: Callable[[Study], dict[str, Any] | None]
) -> Study:
    """Lock the study, let ``decide`` compute the columns to set from its current values, and set them
    in the same transaction (``decide`` returning None changes nothing).

    ``updated_at`` is stamped, and ``finished_at`` when the status becomes done/failed/cancelled/
    incomplete.
    """
    study = lock_row(session, Study, study_id, "study")
    try:
        fields = decide(study)
        if fields is not None:
            check_columns(Study, fields, forbidden=("id", "created_at"))
            if "status" in fields:
                check_choice("study status", fields["status"], STUDY_STATUSES)
    except BaseException:
        session.rollback()
        raise
    if fields is None:
        session.rollback()
        return study
    now = utcnow()
    if "status" in fields and fields["status"] != study.status:
        study.wake_at = now  # resumed, sent back to running, …: a worker takes it from there
    for column, value in fields.items():
        setattr(study, column, value)
    study.updated_at = now
    if fields.get("status") in FINISHED_STUDY_STATUSES and study.finished_at is None:
        study.finished_at = now
    session.commit()
    return study


def wake_study_statement(study_id: int, *, delay_s: float = 0.0) -> sa.Update:
    """The UPDATE that makes study ``study_id`` due for a worker within ``delay_s`` seconds (an
    earlier wake-up stays); run it in the transaction of the change that concerns the study."""
    at = utcnow() + timedelta(seconds=delay_s)
    return (
        sa.update(Study)
        .where(Study.id == study_id, sa.or_(Study.wake_at.is_(None), Study.wake_at > at))
        .values(wake_at=at)
    )


def wake_study(session: Session, *, study_id: int, delay_s: float = 0.0) -> None:
    """Make study ``study_id`` due for a worker within ``delay_s`` seconds (its own transaction)."""
    execute_write(session, wake_study_statement(study_id, delay_s=delay_s))


def claim_due_study(session: Session, *, recheck_s: float) -> int | None:
    """Take the unfinished study that has been due longest, for this caller alone: its next wake-up
    moves ``recheck_s`` seconds ahead (a change meanwhile brings it back to now). Returns its id, or
    None when no study is due. Concurrent callers never get the same study (``SKIP LOCKED`` on
    PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite)."""
    begin_write(session)
    now = utcnow()
    query = (
        select(Study.id)
        .where(Study.status.not_in(sorted(FINISHED_STUDY_STATUSES)), Study.wake_at <= now)
        .order_by(Study.wake_at, Study.id)
        .limit(1)
    )
    if not is_sqlite(session):
        query = query.with_for_update(skip_locked=True)
    study_id = session.exec(query).first()
    if study_id is not None:
        session.execute(
            sa.update(Study).where(Study.id == study_id).values(wake_at=now + timedelta(seconds=recheck_s))
        )
    session.commit()
    return study_id


def update_study(session: Session, *, study_id: int, **fields: Any) -> Study:
    """Set columns of a study (``status``, ``state``, ``recommended_command``, …), stamped as
    :func:`change_study` stamps them."""
    return change_study(session, study_id=study_id, decide=lambda _study: fields)


def _check_candidate_fields(fields: dict[str, Any]) -> None:
    if "role" in fields:
        check_choice("candidate role", fields["role"], CANDIDATE_ROLES)
    if fields.get("decision") is not None:
        check_choice("candidate decision", fields["decision"], CANDIDATE_DECISIONS)


def add_candidate(
    session: Session,
    *,
    study_id: int,
    stage_index: int,
    stage_name: str,
    config: dict[str, Any],
    **fields: Any,
) -> StudyCandidate:
    """Store a candidate of a study's stage; ``fields`` sets any other column (label, role, …)."""
    check_columns(StudyCandidate, fields, forbidden=("id", "study_id", "stage_index", "stage_name", "config"))
    _check_candidate_fields(fields)
    begin_write(session)
    candidate = StudyCandidate(
        study_id=study_id, stage_index=stage_index, stage_name=stage_name, config=config, **fields
    )
    session.add(candidate)
    session.commit()
    return candidate


def update_candidate(session: Session, *, candidate_id: int, **fields: Any) -> StudyCandidate:
    """Set columns of a candidate (run_id, status, objective_value, decision, note, …)."""
    check_columns(StudyCandidate, fields, forbidden=("id", "study_id"))
    _check_candidate_fields(fields)
    candidate = lock_row(session, StudyCandidate, candidate_id, "study candidate")
    for column, value in fields.items():
        setattr(candidate, column, value)
    session.commit()
    return candidate


def list_candidates(session: Session, *, study_id: int) -> list[StudyCandidate]:
    """A study's candidates in stage order, then in the order they were added."""
    query = (
        select(StudyCandidate)
        .where(StudyCandidate.study_id == study_id)
        .order_by(StudyCandidate.stage_index, StudyCandidate.id)
    )
    return list(session.exec(query))


def delete_study(session: Session, *, study_id: int) -> bool:
    """Delete a study and its candidates (its runs stay, unlinked); False if it did not exist."""
    return bool(execute_write(session, sa.delete(Study).where(Study.id == study_id)))
