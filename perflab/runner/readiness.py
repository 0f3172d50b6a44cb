"""Waiting until every replica is ready, or knowing why one never will be.

A replica is ready when its log shows the engine's readiness line, or its health endpoint answers 200
and the replica's own process holds the port (another program that took the port meanwhile — its engine
then fails to bind — may answer the probe too). A container's engine runs under the container runtime,
not under the replica's process, so there the health answer alone counts.
It has failed when its process is gone (the log's classified failure, else ``crash``) or when, still
running, its log shows a root-cause failure signature (out of memory, unsupported hardware, …). Past
the deadline the run fails with ``timeout``. ``interrupt`` runs every poll and raises to stop waiting
(cancel, worker shutdown).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from perflab.engines import EngineAdapter, timeout_failure
from perflab.remote import process as rp
from perflab.runner.endpoints import Endpoints
from perflab.runner.errors import RunFailed
from perflab.runner.launch import Replica
from perflab.runner.logs import LogFollower, classify_log, failure_of
from perflab.transport.base import Transport


def _check_alive(transport: Transport, adapter: EngineAdapter, replica: Replica, log: LogFollower) -> None:
    state = rp.process_state(transport, replica.process)
    if not state.running:
        log.poll()
        raise failure_of(adapter, replica.name, log.text, state.exit_status)
    info = classify_log(adapter, log.text)
    if info is not None and info.failure_class != "crash":
        raise RunFailed(info.failure_class, info.message)


def _answers(transport: Transport, endpoints: Endpoints, replica: Replica) -> bool:
    """Whether the replica's health endpoint answers 200 from the replica's own engine."""
    if not endpoints.healthy(replica):
        return False
    return replica.in_container or rp.serves_port(transport, replica.process, replica.port)


def wait_until_ready(
    transport: Transport,
    adapter: EngineAdapter,
    replicas: Sequence[Replica],
    *,
    endpoints: Endpoints,
    logs: dict[str, LogFollower],
    deadline_s: float,
    poll_s: float,
    interrupt: Callable[[], None],
    on_progress: Callable[[int, str], None],
) -> None:
    """Return once every replica is ready; ``on_progress(ready count, latest log line)`` each poll."""
    started = time.monotonic()
    pending = list(replicas)
    latest = ""
    while True:
        interrupt()
        for replica in list(pending):
            log = logs[replica.name]
            lines = log.poll()
            if lines:
                latest = lines[-1]
            if any(adapter.is_ready_line(line) for line in lines) or _answers(transport, endpoints, replica):
                pending.remove(replica)
                continue
            _check_alive(transport, adapter, replica, log)
        on_progress(len(replicas) - len(pending), latest)
        if not pending:
            return
        if time.monotonic() - started > deadline_s:
            slowest = pending[0]
            info = timeout_failure(adapter.display_name, deadline_s, logs[slowest.name].text)
            raise RunFailed(info.failure_class, info.message)
        time.sleep(poll_s)
