"""A full disk under a host's workdir, found and named: the run ends ``disk_full`` with one line.

perflab writes into the host's workdir (``runs/<run key>/``: pid files, the engine's log, the
benchmark's result; a simulated host's tools), and the engine's log keeps growing there while the run
goes on. A full disk would otherwise surface as a traceback where the first write fails, or as a run
whose engine can no longer log. So the runner checks the free space of the workdir's filesystem
(``df -Pk``, POSIX output) when it reaches the host, and again at most every
:data:`CHECK_INTERVAL_S` while the run goes on (:class:`DiskWatch`); below :data:`MIN_FREE_BYTES` it
fails the run. An error that says "no space left" (``ENOSPC``, ``EDQUOT``, or their text in a host
command's output) is the same failure. A host without ``df`` is not checked.
"""

from __future__ import annotations

import errno
import time

from perflab.runner.errors import RunFailed
from perflab.transport.base import Transport
from perflab.transport.errors import TransportError

MIN_FREE_BYTES = 1024 * 1024
CHECK_INTERVAL_S = 5.0
DF_TIMEOUT_S = 30.0
# free PATH -> df -Pk of PATH, or of its nearest existing parent (a workdir not made yet).
FREE_SCRIPT = r"""
d=$1
while [ ! -e "$d" ] && [ "$d" != / ]; do d=$(dirname -- "$d"); done
df -Pk -- "$d"
"""
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_FULL_TEXTS = ("No space left on device", "Disk quota exceeded")


def free_bytes(transport: Transport, path: str) -> int | None:
    """Bytes free for perflab's user on the filesystem of ``path`` on the host; None when ``df`` could
    not tell."""
    result = transport.run(["sh", "-c", FREE_SCRIPT, "perflab-free", path], timeout=DF_TIMEOUT_S)
    lines = result.stdout.strip().splitlines() if result.ok else []
    fields = lines[-1].split() if len(lines) >= 2 else []
    if len(fields) < 4 or not fields[3].isdigit() or len(fields[3]) > 18:
        return None
    return int(fields[3]) * 1024


def is_disk_full(error: BaseException) -> bool:
    """Whether ``error`` says a disk is full (or its quota used up)."""
    if isinstance(error, OSError) and error.errno in _FULL_ERRNOS:
        return True
    return any(text in str(error) for text in _FULL_TEXTS)


def disk_full(host_name: str, workdir: str, detail: str) -> RunFailed:
    """The ``disk_full`` failure of a run on ``host_name`` (one line)."""
    return RunFailed(
        "disk_full",
        f"host '{host_name}': the disk holding its workdir {workdir} is full ({detail}); "
        "free space there and run again",
    )


class DiskWatch:
    """The free space under one host's workdir, checked at most every ``interval_s``."""

    def __init__(self, transport: Transport, *, interval_s: float = CHECK_INTERVAL_S) -> None:
        self.transport = transport
        self.interval_s = interval_s
        self._checked_at: float | None = None

    def check(self) -> None:
        """Raise ``disk_full`` when less than :data:`MIN_FREE_BYTES` is free (looked at again only
        once ``interval_s`` has passed since the last look)."""
        now = time.monotonic()
        if self._checked_at is not None and now - self._checked_at < self.interval_s:
            return
        self._checked_at = now
        workdir = self.transport.workdir
        try:
            free = free_bytes(self.transport, workdir)
        except TransportError:  # the connection's own trouble is found where the run uses it
            return
        if free is not None and free < MIN_FREE_BYTES:
            raise disk_full(self.transport.host.name, workdir, f"{free // 1024} KiB free")
