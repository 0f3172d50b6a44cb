"""Absolute-deadline timing on the asyncio loop, to well under a millisecond.

asyncio rounds selector timeouts up to whole milliseconds, and for some values (9, 13, 18, 26 ms,
…) the float ``n * 1e-3`` it passes to ``epoll`` is rounded up once more, so a callback set with
``call_at`` runs up to two milliseconds late. :class:`PreciseTimer` wakes :data:`COARSE_MARGIN_S`
early through the loop and sleeps the rest of the way (a real sleep, no busy wait). A sleep
overshoots by the kernel's timer slack (~50 µs), so deadlines closer together than that would each
pay it and fall behind: schedulers therefore treat everything due within :data:`GROUP_S` of now as
due, emitting such tokens together up to ``GROUP_S`` early instead of increasingly late. Schedulers
keep absolute deadlines (``previous + interval``), so lateness never accumulates into drift.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable, Optional, Protocol

COARSE_MARGIN_S = 0.0022
GROUP_S = 0.0001


class PreciseTimer:
    """One re-armable timer calling ``callback()`` at an absolute loop time."""

    def __init__(self, loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
        self._loop = loop
        self._callback = callback
        self._handle: Optional[asyncio.TimerHandle] = None
        self.deadline: Optional[float] = None

    def arm(self, deadline: float) -> None:
        """Fire at ``deadline`` (replacing any earlier arming)."""
        if self._handle is not None:
            self._handle.cancel()
        self.deadline = deadline
        self._handle = self._loop.call_at(deadline - COARSE_MARGIN_S, self._fire)

    def arm_earlier(self, deadline: float) -> None:
        """Fire at ``deadline`` unless the timer is already set to fire sooner."""
        if self.deadline is None or deadline < self.deadline:
            self.arm(deadline)

    def _fire(self) -> None:
        deadline = self.deadline
        self._handle = None
        self.deadline = None
        if deadline is None:
            return
        remaining = deadline - GROUP_S - self._loop.time()
        if remaining > 0:
            time.sleep(remaining)
        self._callback()


class Timer(Protocol):
    """What schedulers need from a timer."""

    def arm(self, deadline: float) -> None: ...

    def arm_earlier(self, deadline: float) -> None: ...


TimerFactory = Callable[[asyncio.AbstractEventLoop, Callable[[], None]], Timer]
