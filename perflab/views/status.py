"""The sidebar's summary: which database the app uses, whether a worker is alive, and which runs
are queued or in flight."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Session

from db import crud
from db.models import Run, utcnow
from perflab.views.formatting import host_label

ACTIVE_RUNS_SHOWN = 8
# The in-flight statuses in lifecycle order (db.models.IN_FLIGHT_RUN_STATUSES).
IN_FLIGHT_ORDER: tuple[str, ...] = ("launching", "ready", "benchmarking")


@dataclass(frozen=True)
class WorkerState:
    id: str
    hostname: str
    state: str
    heartbeat_age_s: float
    # Older heartbeats mean the worker is not responding (``PERFLAB_WORKER_STALE_S``, as recovery uses).
    stale_after_s: float

    @property
    def alive(self) -> bool:
        return self.state != "stopped" and self.heartbeat_age_s <= self.stale_after_s

    def text(self) -> str:
        """``worker@host: running, heartbeat 3 s ago``."""
        condition = self.state if self.alive else ("stopped" if self.state == "stopped" else "not responding")
        return f"{self.id} on {self.hostname}: {condition}, heartbeat {self.heartbeat_age_s:.0f} s ago"


@dataclass(frozen=True)
class ActiveRun:
    id: int
    status: str
    host: str
    title: str


@dataclass(frozen=True)
class AppStatus:
    database: str
    workers: list[WorkerState]
    queued: int
    in_flight: int
    active_runs: list[ActiveRun]

    in_flight_by_status: dict[str, int] = field(default_factory=dict)

    def runs_text(self) -> str:
        """``Queued runs: 1 · in flight: 2 (launching 1, benchmarking 1)``: every run a worker holds,
        from the moment it starts launching."""
        detail = ", ".join(f"{name} {count}" for name, count in self.in_flight_by_status.items() if count)
        return f"Queued runs: {self.queued} · in flight: {self.in_flight}" + (
            f" ({detail})" if detail else ""
        )

    @property
    def worker_alive(self) -> bool:
        return any(worker.alive for worker in self.workers)

    def worker_summary(self) -> str:
        """One line on who executes queued runs."""
        alive = [worker for worker in self.workers if worker.alive]
        if alive:
            return f"{len(alive)} worker{'s' if len(alive) > 1 else ''} running"
        return "No worker running: queued runs wait until one starts (python -m perflab worker)."


def _age(moment: datetime, now: datetime) -> float:
    return max(0.0, (now - moment).total_seconds())


def app_status(
    session: Session,
    *,
    database: str,
    stale_after_s: float,
    now: datetime | None = None,
    simulated_hosts: Collection[str] = (),
) -> AppStatus:
    """The summary for the sidebar (three small indexed queries); a worker silent for longer than
    ``stale_after_s`` is shown as not responding. A run on one of ``simulated_hosts`` is labelled
    simulated before it has started too (a run learns it is when it launches)."""
    now = now or utcnow()
    workers = [
        WorkerState(worker.id, worker.hostname, worker.state, _age(worker.heartbeat_at, now), stale_after_s)
        for worker in crud.list_workers(session)
    ]
    watched = ["queued", *IN_FLIGHT_ORDER]
    counts = dict(
        session.execute(
            sa.select(Run.status, sa.func.count()).where(Run.status.in_(watched)).group_by(Run.status)
        ).all()
    )
    queued = counts.get("queued", 0)
    in_flight = sum(counts.get(name, 0) for name in IN_FLIGHT_ORDER)
    by_status = {name: counts.get(name, 0) for name in IN_FLIGHT_ORDER} if in_flight else {}
    active = session.execute(
        sa.select(Run.id, Run.status, Run.host_name, Run.simulated, Run.label, Run.engine, Run.model)
        .where(Run.status.in_(watched))
        .order_by(Run.created_at.desc(), Run.id.desc())
        .limit(ACTIVE_RUNS_SHOWN)
    ).all()
    active_runs = [
        ActiveRun(
            id=row.id,
            status=row.status,
            host=host_label(row.host_name, row.simulated or row.host_name in simulated_hosts),
            title=row.label or " ".join(part for part in (row.engine, row.model) if part) or f"run {row.id}",
        )
        for row in active
    ]
    return AppStatus(
        database=database,
        workers=workers,
        queued=queued,
        in_flight=in_flight,
        active_runs=active_runs,
        in_flight_by_status=by_status,
    )
