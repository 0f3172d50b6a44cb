"""The ``study`` and ``studycandidate`` tables: an optimization study, its resumable state, and
every candidate configuration it tried with the decision taken about it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from db.models.base import UTCDateTime, utcnow


class Study(SQLModel, table=True):
    """One optimization study (stages of candidates on top of the best so far)."""

    id: int | None = Field(default=None, primary_key=True)
    name: str
    status: str = Field(default="queued", index=True)
    spec: dict[str, Any] = Field(default_factory=dict, sa_type=sa.JSON)
    state: dict[str, Any] = Field(default_factory=dict, sa_type=sa.JSON)
    recommended_command: str | None = Field(default=None, sa_type=sa.Text)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, index=True)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    queued_by: str | None = None
    # When a worker should advance the study next (now when something about it changed); None: never.
    wake_at: datetime | None = Field(default_factory=utcnow, sa_type=UTCDateTime, index=True)


class StudyCandidate(SQLModel, table=True):
    """A configuration tried (or to be tried) by a study, and what was decided about it."""

    id: int | None = Field(default=None, primary_key=True)
    study_id: int = Field(foreign_key="study.id", ondelete="CASCADE", index=True)
    stage_index: int
    stage_name: str
    label: str | None = None
    config: dict[str, Any] = Field(default_factory=dict, sa_type=sa.JSON)
    config_fingerprint: str | None = Field(default=None, index=True)
    run_id: int | None = Field(default=None, foreign_key="run.id", ondelete="SET NULL", index=True)
    role: str = "candidate"
    status: str = "queued"
    objective_value: float | None = None
    decision: str | None = None
    note: str | None = Field(default=None, sa_type=sa.Text)
