"""The ``host`` table: every host perflab has seen, with its last probe."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from db.models.base import UTCDateTime


class Host(SQLModel, table=True):
    """A host of hosts.yaml (or one that ran an imported result) and what its last probe found."""

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, index=True)
    address: str | None = None
    transport: str | None = None
    simulated: bool = False
    labels: dict[str, Any] = Field(default_factory=dict, sa_type=sa.JSON)
    last_probe: dict[str, Any] | None = Field(default=None, sa_type=sa.JSON)
    last_probe_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    reachable: bool | None = None
    last_error: str | None = Field(default=None, sa_type=sa.Text)
