"""The worker: claims queued runs from the database and executes them, one thread per run.

A :class:`Worker` registers itself in the ``worker`` table and heartbeats (which also keeps its runs'
heartbeats fresh), recovers runs that dead workers left in flight (on start and then periodically),
and claims the oldest queued runs up to ``max_parallel_runs`` at once, so runs on different hosts
proceed in parallel. GPU locks keep runs apart on one host: a run whose GPUs other runs hold goes
back to the queue and its host is skipped until one of this worker's runs there ends or
``gpu_retry_s`` passes, so runs queued for other hosts are not held up behind it. The hosts file is
read again at every claim, so edits apply without a restart. Each poll also advances the studies that
are due (:mod:`perflab.worker.studies`). A failed run is logged at WARNING with its failure class and
message, a run handed back to the queue at INFO with the reason.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab import settings
from perflab.inventory import Inventory, InventoryError, default_inventory_path, load_inventory
from perflab.runner import EventHandler, RunnerOptions, execute_run, spool
from perflab.worker.recovery import recover
from perflab.worker.studies import advance_due_studies

logger = logging.getLogger(__name__)
STOPPED_MESSAGE = "the worker shut down while the run was in flight"


def default_worker_id(prefix: str = "worker") -> str:
    """``<prefix>-<hostname>-<pid>``: unique per process across the machines sharing a database."""
    return f"{prefix}-{socket.gethostname()}-{os.getpid()}"


@dataclass
class RunHandle:
    """A run this worker is executing: ``wait()`` until it ends, then its final ``status``.

    (Waiting on an event rather than joining the thread keeps Ctrl-C safe: an interrupted
    ``Thread.join`` can mark a live thread as stopped.)
    """

    run_id: int
    host_name: str
    thread: threading.Thread
    done: threading.Event
    status: str | None = None

    def wait(self, timeout_s: float | None = None) -> bool:
        """True once the run has ended (within ``timeout_s``)."""
        return self.done.wait(timeout_s)


class Worker:
    """Executes queued runs. ``start()`` runs it in background threads; ``run_once()`` claims what it
    can now, waits for those runs and returns ``{run id: final status}`` (tests, ``--once``)."""

    def __init__(
        self,
        engine: Engine,
        *,
        inventory_path: str | Path | None = None,
        worker_id: str | None = None,
        poll_interval_s: float = 2.0,
        max_parallel_runs: int = 4,
        heartbeat_interval_s: float = 5.0,
        stale_after_s: float | None = None,
        gpu_retry_s: float = 10.0,
        runner_options: RunnerOptions | None = None,
    ) -> None:
        if max_parallel_runs < 1:
            raise ValueError("max_parallel_runs must be at least 1")
        self.engine = engine
        self.inventory_path = Path(inventory_path) if inventory_path is not None else default_inventory_path()
        self.worker_id = worker_id or default_worker_id()
        self.poll_interval_s = poll_interval_s
        self.max_parallel_runs = max_parallel_runs
        self.heartbeat_interval_s = heartbeat_interval_s
        self.stale_after_s = stale_after_s if stale_after_s is not None else settings.worker_stale_s()
        self.gpu_retry_s = gpu_retry_s
        self.runner_options = runner_options or RunnerOptions()
        self._stopping = threading.Event()
        self._stop_message = STOPPED_MESSAGE
        self._lock = threading.Lock()
        self._active: dict[int, RunHandle] = {}
        self._blocked_until: dict[str, float] = {}
        self._threads: list[threading.Thread] = []
        self._registered = False
        self._own_recovered = False
        self._last_recovery = 0.0
        self.last_inventory_error: str | None = None

    # ----- lifecycle ---------------------------------------------------------------------------------

    def _register(self) -> None:
        """Record this worker and start its heartbeat (once)."""
        if self._registered:
            return
        with new_session(self.engine) as session:
            crud.register_worker(
                session, worker_id=self.worker_id, hostname=socket.gethostname(), pid=os.getpid()
            )
        self._registered = True
        self._spawn(self._heartbeat_loop, "heartbeat")

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=f"{self.worker_id}-{name}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def start(self) -> None:
        """Register and poll the queue in the background until :meth:`stop` (the first poll recovers
        orphaned runs, including those an earlier process with this id left in flight)."""
        self._register()
        self._spawn(self._claim_loop, "claims")

    def stop(self, timeout_s: float = 60.0, *, reason: str | None = None) -> None:
        """Stop claiming; in-flight runs stop their engines and end ``failed`` (worker_stopped, with
        ``reason`` as their message when given). Stopping again (e.g. at exit) does nothing."""
        if self._stopping.is_set():
            return
        if reason is not None:
            self._stop_message = reason
        self._stopping.set()
        deadline = time.monotonic() + timeout_s
        for thread in [*self._threads, *(active.thread for active in self._snapshot())]:
            thread.join(timeout=max(deadline - time.monotonic(), 0.1))
        if self._registered:
            try:
                with new_session(self.engine) as session:
                    crud.worker_heartbeat(session, worker_id=self.worker_id, state="stopped")
            except sa.exc.DBAPIError as exc:
                if not spool.unavailable(exc):
                    raise
                logger.warning("worker %s: stop not stored: %s", self.worker_id, spool.first_line(exc))

    def execute(self, run_id: int, *, on_event: EventHandler | None = None) -> RunHandle:
        """Execute a run this worker already holds (``launching`` with this worker's id, as
        :func:`perflab.runner.submit_run` stores it) in a background thread, with heartbeats."""
        self._register()
        with new_session(self.engine) as session:
            run = crud.require_run(session, run_id=run_id)
        inventory = self._inventory()
        if inventory is None:
            raise InventoryError([self.last_inventory_error or f"cannot read {self.inventory_path}"])
        return self._start_run(run_id, run.host_name or "", inventory, on_event)

    @property
    def running(self) -> bool:
        return any(thread.is_alive() for thread in self._threads) and not self._stopping.is_set()

    def active_runs(self) -> list[int]:
        """The runs this worker is executing now."""
        return [run_id for run_id, active in self._snapshot_items() if not active.done.is_set()]

    def run_once(self) -> dict[int, str]:
        """Claim every run that can start now, wait until they end; ``{run id: final status}``."""
        self._register()
        started = self._claim_available()
        handles = [self._active[run_id] for run_id in started]
        for handle in handles:
            handle.wait()
        finished = {handle.run_id: handle.status or "unknown" for handle in handles}
        self._reap()
        return finished

    # ----- loops -------------------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        while not self._stopping.wait(self.heartbeat_interval_s):
            try:
                with new_session(self.engine) as session:
                    crud.worker_heartbeat(session, worker_id=self.worker_id)
            except sa.exc.SQLAlchemyError as exc:
                self._database_error(exc, "storing the heartbeat")

    def _database_error(self, error: sa.exc.SQLAlchemyError, doing: str) -> None:
        """Log a loop's database error: one line when the database is unavailable (the loop tries
        again), with the traceback otherwise."""
        if spool.unavailable(error):
            logger.warning("worker %s: database unavailable while %s: %s", self.worker_id, doing,
                           spool.first_line(error))  # fmt: skip
        else:
            logger.exception("worker %s: database error while %s", self.worker_id, doing)

    def _claim_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                self._reap()
                advance_due_studies(self.engine, holder=self.worker_id, should_stop=self._stopping.is_set)
                self._claim_available()
            except sa.exc.SQLAlchemyError as exc:
                self._database_error(exc, "claiming")
            self._stopping.wait(self.poll_interval_s)

    # ----- claiming ----------------------------------------------------------------------------------

    def _inventory(self) -> Inventory | None:
        try:
            inventory = load_inventory(self.inventory_path)
        except InventoryError as exc:
            if str(exc) != self.last_inventory_error:
                logger.error("worker %s: cannot read the hosts file: %s", self.worker_id, exc)
            self.last_inventory_error = str(exc)
            return None
        self.last_inventory_error = None
        return inventory

    def _recover(self, inventory: Inventory, *, include_own: bool) -> None:
        self._last_recovery = time.monotonic()
        recovered = recover(
            self.engine,
            inventory,
            worker_id=self.worker_id,
            stale_after_s=self.stale_after_s,
            grace_s=self.runner_options.stop_grace_s,
            include_own=include_own,
        )
        if recovered:
            logger.warning("worker %s: ended orphaned runs %s", self.worker_id, recovered)

    def _snapshot_items(self) -> list[tuple[int, RunHandle]]:
        with self._lock:
            return list(self._active.items())

    def _snapshot(self) -> list[RunHandle]:
        return [active for _, active in self._snapshot_items()]

    def _reap(self) -> None:
        with self._lock:
            for run_id in [run_id for run_id, active in self._active.items() if active.done.is_set()]:
                del self._active[run_id]

    def _claimable_hosts(self) -> list[str]:
        now = time.monotonic()
        with self._lock:
            self._blocked_until = {host: until for host, until in self._blocked_until.items() if until > now}
            blocked = set(self._blocked_until)
        with new_session(self.engine) as session:
            queued = crud.queued_host_names(session)
        return [host for host in queued if host not in blocked]

    def _claim_available(self) -> list[int]:
        """Claim and start runs while there is capacity; returns the ids started."""
        inventory = self._inventory()
        if inventory is None:
            return []
        # Results runs kept while the database was unavailable are stored before any recovery.
        spool.replay_all(self.engine)
        if not self._own_recovered:
            self._recover(inventory, include_own=True)
            self._own_recovered = True
        elif time.monotonic() - self._last_recovery > self.stale_after_s:
            self._recover(inventory, include_own=False)
        started: list[int] = []
        while not self._stopping.is_set() and len(self.active_runs()) < self.max_parallel_runs:
            hosts = self._claimable_hosts()
            if not hosts:
                break
            with new_session(self.engine) as session:
                run = crud.claim_next_run(session, worker_id=self.worker_id, host_names=hosts)
            if run is None:
                break
            logger.info("worker %s: claimed run %s on host %s", self.worker_id, run.id, run.host_name)
            self._start_run(run.id, run.host_name or "", inventory)
            started.append(run.id)
        return started

    def _start_run(
        self, run_id: int, host_name: str, inventory: Inventory, on_event: EventHandler | None = None
    ) -> RunHandle:
        def target() -> None:
            self._execute(handle, inventory, on_event)

        thread = threading.Thread(target=target, name=f"{self.worker_id}-run-{run_id}", daemon=True)
        handle = RunHandle(run_id, host_name, thread, threading.Event())
        with self._lock:
            self._active[run_id] = handle
        thread.start()
        return handle

    def _execute(self, handle: RunHandle, inventory: Inventory, on_event: EventHandler | None) -> None:
        run_id = handle.run_id
        status: str | None = None
        try:
            status = execute_run(
                run_id,
                engine=self.engine,
                inventory=inventory,
                worker_id=self.worker_id,
                stop_reason=self._stop_reason,
                options=self.runner_options,
                on_event=on_event,
            )
        except Exception:  # the thread must report, not vanish; execute_run already finished the run
            logger.exception("worker %s: run %s raised", self.worker_id, run_id)
        finally:
            self._finished(handle, status)

    def _stop_reason(self) -> str | None:
        """Why this worker's runs must stop now, or None while they may go on."""
        return self._stop_message if self._stopping.is_set() else None

    def _log_end(self, run_id: int, status: str | None) -> None:
        """One line per ended run: WARNING with the class and first line of the message for a failed
        run, INFO with the reason for a run handed back to the queue, INFO otherwise."""
        if status not in ("failed", "queued"):
            logger.info("worker %s: run %s ended %s", self.worker_id, run_id, status)
            return
        try:
            with new_session(self.engine) as session:
                run = crud.require_run(session, run_id=run_id)
        except (sa.exc.SQLAlchemyError, crud.NotFound) as exc:  # the database is down, or the run deleted
            logger.warning("worker %s: run %s ended %s (not read back: %s)", self.worker_id, run_id, status,
                           spool.first_line(exc))  # fmt: skip
            return
        if run.status != status:  # the database did not take the run's end (nor did its spool)
            logger.warning("worker %s: run %s ended %s, not stored (it is %s in the database)",
                           self.worker_id, run_id, status, run.status)  # fmt: skip
            return
        if status == "failed":
            message = (run.failure_message or "").strip().splitlines()
            logger.warning("worker %s: run %s failed: %s: %s", self.worker_id, run_id, run.failure_class,
                           message[0] if message else "no message")  # fmt: skip
        else:
            reason = (run.progress or {}).get("waiting_for_gpus") or "its GPUs were busy"
            logger.info("worker %s: run %s handed back to the queue: %s", self.worker_id, run_id, reason)

    def _finished(self, handle: RunHandle, status: str | None) -> None:
        """End this thread's own handle: a run handed back to the queue may already be claimed again
        (a newer handle under the same id), which this leaves running."""
        self._log_end(handle.run_id, status)
        with self._lock:
            handle.status = status
            if status == "queued":
                self._blocked_until[handle.host_name] = time.monotonic() + self.gpu_retry_s
            else:
                self._blocked_until.pop(handle.host_name, None)
        handle.done.set()
