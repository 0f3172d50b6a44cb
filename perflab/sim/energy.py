"""The energy a simulated engine replica's devices draw, counted on the engine's own simulated clock.

A device's power follows its busy share over the last second of the engine's time
(:mod:`perflab.sim.power`): P = idle + (busy − idle)·√u, where u(t) is the share of ``[t − w, t]`` the
replica spent in steps, w being one second of the engine's time on the clock (``1 / time_scale``: a host
at ``time_scale`` 200 runs 200 engine seconds in one of its own). The meter integrates that power over
simulated time, exactly: the replica's steps are busy spans on the clock, so u is piecewise linear
between the span edges and those edges w later, and √u has a closed-form integral on each piece.
(A window of one second of the clock would reach, at a high time scale, far back into the idle time
before a benchmark, whose length is the wall time between two benchmarks: the load's.) The counter is
therefore a function of the simulated timeline alone: a loaded
machine, whose clock falls behind the wall and catches up, draws the same joules over the same
simulated window as a quiet one. It is what a simulated host reports as its NVML-style energy counter
(``perflab_sim_energy_mj``: :mod:`perflab.sim.streaming`).
"""

from __future__ import annotations

import bisect
import math
from typing import List

from perflab.sim.power import PowerProfile

# The span of the clock ``utilization`` is a share of: what a sampler reading once a second sees.
UTILIZATION_S = 1.0


class EnergyMeter:
    """Busy spans of one replica on its simulated clock, and the joules its ``devices`` drew since 0."""

    def __init__(self, profile: PowerProfile, devices: int, time_scale: float = 1.0) -> None:
        self._window_s = 1.0 / time_scale
        self._idle_w = profile.idle_w * devices
        self._dynamic_w = (profile.busy_w - profile.idle_w) * devices
        # Busy spans in time order, merged where one starts as the last ends; ``_before[i]``: busy seconds
        # before span i; ``_dropped``: busy seconds of the spans dropped (all over before the window).
        self._starts: List[float] = []
        self._ends: List[float] = []
        self._before: List[float] = []
        self._dropped = 0.0
        self._at = 0.0
        self._joules = 0.0

    def busy(self, start: float, end: float) -> None:
        """The replica is busy from ``start`` (the clock's present, never before an earlier call's) to
        ``end``."""
        if self._ends and start <= self._ends[-1]:  # back to back: the last span goes on
            self._ends[-1] = max(self._ends[-1], end)
            return
        self._advance(start)
        before = self._before[-1] + self._ends[-1] - self._starts[-1] if self._starts else self._dropped
        self._starts.append(start)
        self._ends.append(end)
        self._before.append(before)

    def joules(self, when: float) -> float:
        """The energy drawn from simulated time 0 to ``when`` (not before an earlier call's)."""
        self._advance(when)
        return self._joules

    def utilization(self, when: float) -> float:
        """The busy share of the clock's second before ``when`` (0–1)."""
        return self._share(when, UTILIZATION_S)

    def _busy_until(self, when: float) -> float:
        index = bisect.bisect_right(self._starts, when) - 1
        if index < 0:
            return self._dropped
        return self._before[index] + min(when, self._ends[index]) - self._starts[index]

    def _share(self, when: float, window_s: float) -> float:
        return min(max((self._busy_until(when) - self._busy_until(when - window_s)) / window_s, 0.0), 1.0)

    def _advance(self, until: float) -> None:
        start = self._at
        if until <= start:
            return
        window = self._window_s
        # only spans that end within a window before ``start`` have an edge (or one a window on) after it
        reaching = bisect.bisect_left(self._ends, start - window)
        edges = {
            edge
            for span in zip(self._starts[reaching:], self._ends[reaching:])
            for edge in (span[0], span[1], span[0] + window, span[1] + window)
            if start < edge < until
        }
        points = [start, *sorted(edges), until]
        mean_root = 0.0
        for left, right in zip(points, points[1:]):
            mean_root += _mean_root(self._share(left, window), self._share(right, window)) * (right - left)
        self._joules += self._idle_w * (until - start) + self._dynamic_w * mean_root
        self._at = until
        self._drop_before(until - max(window, UTILIZATION_S))

    def _drop_before(self, when: float) -> None:
        """Forget the spans over before ``when`` (no share from now on reaches back to them)."""
        over = bisect.bisect_left(self._ends, when)
        if over:
            self._dropped = self._before[over - 1] + self._ends[over - 1] - self._starts[over - 1]
            del self._starts[:over], self._ends[:over], self._before[:over]


def _mean_root(first: float, last: float) -> float:
    """The mean of √u over a piece on which u runs linearly from ``first`` to ``last``."""
    if abs(last - first) < 1e-12:
        return math.sqrt((first + last) / 2.0)
    return 2.0 / 3.0 * (last**1.5 - first**1.5) / (last - first)
