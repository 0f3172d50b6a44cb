"""Repeating what is safe to repeat when a host's connection blips.

Reads (a process's state, a log, a result file) and idempotent actions (stopping a run's processes)
are retried after a dropped connection, an unreachable host or a timeout, waiting a little longer
each time while the SSH pool reconnects. Commands that change something are never repeated: their
first outcome is unknown.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from perflab.transport.errors import CommandTimeout, ConnectionLost, HostUnreachable

TRANSIENT_ERRORS = (ConnectionLost, HostUnreachable, CommandTimeout)
RETRY_DELAYS_S = (1.0, 3.0)

T = TypeVar("T")


def retrying(
    call: Callable[[], T],
    delays_s: Sequence[float] = RETRY_DELAYS_S,
    transient: tuple[type[Exception], ...] = TRANSIENT_ERRORS,
) -> T:
    """``call()``, called again after each of ``delays_s`` while it fails with one of ``transient``."""
    for delay in delays_s:
        try:
            return call()
        except transient:
            time.sleep(delay)
    return call()
