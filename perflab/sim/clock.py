"""The simulated clock of a model-mode engine: events in simulated time, paced by the wall clock.

Every scheduler step end, request arrival and batch start is an event at a simulated time, and events
run in the order ``(time, kind, key)``: at one instant a step ends first (its tokens go out and the
scheduler plans the next step from the requests that arrived before), then requests arrive (in their
clients' order), then idle schedulers start the batch those arrivals make. A step that ends at ``t``
delivers its tokens at ``t`` whatever the wall time when the host's CPU got round to it, so what the
model says never depends on the machine's load.

Live (``SimClock(loop)``) the clock is paced by the event loop: an event runs once the loop's clock
reaches its time (a :class:`~perflab.sim.timing.PreciseTimer` wakes it), so a wall-clock client sees
each token when the model says as long as the machine keeps up; a slow machine makes the clock fall
behind the wall and catch up by running events back to back, with the same simulated times. An event
also waits until its :class:`Gate` allows it: until every request that could arrive before it is known
(:class:`~perflab.sim.timelines.Timelines`, from what the clients declared). Offline (``SimClock()``)
:meth:`run` runs every event at once, as fast as the CPU goes.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from typing import Callable, List, Optional, Protocol, Tuple

from perflab.sim.timing import GROUP_S, PreciseTimer, TimerFactory

# Event kinds, in their order at one instant.
STEP = 0
ARRIVAL = 1
KICK = 2
# Events run back to back before the loop gets a turn to read and write sockets.
PUMP_BATCH = 256
# Key of events that belong to no client timeline (offline requests put their index second).
NO_KEY: Tuple[str, int, int] = ("", 0, 0)


class Gate(Protocol):
    """Whether an event may run now, and what to do while none may."""

    def allows(self, when: float, kind: int) -> bool: ...

    def blocked(self) -> None: ...


class OpenGate:
    """Every event may run (offline, or no client declared a timeline)."""

    def allows(self, when: float, kind: int) -> bool:
        return True

    def blocked(self) -> None:
        """Never called: nothing is ever held."""


class Event:
    """One scheduled callback; ``cancel()`` keeps it from running."""

    __slots__ = ("callback", "cancelled")

    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class SchedulerClock(Protocol):
    """What a scheduler needs from its clock: the simulated time, a batch start at this instant, and
    a timer for its step ends (``timer(clock, callback)``)."""

    def time(self) -> float: ...

    def call_soon(self, callback: Callable[[], None]) -> object: ...


class StepTimer:
    """A scheduler's step-end timer: one ``STEP`` event, re-armed per step."""

    def __init__(self, clock: "SimClock", callback: Callable[[], None]) -> None:
        self._clock = clock
        self._callback = callback
        self._event: Optional[Event] = None
        self.deadline: Optional[float] = None

    def arm(self, deadline: float) -> None:
        if self._event is not None:
            self._event.cancel()
        self.deadline = deadline
        self._event = self._clock.at(deadline, STEP, NO_KEY, self._fire)

    def arm_earlier(self, deadline: float) -> None:
        if self.deadline is None or deadline < self.deadline:
            self.arm(deadline)

    def _fire(self) -> None:
        self._event = None
        self.deadline = None
        self._callback()


class SimClock:
    """The event queue and simulated time of one engine (all its data-parallel replicas)."""

    def __init__(
        self, loop: Optional[asyncio.AbstractEventLoop] = None, timer_factory: TimerFactory = PreciseTimer
    ) -> None:
        self._loop = loop
        # Simulated seconds count from the clock's creation (small numbers: their rounding stays far
        # below a nanosecond); live, simulated time t is loop time t + base.
        self._base = loop.time() if loop is not None else 0.0
        self.now = 0.0
        self._events: List[Tuple[float, int, Tuple[str, int, int], int, Event]] = []
        self._order = itertools.count()
        self._wake = timer_factory(loop, self.pump) if loop is not None else None
        self._pump_pending = False
        self._pumping = False
        self._turn_time: Optional[float] = None
        self.gate: Gate = OpenGate()

    @property
    def loop(self) -> Optional[asyncio.AbstractEventLoop]:
        """The event loop that paces the clock (None offline)."""
        return self._loop

    # -- what schedulers use ---------------------------------------------------------------------

    def time(self) -> float:
        """The simulated time of the event running now (of the latest one between events)."""
        return self.now

    def call_soon(self, callback: Callable[[], None]) -> Event:
        """``callback`` at this instant, after the arrivals of this instant (a batch start)."""
        return self.at(self.now, KICK, NO_KEY, callback)

    def timer(self, clock: "SimClock", callback: Callable[[], None]) -> StepTimer:
        """A step-end timer (the schedulers' ``timer_factory``)."""
        return StepTimer(clock, callback)

    # -- scheduling ------------------------------------------------------------------------------

    def at(self, when: float, kind: int, key: Tuple[str, int, int], callback: Callable[[], None]) -> Event:
        """Run ``callback`` at simulated time ``when`` (never before the present)."""
        event = Event(callback)
        heapq.heappush(self._events, (max(when, self.now), kind, key, next(self._order), event))
        if not self._pumping:
            self.poke()
        return event

    def run(self) -> None:
        """Offline: run every event, in order, until none is left."""
        events = self._events
        while events:
            when, _, _, _, event = heapq.heappop(events)
            if event.cancelled:
                continue
            self.now = max(self.now, when)
            event.callback()

    # -- live ------------------------------------------------------------------------------------

    def poke(self) -> None:
        """Look at the events again on the loop's next turn (something new may run)."""
        if self._loop is not None and not self._pump_pending:
            self._pump_pending = True
            self._loop.call_soon(self.pump)

    def pump(self) -> None:
        """Run every event that is due by the wall clock and allowed by the gate."""
        self._pump_pending = False
        self._pumping = True
        try:
            self._run_due()
        finally:
            self._pumping = False

    def _run_due(self) -> None:
        loop = self._loop
        assert loop is not None and self._wake is not None
        events = self._events
        budget = PUMP_BATCH
        while events:
            when, kind, _, _, event = events[0]
            if event.cancelled:
                heapq.heappop(events)
                continue
            if when + self._base > loop.time() + GROUP_S:
                self._wake.arm(when + self._base)
                return
            if not self.gate.allows(when, kind):
                self.gate.blocked()
                return
            heapq.heappop(events)
            self.now = max(self.now, when)
            event.callback()
            budget -= 1
            if budget == 0:
                self.poke()
                return

    def wall_arrival(self) -> float:
        """The simulated arrival of a request that declares no timeline and came in now: the wall
        time of this loop turn (one value for every request read in the same turn, so requests that
        came together start together), never before the present."""
        if self._turn_time is None:
            assert self._loop is not None
            self._turn_time = self._loop.time() - self._base
            self._loop.call_soon(self._end_turn)
        return max(self.now, self._turn_time)

    def _end_turn(self) -> None:
        self._turn_time = None

    def present(self) -> float:
        """The simulated "now" for observers (``/metrics``): the wall time while the clock keeps up,
        the latest event's time while it is behind or held."""
        if self._loop is None:
            return self.now
        wall = self._loop.time() - self._base
        behind = any(entry[0] <= wall and not entry[4].cancelled for entry in self._events[:1])
        return self.now if behind else max(self.now, wall)
