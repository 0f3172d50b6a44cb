"""Clients' timelines on a simulated engine: when, in simulated time, each request of a benchmark was sent.

A client that benchmarks a model-mode simulator (perflab's bench) says on each request where it sits
in its own schedule, in the header ``x-perflab-sim-clock: run=R;item=K;turn=J;due=S;next=N;limit=C;then=D``:

- ``run``: the client's timeline, ``BENCH/PHASE`` (the phases of one benchmark share ``BENCH``);
- ``item``: the request's place among the run's items sent to this server (0, 1, …): a request, or the
  first turn of a session; ``turn``: 0 for that first request, ``J`` for the session's ``J``-th
  follow-up turn;
- ``due``, ``next``, ``limit`` (turn 0): seconds on the run's timeline at which the client means to send
  the item, when its next item is due (``inf`` after the last), and how many items it keeps in flight
  at this server at most (0: no limit; an item waits for a free slot, first come first served);
- ``then``: present when a follow-up turn of the item follows this request, that many seconds after
  its last token (a session's think time).

From these alone the simulator knows each request's send time on its simulated clock, whatever the wall
clock says: item ``K`` is sent at ``max(due, the send of item K−1, the (K−limit+1)-th end of an item)``,
where an item ends when a request of it without ``then`` ends or any request of it fails, and a
follow-up ``then`` after its predecessor's last token. It also knows up to when every request is known
(:meth:`Timelines.horizon`), which is what the clock's gate asks: no event runs past a time at which a
request not yet received could arrive, so a client (or a machine) that is slow to send does not change
what is simulated, only when it is done.

A timeline's 0 is the clock's present (the wall time while the clock keeps up) when its first request
arrives; the next phase of the same benchmark starts where the previous one ended, so the wall time
between a warm-up and the measured phase leaves no idle gap in simulated time. A timeline stops holding
the clock once one of its requests is abandoned (the client cut it off: it is stopping) or after
:data:`HOLD_S` seconds of wall time in which the clock waited for it and it sent nothing; a request that
arrives after the clock passed its send time starts when it came, and says how late it was.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import math
import re
from typing import Callable, Dict, List, Optional

from perflab.sim.clock import STEP, SimClock

HEADER = "x-perflab-sim-clock"
HOLD_S = 10.0
# Timelines that stopped holding the clock, kept so that their stragglers keep their timeline's 0.
RETIRED_KEPT = 64
MAX_ACTIVE = 256
MAX_INDEX = 10**9
MAX_SECONDS = 1e9
MAX_LIMIT = 10**6
_RUN_RE = re.compile(r"[A-Za-z0-9._-]{1,32}/[A-Za-z0-9._-]{1,32}")


class ClockMark:
    """One request's place in its client's schedule (the parsed header)."""

    __slots__ = ("run", "item", "turn", "due", "next_due", "limit", "then")

    def __init__(
        self,
        run: str,
        item: int,
        turn: int = 0,
        due: float = 0.0,
        next_due: float = math.inf,
        limit: int = 0,
        then: Optional[float] = None,
    ) -> None:
        self.run = run
        self.item = item
        self.turn = turn
        self.due = due
        self.next_due = next_due
        self.limit = limit
        self.then = then

    @property
    def bench(self) -> str:
        return self.run.split("/", 1)[0]


def _integer(fields: Dict[str, str], name: str, bound: int, default: Optional[int] = None) -> int:
    text = fields.get(name)
    if text is None:
        if default is None:
            raise ValueError(f"{HEADER}: {name}= is missing")
        return default
    if not text.isdigit() or int(text) > bound:
        raise ValueError(f"{HEADER}: {name} must be an integer 0..{bound}, got {text[:20]!r}")
    return int(text)


def _seconds(
    fields: Dict[str, str], name: str, default: Optional[float], allow_inf: bool = False
) -> Optional[float]:
    text = fields.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0.0 <= value <= MAX_SECONDS or (allow_inf and value == math.inf)):
        raise ValueError(f"{HEADER}: {name} must be seconds 0..{MAX_SECONDS:g}, got {text[:20]!r}")
    return value


def parse_mark(text: str) -> ClockMark:
    """The mark of a header value; ValueError with a one-line reason."""
    if len(text) > 256:
        raise ValueError(f"{HEADER}: longer than 256 characters")
    fields: Dict[str, str] = {}
    for part in text.split(";"):
        name, sep, value = part.strip().partition("=")
        if not sep or name in fields:
            raise ValueError(f"{HEADER}: expected name=value pairs separated by ';', got {part[:40]!r}")
        fields[name] = value
    unknown = set(fields) - {"run", "item", "turn", "due", "next", "limit", "then"}
    if unknown:
        raise ValueError(f"{HEADER}: unknown field {sorted(unknown)[0]!r}")
    run = fields.get("run", "")
    if not _RUN_RE.fullmatch(run):
        raise ValueError(f"{HEADER}: run must be BENCH/PHASE of [A-Za-z0-9._-], got {run[:40]!r}")
    return ClockMark(
        run,
        _integer(fields, "item", MAX_INDEX),
        _integer(fields, "turn", MAX_INDEX, 0),
        _seconds(fields, "due", 0.0) or 0.0,
        _seconds(fields, "next", math.inf, allow_inf=True) or 0.0,
        _integer(fields, "limit", MAX_LIMIT, 0),
        _seconds(fields, "then", None),
    )


class Ticket:
    """One request on a timeline: where it was placed (``arrival``, ``late``) and what became of it."""

    __slots__ = (
        "timeline",
        "item",
        "turn",
        "then",
        "arrive",
        "dropped",
        "placed",
        "ended",
        "arrival",
        "late",
    )

    def __init__(
        self,
        timeline: "Timeline",
        mark: ClockMark,
        arrive: Optional[Callable[["Ticket"], None]],
    ) -> None:
        self.timeline = timeline
        self.item = mark.item
        self.turn = mark.turn
        self.then = mark.then
        self.arrive = arrive
        self.dropped = arrive is None
        self.placed = False
        self.ended = False
        self.arrival = 0.0
        self.late = 0.0

    @property
    def origin(self) -> float:
        return self.timeline.origin


class Timeline:
    """One client run's schedule as far as this server has seen it."""

    def __init__(self, mark: ClockMark, origin: float, wall: float) -> None:
        self.run = mark.run
        self.bench = mark.bench
        self.origin = origin
        self.limit = mark.limit
        self.waiting: Dict[int, Ticket] = {}
        self.dues: Dict[int, float] = {}
        self.nexts: Dict[int, float] = {}
        self.placed = 0
        self.last_send = -math.inf
        self.last_item: Optional[int] = None
        self.ends: List[float] = []
        self.followups: Dict[int, float] = {}
        self.in_flight = 0
        self.expired = False
        self.touched = wall
        self.placing = False

    def bound(self) -> float:
        """No request of this run not yet received can arrive before this simulated time."""
        if self.expired:
            return math.inf
        bound = math.inf
        item = self.placed
        if self.last_item is None or item <= self.last_item:
            due = self.dues.get(item, self.nexts.get(item - 1, 0.0))
            bound = max(self.origin + due, self.last_send)
            if self.limit and item >= self.limit:
                index = item - self.limit
                bound = max(bound, self.ends[index]) if index < len(self.ends) else math.inf
        if self.followups:
            bound = min(bound, min(self.followups.values()))
        return bound

    @property
    def finished(self) -> bool:
        """Every item was sent and ended, no follow-up is expected."""
        return (
            self.last_item is not None
            and self.placed > self.last_item
            and not self.waiting
            and not self.followups
            and self.in_flight == 0
        )


class Timelines:
    """The timelines of one engine, and the gate they put on its clock."""

    def __init__(self, clock: SimClock, loop: asyncio.AbstractEventLoop, hold_s: float = HOLD_S) -> None:
        self._clock = clock
        self._loop = loop
        self._hold_s = hold_s
        self._active: Dict[str, Timeline] = {}
        self._retired: "collections.OrderedDict[str, Timeline]" = collections.OrderedDict()
        self._last_bench = ""
        self._horizon: Optional[float] = None
        self._check: Optional[asyncio.TimerHandle] = None
        clock.gate = self

    # -- the gate --------------------------------------------------------------------------------

    def horizon(self) -> float:
        """Every request that can arrive before this simulated time has been received."""
        if self._horizon is None:
            self._horizon = min((timeline.bound() for timeline in self._active.values()), default=math.inf)
        return self._horizon

    def allows(self, when: float, kind: int) -> bool:
        """A step end plans from the arrivals before it; an arrival or a batch start needs every
        arrival at its instant."""
        horizon = self.horizon()
        return when <= horizon if kind == STEP else when < horizon

    def blocked(self) -> None:
        """The clock waits for a client: stop waiting for one that sent nothing for ``hold_s``."""
        wall = self._loop.time()
        horizon = self.horizon()
        holding = [timeline for timeline in self._active.values() if timeline.bound() <= horizon]
        stale = [timeline for timeline in holding if wall - timeline.touched >= self._hold_s]
        for timeline in stale:
            self._retire(timeline, expired=True)
        if stale:
            self._clock.poke()
        elif holding and self._check is None:
            since = min(timeline.touched for timeline in holding)
            self._check = self._loop.call_at(since + self._hold_s, self._recheck)

    def _recheck(self) -> None:
        self._check = None
        self._clock.poke()

    # -- requests --------------------------------------------------------------------------------

    def receive(self, mark: ClockMark, arrive: Optional[Callable[[Ticket], None]]) -> Ticket:
        """Register a request; ``arrive(ticket)`` runs once its send time is known (``None``: the
        request was refused, it only takes its place). ValueError for an item sent twice."""
        timeline = self._timeline(mark)
        ticket = Ticket(timeline, mark, arrive)
        timeline.touched = self._loop.time()
        if mark.turn == 0:
            if mark.item < timeline.placed or mark.item in timeline.waiting:
                raise ValueError(f"{HEADER}: item {mark.item} of run {mark.run} was already sent")
            timeline.waiting[mark.item] = ticket
            timeline.dues[mark.item] = mark.due
            timeline.nexts[mark.item] = mark.next_due
            if mark.next_due == math.inf:
                timeline.last_item = mark.item
            self._place_items(timeline)
        else:
            send = timeline.followups.pop(mark.item, self._clock.now)
            self._place(timeline, ticket, send)
        self._changed(timeline)
        return ticket

    def finished(self, ticket: Ticket, now: float) -> None:
        """The request's last token went out at ``now``."""
        if ticket.ended:
            return
        timeline = ticket.timeline
        timeline.in_flight -= 1
        timeline.touched = self._loop.time()
        self._end(timeline, ticket, now, failed=False)
        self._changed(timeline)

    def abandoned(self, ticket: Ticket) -> None:
        """The client cut the request off: its item ends now, and the run stops holding the clock."""
        timeline = ticket.timeline
        if not ticket.placed:
            ticket.dropped = True
        elif not ticket.ended:
            timeline.in_flight -= 1
            self._end(timeline, ticket, self._clock.now, failed=True)
        if timeline.run in self._active:
            self._retire(timeline, expired=True)
        self._changed(timeline)

    @property
    def waiting(self) -> bool:
        """Requests were received whose send time is not known yet."""
        return any(timeline.waiting for timeline in (*self._active.values(), *self._retired.values()))

    # -- bookkeeping -----------------------------------------------------------------------------

    def _timeline(self, mark: ClockMark) -> Timeline:
        timeline = self._active.get(mark.run) or self._retired.get(mark.run)
        if timeline is not None:
            return timeline
        wall = self._loop.time()
        # The next phase of a benchmark starts where the last ended: no idle gap in simulated time.
        start = self._clock.now if mark.bench == self._last_bench else self._clock.wall_arrival()
        self._last_bench = mark.bench
        timeline = Timeline(mark, start - (mark.due if mark.turn == 0 else 0.0), wall)
        if len(self._active) >= MAX_ACTIVE:
            self._retire(min(self._active.values(), key=lambda old: old.touched), expired=True)
        self._active[mark.run] = timeline
        return timeline

    def _place_items(self, timeline: Timeline) -> None:
        """Place the received items whose send time is known, in order."""
        if timeline.placing:
            return  # an item ended while placing: the loop below sees its end
        timeline.placing = True
        try:
            while timeline.placed in timeline.waiting:
                item = timeline.placed
                send = max(timeline.origin + timeline.dues[item], timeline.last_send)
                if timeline.limit and item >= timeline.limit:
                    index = item - timeline.limit
                    if index >= len(timeline.ends):
                        return
                    send = max(send, timeline.ends[index])
                ticket = timeline.waiting.pop(item)
                del timeline.dues[item]
                timeline.nexts.pop(item - 1, None)
                timeline.placed += 1
                timeline.last_send = send
                self._place(timeline, ticket, send)
        finally:
            timeline.placing = False

    def _place(self, timeline: Timeline, ticket: Ticket, send: float) -> None:
        now = self._clock.now
        ticket.placed = True
        ticket.arrival = max(send, now)
        ticket.late = max(0.0, now - send)
        if ticket.dropped:
            self._end(timeline, ticket, ticket.arrival, failed=True)
            return
        timeline.in_flight += 1
        assert ticket.arrive is not None
        ticket.arrive(ticket)

    def _end(self, timeline: Timeline, ticket: Ticket, when: float, failed: bool) -> None:
        ticket.ended = True
        if ticket.then is not None and not failed:
            timeline.followups[ticket.item] = when + ticket.then
            return
        bisect.insort(timeline.ends, when)
        self._place_items(timeline)

    def _changed(self, timeline: Timeline) -> None:
        self._horizon = None
        if timeline.run in self._active and timeline.finished:
            self._retire(timeline, expired=False)
        self._clock.poke()

    def _retire(self, timeline: Timeline, expired: bool) -> None:
        self._active.pop(timeline.run, None)
        timeline.expired = timeline.expired or expired
        self._retired[timeline.run] = timeline
        self._retired.move_to_end(timeline.run)
        while len(self._retired) > RETIRED_KEPT:
            self._retired.popitem(last=False)
        self._horizon = None
