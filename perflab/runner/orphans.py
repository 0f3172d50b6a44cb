"""perflab's own processes that runs which already ended left on a host, found and stopped before a
placement so the GPUs they hold come back.

A run whose connection dropped for longer than the runner's reconnect attempts ends
``connection_lost`` without having stopped its engine; the engine keeps its GPU. Every process perflab
starts carries its run's marker (:mod:`perflab.remote.process`), so when a placement finds devices in
use by processes perflab did not lock, the processes of runs no longer in flight are stopped first.
Processes of runs still in flight are never touched, nor are processes perflab did not start (they
carry no marker): a GPU they use stays refused.
"""

from __future__ import annotations

from collections.abc import Callable

from perflab.remote import process as rp
from perflab.transport.base import Transport


def stop_orphans(
    transport: Transport, in_flight_run_keys: Callable[[], set[str]], *, grace_s: float
) -> dict[str, str]:
    """Stop the live processes of runs not in flight; ``{"<run-key>/<name>": outcome}``.

    The run keys in flight are read after the host was scanned: a run records its key before it
    starts a process, so a process found by the scan whose run is in flight is always excluded."""
    leftovers = rp.find_leftovers(transport)
    if not leftovers:
        return {}
    active = in_flight_run_keys()
    orphans = [left for left in leftovers if left.process.run_key not in active]
    stopped = rp.cleanup_leftovers(transport, orphans, grace_s)
    return {
        name: result.outcome if result.clean else f"left: {' '.join(map(str, result.left))}"
        for name, result in stopped.items()
    }
