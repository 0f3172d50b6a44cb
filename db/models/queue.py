"""Tables of the shared queue: ``worker`` (one row per worker process, with its heartbeat) and
``gpulock`` (which run holds which accelerator of which host; the primary key makes a GPU lockable
by one run only, across processes and machines)."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel

from db.models.base import UTCDateTime, utcnow


class Worker(SQLModel, table=True):
    """A worker process that executes queued runs and studies."""

    id: str = Field(primary_key=True)
    hostname: str
    pid: int
    started_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    heartbeat_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, index=True)
    state: str = "running"


class GpuLock(SQLModel, table=True):
    """GPU ``gpu_index`` of host ``host_name`` is held by run ``run_id``."""

    host_name: str = Field(primary_key=True)
    gpu_index: int = Field(primary_key=True)
    run_id: int = Field(foreign_key="run.id", ondelete="CASCADE", index=True)
    worker_id: str | None = None
    acquired_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
