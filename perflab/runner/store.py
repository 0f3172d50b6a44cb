"""Every database write of one run, each in its own short session (safe from any thread).

The runner's threads (the lifecycle, the metric sampler, progress callbacks) share one
:class:`RunStore`; each call opens a session, calls one :mod:`db.crud` function and closes it, so no
session ever crosses a thread. Everything written passes through the store's
:class:`~perflab.redact.Redactor` first: text from the host (log tails, failure messages, commands,
progress lines, benchmark errors) never brings a secret into the database.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Engine

from db import crud
from db.models import GpuLock, Run
from db.session import new_session
from perflab.redact import Redactor


def json_safe(value: Any) -> Any:
    """``value`` with non-finite floats (NaN, ±inf) replaced by None, so any JSON column accepts it."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


class RunStore:
    """The database side of run ``run_id``."""

    def __init__(self, engine: Engine, run_id: int, redactor: Redactor | None = None) -> None:
        self.engine = engine
        self.run_id = run_id
        self.redactor = redactor or Redactor()

    def load(self) -> Run:
        with new_session(self.engine) as session:
            return crud.require_run(session, run_id=self.run_id)

    def set_status(self, status: str, **fields: Any) -> Run:
        with new_session(self.engine) as session:
            return crud.set_run_status(
                session, run_id=self.run_id, status=status, **self.redactor.data(fields)
            )

    def update(self, **fields: Any) -> Run:
        with new_session(self.engine) as session:
            return crud.update_run(session, run_id=self.run_id, **self.redactor.data(fields))

    def heartbeat(self, progress: dict[str, Any] | None = None) -> None:
        with new_session(self.engine) as session:
            crud.heartbeat_run(session, run_id=self.run_id, progress=self.redactor.data(json_safe(progress)))

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
    ) -> int:
        with new_session(self.engine) as session:
            stored = crud.add_profile_result(
                session,
                run_id=self.run_id,
                profile=profile,
                result=self.redactor.data(json_safe(dict(result))),
                text_block=self.redactor.optional(text_block),
                bench_mode=bench_mode,
                sweep_point=sweep_point,
            )
            return int(stored.id)

    def add_samples(self, samples: Iterable[Mapping[str, Any]]) -> int:
        with new_session(self.engine) as session:
            return crud.add_samples(
                session, run_id=self.run_id, samples=[json_safe(dict(s)) for s in samples]
            )

    def gpu_locks(self, host_name: str) -> list[GpuLock]:
        with new_session(self.engine) as session:
            return crud.gpu_locks(session, host_name=host_name)

    def ports_of_other_runs(self, host_name: str) -> set[int]:
        """The engine ports other unfinished runs on the host recorded (bound or about to be)."""
        with new_session(self.engine) as session:
            runs = crud.in_flight_runs(session, host_name=host_name)
        return {
            entry["port"]
            for run in runs
            if run.id != self.run_id
            for entry in (run.remote_state or {}).get("processes", [])
        }

    def acquire_gpus(self, *, host_name: str, gpu_ids: Sequence[int], worker_id: str) -> bool:
        with new_session(self.engine) as session:
            return crud.acquire_gpus(
                session, host_name=host_name, gpu_ids=gpu_ids, run_id=self.run_id, worker_id=worker_id
            )

    def release_gpus(self) -> int:
        with new_session(self.engine) as session:
            return crud.release_gpus(session, run_id=self.run_id)
