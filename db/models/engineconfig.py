"""The ``engineconfig`` table: each distinct :class:`perflab.engines.config.EngineConfig` once,
keyed by its fingerprint, so runs of the same configuration can be grouped."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from db.models.base import UTCDateTime, utcnow


class EngineConfigRow(SQLModel, table=True):
    """A stored engine configuration (the JSON dump of ``EngineConfig``)."""

    __tablename__ = "engineconfig"

    id: int | None = Field(default=None, primary_key=True)
    fingerprint: str = Field(unique=True, index=True)
    engine: str = Field(index=True)
    model: str = Field(index=True)
    config: dict[str, Any] = Field(sa_type=sa.JSON)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
