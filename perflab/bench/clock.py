"""User-space arrival times for socket reads: when the event loop's poll said the data was there.

Reads carry the kernel's receive time where it can be had (``rxstamp``); these stamps are the
fallback. Under load one loop iteration handles hundreds of readable sockets; stamping each read
with ``perf_counter()`` as it is processed would add the time spent on the reads before it. A loop
made by ``new_event_loop()`` records the instant its selector returned, and ``arrival_clock(loop)``
gives connections that instant as the arrival time of everything read in the iteration (source
``poll``). On any other loop the clock is ``time.perf_counter()`` at the read (source ``read``).
"""

from __future__ import annotations

import asyncio
import selectors
import time
import weakref
from typing import Callable, List, Optional, Tuple

_TIMED_SELECTORS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, PollTimedSelector]" = (
    weakref.WeakKeyDictionary()
)


class PollTimedSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """The platform's default selector, remembering when ``select`` last returned."""

    def __init__(self) -> None:
        super().__init__()
        self.polled_at = time.perf_counter()

    def select(self, timeout: Optional[float] = None) -> List[Tuple[selectors.SelectorKey, int]]:
        ready = super().select(timeout)
        self.polled_at = time.perf_counter()
        return ready

    def poll_time(self) -> float:
        return self.polled_at


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A selector event loop whose connections stamp reads with the poll time."""
    selector = PollTimedSelector()
    loop = asyncio.SelectorEventLoop(selector)
    _TIMED_SELECTORS[loop] = selector
    return loop


SOURCE_POLL = "poll"
SOURCE_READ = "read"


def arrival_clock(loop: asyncio.AbstractEventLoop) -> Tuple[Callable[[], float], str]:
    """The clock connections on ``loop`` should use for arrival times, and its source name."""
    selector = _TIMED_SELECTORS.get(loop)
    if selector is not None:
        return selector.poll_time, SOURCE_POLL
    return time.perf_counter, SOURCE_READ
