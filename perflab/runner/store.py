"""Every database write of one run, each in its own short session (safe from any thread).

The runner's threads (the lifecycle, the metric sampler, progress callbacks) share one
:class:`RunStore`; each call opens a session, calls one :mod:`db.crud` function and closes it, so no
session ever crosses a thread. Everything written passes through the store's
:class:`~perflab.redact.Redactor` first: text from the host (log tails, failure messages, commands,
progress lines, benchmark errors) never brings a secret into the database.
"""

from __future__ import annotations

import logging
import math
import re
import secrets
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from db import crud
from db.models import IN_FLIGHT_RUN_STATUSES, Run, utcnow
from db.session import new_session
from perflab.redact import Redactor
from perflab.runner import spool

logger = logging.getLogger(__name__)

# ``run-<run id>-<6 random hex digits>``: one launch of a run (a relaunch gets a new key).
_RUN_KEY = re.compile(r"^run-([0-9]+)-[0-9a-f]{6}$")


def new_run_key(run_id: int) -> str:
    """A fresh key for one launch of run ``run_id`` (its processes' directory and marker)."""
    return f"run-{run_id}-{secrets.token_hex(3)}"


def json_safe(value: Any) -> Any:
    """``value`` with non-finite floats (NaN, ±inf) replaced by None, so any JSON column accepts it."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


def point_key(profile_name: str | None, sweep_point: Mapping[str, Any] | None) -> tuple[str | None, int]:
    """Which benchmark of a run a result is: its profile's name and its sweep point's index (0
    without a sweep)."""
    return profile_name, int((sweep_point or {}).get("index", 0))


class RunStore:
    """The database side of run ``run_id``.

    A write the database cannot take (:func:`perflab.runner.spool.unavailable`) never raises:
    it is kept in the run's spool file with every later write, in order (:mod:`perflab.runner.spool`),
    and :attr:`unavailable` says why, so the runner winds the run down at its next check. Reads then
    return the run as last read. :meth:`flush` stores the spool once the database takes writes again.
    """

    def __init__(self, engine: Engine, run_id: int, redactor: Redactor | None = None) -> None:
        self.engine = engine
        self.run_id = run_id
        self.redactor = redactor or Redactor()
        self.spooled: Path | None = None
        self.unavailable: str | None = None
        self._last: Run | None = None

    def _write(self, operation: str, **arguments: Any) -> Any:
        """One write (:data:`perflab.runner.spool.WRITES`) in a session, or — once the database was
        unavailable — kept in the spool (None)."""
        if self.spooled is None:
            try:
                with new_session(self.engine) as session:
                    return spool.apply(session, self.run_id, operation, arguments)
            except sa.exc.DBAPIError as exc:
                if not spool.unavailable(exc):
                    raise
                self._start_spooling(exc)
        if operation != "heartbeat":  # progress is of the moment: nothing to keep of it
            try:
                spool.append(self.run_id, operation, arguments)
            except spool.SpoolUnwritable as exc:
                self._spool_failed(exc)
        return None

    def _spool_failed(self, error: spool.SpoolUnwritable) -> None:
        """Neither the database nor the spool takes this run's writes: say so once; what is
        measured from here on is lost."""
        lost = f"the database could not be used and {error}: the run's writes since are lost"
        if self.unavailable != lost:
            self.unavailable = lost
            logger.error("run %s: %s", self.run_id, lost)

    def database_failed(self, error: BaseException) -> bool:
        """Whether ``error`` (raised by any database call of the run, a read included) says the
        database is unavailable; if so, every later write goes to the spool and :attr:`unavailable`
        says where."""
        if not (isinstance(error, sa.exc.DBAPIError) and spool.unavailable(error)):
            return False
        self._start_spooling(error)
        return True

    def _start_spooling(self, error: BaseException) -> None:
        if self.spooled is not None:
            return
        self.spooled = spool.spool_path(self.run_id)
        self.unavailable = (
            f"the database could not be used ({spool.first_line(error)}); the run's results are kept in "
            f"{self.spooled} and stored once it can be written again"
        )
        logger.warning("run %s: %s", self.run_id, self.unavailable)

    def load(self) -> Run:
        """The run as stored; while the database is unavailable, as last read."""
        try:
            with new_session(self.engine) as session:
                self._last = crud.require_run(session, run_id=self.run_id)
        except sa.exc.DBAPIError as exc:
            if self._last is None or not spool.unavailable(exc):
                raise
            self._start_spooling(exc)
        return self._last

    def set_status(self, status: str, **fields: Any) -> Run:
        return self._write("set_status", status=status, **self.redactor.data(fields)) or self.load()

    def update(self, **fields: Any) -> Run:
        return self._write("update", **self.redactor.data(fields)) or self.load()

    def heartbeat(self, progress: dict[str, Any] | None = None) -> None:
        self._write("heartbeat", progress=self.redactor.data(json_safe(progress)))

    def cancel_requested(self) -> bool:
        return self.load().cancel_requested

    def add_result(
        self,
        *,
        profile: Mapping[str, Any],
        result: Mapping[str, Any],
        text_block: str | None,
        bench_mode: str | None,
        sweep_point: Mapping[str, Any] | None = None,
    ) -> int | None:
        """The stored result's id (None while the database is unavailable: the result is spooled)."""
        stored = self._write(
            "add_result",
            profile=dict(profile),
            result=self.redactor.data(json_safe(dict(result))),
            text_block=self.redactor.optional(text_block),
            bench_mode=bench_mode,
            sweep_point=dict(sweep_point) if sweep_point is not None else None,
        )
        return None if stored is None else int(stored.id)

    def stored_points(self) -> set[tuple[str | None, int]]:
        """``(profile name, sweep point index)`` of every result stored for the run (its spooled ones
        included while the database is unavailable, which are stored in order once it is back)."""
        if self.spooled is not None:
            return set()
        with new_session(self.engine) as session:
            results = crud.list_profile_results(session, run_id=self.run_id)
        return {point_key(result.profile_name, result.sweep_point) for result in results}

    def add_samples(self, samples: Iterable[Mapping[str, Any]]) -> None:
        self._write("add_samples", samples=[json_safe(dict(sample)) for sample in samples])

    def gpu_holders(self, host_name: str, *, drain_s: float) -> tuple[dict[int, int], dict[int, int]]:
        """What this database's other runs do with the host's GPUs, read in one session: ``(locked,
        recent)``, each GPU index → run id: the locks held now, and the GPUs of runs in flight or
        ended in the last ``drain_s`` seconds."""
        since = utcnow() - timedelta(seconds=drain_s)
        with new_session(self.engine) as session:
            locked = {
                lock.gpu_index: lock.run_id
                for lock in crud.gpu_locks(session, host_name=host_name)
                if lock.run_id != self.run_id
            }
            recent = crud.recent_gpu_users(
                session, host_name=host_name, since=since, exclude_run_id=self.run_id
            )
        return locked, recent

    def ports_of_other_runs(self, host_names: Collection[str]) -> set[int]:
        """The ports other unfinished runs on these hosts (one machine) recorded (bound or about to be):
        each engine's, and the side channel, bootstrap or metrics port of a disaggregated process."""
        with new_session(self.engine) as session:
            runs = crud.in_flight_runs(session)
        return {
            port
            for run in runs
            if run.id != self.run_id and run.host_name in host_names
            for entry in (run.remote_state or {}).get("processes", [])
            for port in (entry["port"], entry.get("side_port"))
            if port is not None
        }

    def acquire_gpus(self, *, host_name: str, gpu_ids: Sequence[int], worker_id: str) -> bool:
        with new_session(self.engine) as session:
            return crud.acquire_gpus(
                session, host_name=host_name, gpu_ids=gpu_ids, run_id=self.run_id, worker_id=worker_id
            )

    def ended_run_keys(self, host_name: str, run_keys: Iterable[str]) -> set[str]:
        """Which of ``run_keys`` (found on the host) are the keys this database's runs on the host
        recorded and whose runs are no longer in flight. A key that no run here recorded belongs to
        someone else, e.g. another perflab sharing the host's workdir, and is never returned."""
        found = set(run_keys)
        run_ids = {int(match.group(1)) for key in found if (match := _RUN_KEY.match(key))}
        with new_session(self.engine) as session:
            runs = crud.get_runs(session, run_ids=sorted(run_ids))
        return {
            str(run.remote_state["run_key"])
            for run in runs
            if run.host_name == host_name
            and run.status not in IN_FLIGHT_RUN_STATUSES
            and (run.remote_state or {}).get("run_key") in found
        }

    def release_gpus(self) -> None:
        self._write("release_gpus")

    def flush(self) -> bool:
        """Store what was spooled, if the database takes writes again; True when nothing is left."""
        if self.spooled is None:
            return True
        if spool.replay(self.engine, self.run_id):
            self.spooled = self.unavailable = None
            return True
        return False
