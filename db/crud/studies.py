"""Studies and their candidates."""

from __future__ import annotations

from collections.abc import Callable
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
from db.session import begin_write

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
    for column, value in fields.items():
        setattr(study, column, value)
    study.updated_at = now
    if fields.get("status") in FINISHED_STUDY_STATUSES and study.finished_at is None:
        study.finished_at = now
    session.commit()
    return study


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
