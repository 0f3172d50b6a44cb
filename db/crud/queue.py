"""The shared queue: claiming runs, GPU locks, worker registration and crash detection.

Every function here is safe when several worker processes (on one or more machines) call it at
once: claims take the oldest queued run with ``SELECT … FOR UPDATE SKIP LOCKED`` on PostgreSQL and
inside one ``BEGIN IMMEDIATE`` transaction on SQLite, so each run is claimed exactly once; GPU locks
are rows keyed by (host, GPU index), so two runs can never hold the same device.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlmodel import Session, select

from db.crud.writes import execute_write
from db.models import IN_FLIGHT_RUN_STATUSES, GpuLock, Run, Worker, utcnow
from db.session import begin_write, is_sqlite


def _claimable() -> sa.ColumnElement[bool]:
    """Runs a worker may claim: queued, and no cancellation requested."""
    return sa.and_(Run.status == "queued", Run.cancel_requested == sa.false())


def queued_host_names(session: Session) -> list[str]:
    """The hosts that have claimable queued runs, by name."""
    query = select(Run.host_name).where(_claimable(), Run.host_name.is_not(None)).distinct()
    return sorted(name for name in session.exec(query) if name is not None)


def claim_next_run(
    session: Session, *, worker_id: str, host_names: Sequence[str] | None = None
) -> Run | None:
    """Move the oldest queued run (of ``host_names`` when given) to ``launching`` for this worker.

    Returns the claimed run, or None when nothing is queued. Runs whose cancellation was requested
    are never claimed.
    """
    begin_write(session)
    query = select(Run).where(_claimable()).order_by(Run.created_at, Run.id).limit(1)
    if host_names is not None:
        query = query.where(Run.host_name.in_(list(host_names)))
    if not is_sqlite(session):
        query = query.with_for_update(skip_locked=True)
    run = session.exec(query.execution_options(populate_existing=True)).first()
    if run is None:
        session.commit()
        return None
    now = utcnow()
    run.status = "launching"
    run.launching_at = now
    run.heartbeat_at = now
    run.worker_id = worker_id
    session.commit()
    return run


def acquire_gpus(
    session: Session, *, host_name: str, gpu_ids: Iterable[int], run_id: int, worker_id: str
) -> bool:
    """Lock all of ``gpu_ids`` on ``host_name`` for ``run_id``, or none of them.

    Returns False when any of them is held by another run. Locks the run already holds count as
    acquired, so a worker may call this again after a restart.
    """
    wanted = sorted(set(gpu_ids))
    if not wanted:
        return True
    begin_write(session)
    held = session.exec(
        select(GpuLock).where(GpuLock.host_name == host_name, GpuLock.gpu_index.in_(wanted)).with_for_update()
    ).all()
    if any(lock.run_id != run_id for lock in held):
        session.rollback()
        return False
    already = {lock.gpu_index for lock in held}
    now = utcnow()
    session.add_all(
        GpuLock(host_name=host_name, gpu_index=index, run_id=run_id, worker_id=worker_id, acquired_at=now)
        for index in wanted
        if index not in already
    )
    try:
        session.commit()
    except sa.exc.IntegrityError:
        # Another process inserted one of these locks between our read and our insert.
        session.rollback()
        return False
    return True


def release_gpus(session: Session, *, run_id: int) -> int:
    """Release every GPU lock held by ``run_id``; returns how many were released."""
    return execute_write(session, sa.delete(GpuLock).where(GpuLock.run_id == run_id))


def gpu_locks(session: Session, *, host_name: str | None = None) -> list[GpuLock]:
    """The GPU locks held now (of one host when given), by host and GPU index."""
    query = select(GpuLock)
    if host_name is not None:
        query = query.where(GpuLock.host_name == host_name)
    return list(session.exec(query.order_by(GpuLock.host_name, GpuLock.gpu_index)))


def recent_gpu_users(
    session: Session, *, host_name: str, since: datetime, exclude_run_id: int | None = None
) -> dict[int, int]:
    """``{GPU index: run id}`` of the GPUs runs on ``host_name`` were placed on, for runs still in
    flight (a run releases its locks just before it stores its end) or ended at or after ``since``:
    memory on these GPUs is this database's engines freeing it, not someone else's."""
    query = select(Run).where(
        Run.host_name == host_name,
        sa.or_(Run.status.in_(IN_FLIGHT_RUN_STATUSES), Run.finished_at >= since),
    )
    if exclude_run_id is not None:
        query = query.where(Run.id != exclude_run_id)
    users: dict[int, int] = {}
    for run in session.exec(query.order_by(Run.id)):
        if run.id is not None:
            users.update({int(index): run.id for index in run.gpu_ids or ()})
    return users


def register_worker(session: Session, *, worker_id: str, hostname: str, pid: int) -> Worker:
    """Record a (re)started worker as running, with a fresh heartbeat."""
    begin_write(session)
    now = utcnow()
    worker = session.get(Worker, worker_id, populate_existing=True)
    if worker is None:
        worker = Worker(id=worker_id, hostname=hostname, pid=pid)
        session.add(worker)
    worker.hostname = hostname
    worker.pid = pid
    worker.started_at = now
    worker.heartbeat_at = now
    worker.state = "running"
    session.commit()
    return worker


def worker_heartbeat(session: Session, *, worker_id: str, state: str | None = None) -> None:
    """Refresh the heartbeat of a worker and of the runs it has in flight."""
    now = utcnow()
    values: dict[str, object] = {"heartbeat_at": now}
    if state is not None:
        values["state"] = state
    begin_write(session)
    session.execute(sa.update(Worker).where(Worker.id == worker_id).values(**values))
    session.execute(
        sa.update(Run)
        .where(Run.worker_id == worker_id, Run.status.in_(IN_FLIGHT_RUN_STATUSES))
        .values(heartbeat_at=now)
    )
    session.commit()


def stale_workers(session: Session, *, timeout_s: float, now: datetime | None = None) -> list[Worker]:
    """Workers not stopped whose last heartbeat is older than ``timeout_s`` seconds."""
    cutoff = (now or utcnow()) - timedelta(seconds=timeout_s)
    query = select(Worker).where(Worker.heartbeat_at < cutoff, Worker.state != "stopped").order_by(Worker.id)
    return list(session.exec(query))


def list_workers(session: Session) -> list[Worker]:
    """Every registered worker, most recent heartbeat first."""
    return list(session.exec(select(Worker).order_by(Worker.heartbeat_at.desc())))


def in_flight_runs(
    session: Session, *, worker_id: str | None = None, host_name: str | None = None
) -> list[Run]:
    """Runs claimed and not finished (launching, ready or benchmarking), of one worker or on one host."""
    query = select(Run).where(Run.status.in_(IN_FLIGHT_RUN_STATUSES))
    if worker_id is not None:
        query = query.where(Run.worker_id == worker_id)
    if host_name is not None:
        query = query.where(Run.host_name == host_name)
    return list(session.exec(query.order_by(Run.id)))
