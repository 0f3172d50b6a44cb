"""The request schedule: when each request is due, precomputed before the run starts.

Inter-arrival gaps are drawn from a gamma distribution with shape ``burstiness`` and mean
``1/rate`` (``burstiness`` 1 is a Poisson process, larger values are more regular, smaller ones
burstier); an infinite burstiness gives constant traffic (equal gaps), as in ``vllm bench serve``,
and an infinite rate sends everything at once. With a
ramp-up of ``T`` seconds the instantaneous rate grows linearly from 0 to ``rate`` over ``T`` and
stays there: arrivals are drawn for a unit rate and mapped through the inverse of the cumulative
rate ``Λ(t) = rate·t²/(2T)`` (``t ≤ T``), ``rate·(t − T/2)`` after. The first request is due at 0.
Dispatching against these absolute offsets means lateness never accumulates.
"""

from __future__ import annotations

import math
import random
from typing import List

from perflab.bench.errors import BenchError


def unit_arrivals(count: int, burstiness: float, rng: random.Random) -> List[float]:
    """Arrival times of a unit-rate process, starting at 0."""
    constant = math.isinf(burstiness)
    arrivals = [0.0] * count
    for i in range(1, count):
        gap = 1.0 if constant else rng.gammavariate(burstiness, 1.0 / burstiness)
        arrivals[i] = arrivals[i - 1] + gap
    return arrivals


def ramped_time(unit_time: float, rate: float, ramp_up_s: float) -> float:
    """Inverse of the cumulative rate: when the ramped process reaches ``unit_time`` arrivals."""
    if ramp_up_s <= 0:
        return unit_time / rate
    ramp_arrivals = rate * ramp_up_s / 2.0
    if unit_time <= ramp_arrivals:
        return math.sqrt(2.0 * ramp_up_s * unit_time / rate)
    return ramp_up_s + (unit_time - ramp_arrivals) / rate


def build_schedule(
    count: int,
    rate: float,
    burstiness: float = 1.0,
    seed: int = 0,
    ramp_up_s: float = 0.0,
) -> List[float]:
    """Seconds after the start at which each of ``count`` requests is due."""
    if rate <= 0:
        raise BenchError("--request-rate must be positive (or inf)")
    if burstiness <= 0:
        raise BenchError("--burstiness must be positive")
    if ramp_up_s < 0:
        raise BenchError("--ramp-up-seconds must not be negative")
    if math.isinf(rate):
        if ramp_up_s:
            raise BenchError("--ramp-up-seconds needs a finite --request-rate")
        return [0.0] * count
    arrivals = unit_arrivals(count, burstiness, random.Random(seed))
    return [ramped_time(unit, rate, ramp_up_s) for unit in arrivals]
