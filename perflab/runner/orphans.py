"""perflab's own processes that runs which already ended left on a host, found and stopped before a
placement so the GPUs they hold come back.

A run whose connection dropped for longer than the runner's reconnect attempts ends
``connection_lost`` without having stopped its engine; the engine keeps its GPU. Every process perflab
starts carries its run's marker (:mod:`perflab.remote.process`), so before every placement the
processes of this database's runs that have ended are stopped. Processes of runs still in flight are
never touched, nor are processes whose run key no run of this database recorded (another perflab
sharing the host's workdir) or processes perflab did not start (they carry no marker): a GPU they use
stays refused.
"""

from __future__ import annotations

from collections.abc import Callable

from perflab.remote import process as rp
from perflab.transport.base import Transport


def stop_orphans(
    transport: Transport, ended_run_keys: Callable[[set[str]], set[str]], *, grace_s: float
) -> dict[str, str]:
    """Stop the live processes of this database's runs that have ended; ``{"<run-key>/<name>": outcome}``.

    ``ended_run_keys`` is asked after the host was scanned, about the keys the scan found: a run
    records its key before it starts a process, so a process found whose run is in flight is always
    kept, and so is one whose key no run of this database recorded (another perflab's)."""
    leftovers = rp.find_leftovers(transport)
    if not leftovers:
        return {}
    ended = ended_run_keys({left.process.run_key for left in leftovers})
    orphans = [left for left in leftovers if left.process.run_key in ended]
    stopped = rp.cleanup_leftovers(transport, orphans, grace_s)
    return {
        name: result.outcome if result.clean else f"left: {' '.join(map(str, result.left))}"
        for name, result in stopped.items()
    }
