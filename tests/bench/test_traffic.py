"""The precomputed request schedule: infinite, constant, Poisson, gamma and linear ramp-up."""

from __future__ import annotations

import math
import statistics
from itertools import pairwise

import pytest

from perflab.bench.errors import BenchError
from perflab.bench.traffic import build_schedule, ramped_time


def gaps(times):
    return [later - earlier for earlier, later in pairwise(times)]


def test_infinite_rate_sends_everything_at_once():
    assert build_schedule(5, math.inf) == [0.0] * 5


def test_constant_rate_has_equal_gaps():
    assert build_schedule(4, 8.0, burstiness=math.inf) == pytest.approx([0.0, 0.125, 0.25, 0.375])


def test_poisson_gaps_have_the_rate_as_mean_and_sd():
    intervals = gaps(build_schedule(20001, 50.0, burstiness=1.0, seed=1))
    assert statistics.mean(intervals) == pytest.approx(0.02, rel=0.03)
    assert statistics.pstdev(intervals) == pytest.approx(0.02, rel=0.05)  # exponential: sd == mean


@pytest.mark.parametrize("burstiness", [0.25, 4.0])
def test_gamma_burstiness_keeps_the_mean_and_scales_the_spread(burstiness):
    intervals = gaps(build_schedule(20001, 10.0, burstiness=burstiness, seed=2))
    assert statistics.mean(intervals) == pytest.approx(0.1, rel=0.05)
    # gamma(shape k, scale 1/(rate·k)): coefficient of variation 1/sqrt(k)
    assert statistics.pstdev(intervals) / statistics.mean(intervals) == pytest.approx(
        1 / math.sqrt(burstiness), rel=0.08
    )


def test_schedule_is_reproducible_by_seed():
    assert (
        build_schedule(50, 5.0, seed=3) == build_schedule(50, 5.0, seed=3) != build_schedule(50, 5.0, seed=4)
    )
    assert build_schedule(1, 5.0) == [0.0]


def test_linear_ramp_up_grows_the_rate_from_zero():
    rate, ramp = 10.0, 4.0
    times = build_schedule(101, rate, burstiness=math.inf, ramp_up_s=ramp)
    # during the ramp k arrivals take Λ(t) = rate·t²/(2·ramp) = k, so request 20 is due at sqrt(2·4·20/10)
    assert times[20] == pytest.approx(math.sqrt(2 * ramp * 20 / rate))
    assert times[20] == pytest.approx(ramped_time(20.0, rate, ramp))
    # after the ramp (Λ(4) = 20 arrivals) requests come at the full rate
    assert gaps(times[21:]) == pytest.approx([1 / rate] * 79)
    assert times[100] == pytest.approx(ramp + 80 / rate)
    early, late = gaps(times[1:6]), gaps(times[15:20])
    assert min(early) > max(late)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"rate": 0.0}, "--request-rate must be positive"),
        ({"rate": 5.0, "burstiness": 0.0}, "--burstiness must be positive"),
        ({"rate": math.inf, "ramp_up_s": 3.0}, "needs a finite --request-rate"),
        ({"rate": 5.0, "ramp_up_s": -1.0}, "must not be negative"),
    ],
)
def test_bad_traffic_settings(kwargs, message):
    with pytest.raises(BenchError, match=message):
        build_schedule(3, **kwargs)
