"""Timing a simulated engine by its own clock: the marks the bench sends and the times it reads back.

A real engine is timed by when its tokens reach the client (``channel``, ``clock``). A model-mode
simulator on a loaded machine runs late, and so does the client: wall-clock figures would measure the
machine. So every request of a phase carries the header ``x-perflab-sim-clock`` saying where it sits
in the client's schedule (:class:`ClockMarks`; the format is ``perflab.sim.timelines``'s), from which
the simulator knows its simulated send time — the scheduled time of an open-loop request, the end of
the request that freed its ``--max-concurrency`` slot for a closed-loop one, its predecessor's end
plus the think time for a session's turn — and it answers with every output chunk's simulated time
(``perflab_sim_t``) and the request's send time (``perflab_sim_arrival``) on the phase's timeline,
which starts at 0 with the phase's schedule. Real engines ignore the header and send no such fields.

When every successful response of the measured phase carried them (:func:`clock_timing`), the bench
computes every figure from them (``timing_source`` ``simulated``); otherwise from the wall clock, as
for a real engine. The simulators of several ``--base-url`` keep separate clocks, so each has its own
item numbering and its share of the concurrency limit (``ceil`` of an even split, at least 1): the
wall-clock client's one semaphore becomes one per server. ``--wall-clock`` sends no marks.
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple

from perflab.bench.client import Outcome

HEADER = "x-perflab-sim-clock"
SOURCE_SIMULATED = "simulated"


def _seconds(value: float) -> str:
    return repr(float(value))


def limit_shares(limit: Optional[int], servers: Sequence[str]) -> Dict[str, int]:
    """Each server's share of a concurrency limit over round-robin ``servers`` (0: no limit)."""
    shares: Dict[str, int] = {}
    count = len(servers)
    for slot, server in enumerate(servers):
        share = max(1, -(-(limit - slot) // count)) if limit else 0
        shares[server] = shares.get(server, 0) + share
    return shares


class ClockMarks:
    """The header value of each request of one phase: its items (requests, or sessions) go to
    ``targets`` (one server each) and are due at ``schedule`` (seconds from the phase's start)."""

    def __init__(
        self,
        run: str,
        targets: Sequence[str],
        schedule: Sequence[float],
        limit: Optional[int],
        servers: Sequence[str],
    ) -> None:
        self._run = run
        shares = limit_shares(limit, servers)
        self._ordinal: List[int] = []
        self._next: List[float] = [math.inf] * len(targets)
        self._limit: List[int] = []
        last: Dict[str, int] = {}
        for index, (server, due) in enumerate(zip(targets, schedule)):
            previous = last.get(server)
            if previous is not None:
                self._next[previous] = due
            self._ordinal.append(0 if previous is None else self._ordinal[previous] + 1)
            self._limit.append(shares.get(server, 0))
            last[server] = index
        self._due = list(schedule)

    def first(self, index: int, then: Optional[float] = None) -> str:
        """The mark of item ``index``'s own request; ``then``: the think time before its next turn."""
        mark = (
            f"run={self._run};item={self._ordinal[index]};turn=0;due={_seconds(self._due[index])};"
            f"next={_seconds(self._next[index])};limit={self._limit[index]}"
        )
        return mark if then is None else f"{mark};then={_seconds(then)}"

    def turn(self, index: int, turn: int, then: Optional[float] = None) -> str:
        """The mark of turn ``turn`` (≥ 1) of session ``index``."""
        mark = f"run={self._run};item={self._ordinal[index]};turn={turn}"
        return mark if then is None else f"{mark};then={_seconds(then)}"


def carries_clock(outcome: Outcome) -> bool:
    """Whether a response said when it was sent and when each of its output chunks was made."""
    return outcome.sim_arrival is not None and len(outcome.sim_times) == len(outcome.chunk_times)


def clock_timing(outcomes: Sequence[Outcome]) -> Tuple[bool, List[str]]:
    """Whether the run is timed by the simulator's clock (every successful response carried it), and
    the notes that go with the choice."""
    successes = [outcome for outcome in outcomes if outcome.success]
    carried = sum(1 for outcome in successes if carries_clock(outcome))
    if not carried:
        return False, []
    if carried < len(successes):
        return False, [
            f"{carried} of {len(successes)} successful responses carried the simulator's clock, the others "
            "did not: every request is timed by the wall clock"
        ]
    late = sum(1 for outcome in outcomes if outcome.sim_late)
    if not late:
        return True, []
    return True, [
        f"{late} requests reached the simulator after their simulated send time had passed (the client "
        "fell further behind than the simulator waits for): they started when they arrived"
    ]
