"""Following each replica's engine log on the host, and the failure it shows.

A :class:`LogFollower` reads the log from the byte offset it reached last time and keeps the latest
lines, enough for the adapter's classifier to find the root cause of a failed start. :func:`failure_of`
turns a dead or failing replica into the :class:`RunFailed` the run ends with; :func:`classify_log`
reads a container runtime's failure (an engine run from an image) before the engine's own.
"""

from __future__ import annotations

from collections import deque

from perflab.containers.failures import classify_container_failure
from perflab.engines import EngineAdapter, FailureInfo
from perflab.remote import process as rp
from perflab.runner.errors import RunFailed
from perflab.transport.base import Transport

KEPT_LINES = 4000


class LogFollower:
    """The log of one detached process, read incrementally."""

    def __init__(self, transport: Transport, process: rp.RemoteProcess) -> None:
        self.transport = transport
        self.process = process
        self._offset = 0
        self._lines: deque[str] = deque(maxlen=KEPT_LINES)

    def poll(self) -> list[str]:
        """The complete lines written since the last call."""
        chunk = rp.read_log(self.transport, self.process, self._offset)
        self._offset = chunk.next_offset
        lines = chunk.text.splitlines()
        self._lines.extend(lines)
        return lines

    @property
    def text(self) -> str:
        return "\n".join(self._lines)


def classify_log(adapter: EngineAdapter, log_text: str) -> FailureInfo | None:
    """A container runtime's failure in the log (e.g. no GPU runtime), else the engine's own."""
    found = classify_container_failure(log_text, subject=adapter.display_name)
    return found if found is not None else adapter.classify_failure(log_text)


def failure_of(adapter: EngineAdapter, name: str, log_text: str, exit_status: int | None) -> RunFailed:
    """The failure of a replica that exited (``exit_status``) or logged a fatal error."""
    info = classify_log(adapter, log_text)
    if info is not None:
        return RunFailed(info.failure_class, info.message)
    how = f"with status {exit_status}" if exit_status is not None else "without an exit status"
    lines = [line for line in log_text.splitlines() if line.strip()]
    last = f": {lines[-1].strip()}" if lines else " (its log is empty)"
    return RunFailed("crash", f"{adapter.display_name}: {name} exited {how}{last}")
