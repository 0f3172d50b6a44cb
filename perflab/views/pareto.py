"""The Pareto front of throughput against latency: the runs no other run beats on both.

A point is dominated when another has latency at most as high and throughput at least as high, and
is strictly better in one of them. Points without both values are never on the front.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def pareto_front(latencies: Sequence[float | None], throughputs: Sequence[float | None]) -> list[bool]:
    """For each point (lower latency and higher throughput are better), whether it is on the front."""
    if len(latencies) != len(throughputs):
        raise ValueError("latencies and throughputs must have the same length")
    points = [
        (latency, throughput)
        if latency is not None
        and throughput is not None
        and math.isfinite(latency)
        and math.isfinite(throughput)
        else None
        for latency, throughput in zip(latencies, throughputs, strict=True)
    ]
    return [
        point is not None and not any(_dominates(other, point) for other in points if other)
        for point in points
    ]


def _dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[0] and a[1] >= b[1] and (a[0] < b[0] or a[1] > b[1])
