"""Crash recovery: runs left in flight by a worker that died are stopped on their hosts and failed.

A worker whose heartbeat is older than the stale limit is taken for dead; so is an earlier process
with this worker's own id (found when a worker starts). For each of their runs still launching, ready
or benchmarking, everything the run recorded in ``remote_state`` is stopped — the engines on its
host, the benchmark in flight on its host or, when it was forwarded, on this machine (only a worker
on the machine that ran a forwarded bench finds it) — and the result that bench left is stored:
partial when it was stopped, complete when it had finished before the worker read it back. Its GPU
locks are released; a run whose every profile (every sweep point) now has a complete result is
``done`` (its recovery noted in ``remote_state["recovered"]``), any other is ``failed``
(``worker_restarted``), keeping the results stored so far. A host that cannot be reached is named in
the failure message. Log tails and errors are redacted before they are stored.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from sqlalchemy.engine import Engine
from sqlmodel import Session

from db import crud
from db.models import Run
from db.session import new_session
from perflab.inventory import Inventory, InventoryError
from perflab.profiles import BenchmarkProfile
from perflab.redact import Redactor, hosts_redactor
from perflab.runner.bench_record import sweep_label
from perflab.runner.stop import wind_down
from perflab.runner.store import RunStore, point_key
from perflab.simhost import SimulatedHostError
from perflab.transport import open_transport
from perflab.transport.errors import TransportError

logger = logging.getLogger(__name__)

RESTART_MESSAGE = "worker restarted while the run was in flight"
LOG_TAIL_LINES = 200


def _stop_on_host(
    engine: Engine, run: Run, inventory: Inventory, grace_s: float, redactor: Redactor
) -> tuple[dict[str, object], str | None]:
    """Stop the run's recorded processes; returns the fields to store and a problem, if any."""
    state = dict(run.remote_state or {})
    if not state.get("run_key"):
        return {}, None
    host_name = state.get("host") or run.host_name
    try:
        host = inventory.get(str(host_name))
        with open_transport(host) as transport:
            tail = wind_down(
                transport,
                RunStore(engine, run.id, redactor),
                state,
                grace_s=grace_s,
                log_lines=LOG_TAIL_LINES,
            )
    except (InventoryError, TransportError, SimulatedHostError) as exc:
        state["cleanup_error"] = str(exc)
        return {"remote_state": state}, f"its processes on host '{host_name}' could not be stopped: {exc}"
    except crud.NotFound:  # deleted while it was stopped: nothing of it to store
        return {}, None
    fields: dict[str, object] = {"remote_state": state}
    if tail is not None:
        fields["log_tail"] = tail
    return fields, None


def measured_every_profile(session: Session, run: Run) -> bool:
    """Whether every profile the run lists has a complete (not partial) result at each sweep point."""
    stored = {
        point_key(result.profile_name, result.sweep_point)
        for result in crud.list_profile_results(session, run_id=run.id)
        if not (result.result or {}).get("partial")
    }
    wanted = [BenchmarkProfile.model_validate(profile) for profile in run.profiles]
    return bool(wanted) and all(
        point_key(profile.name, sweep_label(profile, index)) in stored
        for profile in wanted
        for index in range(len(profile.sweep_points()))
    )


def recover_run(engine: Engine, run: Run, inventory: Inventory, *, grace_s: float) -> bool:
    """Stop one orphaned run and end it (done when every profile's complete result is stored, else
    failed); False if it had finished meanwhile or was deleted."""
    redactor = hosts_redactor(inventory)
    fields, problem = _stop_on_host(engine, run, inventory, grace_s, redactor)
    fields = redactor.data(fields)
    message = RESTART_MESSAGE if problem is None else f"{RESTART_MESSAGE}; {redactor.text(problem)}"
    with new_session(engine) as session:
        crud.release_gpus(session, run_id=run.id)
        try:
            if problem is None and measured_every_profile(session, crud.require_run(session, run_id=run.id)):
                state = {**fields.get("remote_state", run.remote_state or {}), "recovered": message}
                crud.set_run_status(
                    session, run_id=run.id, status="done", **{**fields, "remote_state": state}
                )
                logger.warning("run %s: %s; every result was stored, so it is done", run.id, message)
                return True
            crud.set_run_status(
                session,
                run_id=run.id,
                status="failed",
                failure_class="worker_restarted",
                failure_message=message,
                **fields,
            )
        except (crud.IllegalTransition, crud.NotFound):
            return False
    logger.warning("run %s: %s", run.id, message)
    return True


def orphaned_runs(
    engine: Engine, *, worker_id: str, stale_after_s: float, include_own: bool
) -> tuple[list[Run], list[str]]:
    """In-flight runs of dead workers (with ``include_own``, also those of an earlier process with
    ``worker_id``), and the dead workers' ids."""
    with new_session(engine) as session:
        dead = [
            worker.id
            for worker in crud.stale_workers(session, timeout_s=stale_after_s)
            if worker.id != worker_id
        ]
        owners = [worker_id, *dead] if include_own else dead
        runs = [run for owner in owners for run in crud.in_flight_runs(session, worker_id=owner)]
    return runs, dead


def mark_stopped(engine: Engine, worker_ids: Iterable[str]) -> None:
    """Record dead workers as stopped, so they are not recovered again."""
    with new_session(engine) as session:
        for dead in worker_ids:
            crud.worker_heartbeat(session, worker_id=dead, state="stopped")


def recover(
    engine: Engine,
    inventory: Inventory,
    *,
    worker_id: str,
    stale_after_s: float,
    grace_s: float,
    include_own: bool = False,
) -> list[int]:
    """Recover every orphaned run; returns their ids. ``include_own`` (only before this worker has
    started any run) also recovers runs an earlier process with the same id left in flight."""
    runs, dead = orphaned_runs(
        engine, worker_id=worker_id, stale_after_s=stale_after_s, include_own=include_own
    )
    recovered = [run.id for run in runs if recover_run(engine, run, inventory, grace_s=grace_s)]
    mark_stopped(engine, dead)
    return recovered
