"""How many requests of an offline simulation ran at once."""

from __future__ import annotations

from perflab.sim.offline import RequestTiming


def peak_running(timings: list[RequestTiming]) -> int:
    """The most requests running together (scheduled, not finished) over a burst sent at time 0."""
    edges = sorted([(t.queue, 1) for t in timings] + [(t.e2el, -1) for t in timings])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak
