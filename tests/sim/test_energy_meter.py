"""A simulated replica's energy counter: the power model (idle + (busy − idle)·√u, u the busy share of the
last second) integrated over simulated time, checked against a brute-force sum on a fine grid, read in
any pieces, and depending only on the busy spans."""

from __future__ import annotations

import random

import numpy as np
import pytest

from perflab.sim import power
from perflab.sim.energy import EnergyMeter

H100 = power.profile("H100")
DEVICES = 2


def _spans(seed: int, until: float) -> list[tuple[float, float]]:
    """Steps of 5–60 ms, back to back in bursts, with idle gaps of up to 1.5 s between bursts."""
    rng = random.Random(seed)
    spans, now = [], 0.3
    while now < until:
        for _ in range(rng.randint(1, 80)):
            step = rng.uniform(0.005, 0.06)
            spans.append((now, now + step))
            now += step
        now += rng.choice([0.0, rng.uniform(0.001, 1.5)])
    return spans


def _brute_force(spans: list[tuple[float, float]], until: float, grid_s: float = 1e-4) -> float:
    """The same integral on a fine grid: the busy share of the last second at each midpoint."""
    edges = np.arange(0.0, until + grid_s / 2, grid_s)
    busy = np.zeros_like(edges)
    for start, end in spans:
        busy += np.clip(edges - start, 0.0, end - start)
    middle = (edges[:-1] + edges[1:]) / 2
    cumulative = np.interp(middle, edges, busy)
    before = np.interp(middle - 1.0, edges, busy, left=0.0)
    share = np.clip(cumulative - before, 0.0, 1.0)
    watts = H100.idle_w + (H100.busy_w - H100.idle_w) * np.sqrt(share)
    return float(np.sum(watts) * grid_s * DEVICES)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_counter_is_the_power_models_integral_over_simulated_time(seed: int) -> None:
    until = 12.0
    spans = [span for span in _spans(seed, until) if span[1] <= until]
    meter = EnergyMeter(H100, DEVICES)
    for start, end in spans:
        meter.busy(start, end)
    assert meter.joules(until) == pytest.approx(_brute_force(spans, until), rel=2e-4)


def test_read_in_pieces_it_counts_the_same_and_never_goes_back() -> None:
    spans = [span for span in _spans(4, 10.0) if span[1] <= 10.0]
    whole = EnergyMeter(H100, DEVICES)
    pieces = EnergyMeter(H100, DEVICES)
    readings = []
    for start, end in spans:
        whole.busy(start, end)
        readings.append(pieces.joules(start))
        pieces.busy(start, end)
        readings.append(pieces.joules((start + end) / 2))
    assert readings == sorted(readings)
    assert pieces.joules(10.0) == pytest.approx(whole.joules(10.0), rel=1e-12)


def test_idle_and_fully_busy_devices_draw_their_profiles_power() -> None:
    idle = EnergyMeter(H100, DEVICES)
    assert idle.joules(5.0) == pytest.approx(H100.idle_w * DEVICES * 5.0)
    busy = EnergyMeter(H100, DEVICES)
    busy.busy(0.0, 10.0)
    # the first second ramps up (u = t: mean √t = 2/3), then every second is fully busy
    ramp = H100.idle_w + (H100.busy_w - H100.idle_w) * 2.0 / 3.0
    assert busy.joules(10.0) == pytest.approx(DEVICES * (ramp + 9.0 * H100.busy_w))
    assert busy.utilization(10.0) == pytest.approx(1.0)
    assert busy.utilization(10.5) == pytest.approx(0.5)
    assert busy.utilization(11.0) == pytest.approx(0.0)


def test_the_busy_share_is_over_one_second_of_the_engines_time() -> None:
    """At time scale 200 a second of the engine is 5 ms of the clock: a benchmark's energy does not reach
    back into the idle time before it, however long the wall time between two benchmarks made it; at
    time scale 1 the second before it counts."""
    window = (10.0, 10.3)

    def benchmark_energy(time_scale: float, previous_end: float) -> float:
        meter = EnergyMeter(H100, DEVICES, time_scale)
        meter.busy(previous_end - 0.2, previous_end)  # the benchmark before
        meter.busy(*window)
        before = meter.joules(window[0])
        return meter.joules(window[1]) - before

    assert benchmark_energy(200.0, 9.5) == pytest.approx(benchmark_energy(200.0, 8.0), rel=1e-12)
    # fully busy from the first 5 ms on (the ramp's mean √u is 2/3)
    ramp = 0.005 * (H100.idle_w + (H100.busy_w - H100.idle_w) * 2.0 / 3.0)
    assert benchmark_energy(200.0, 9.5) == pytest.approx(DEVICES * (ramp + 0.295 * H100.busy_w))
    assert benchmark_energy(1.0, 9.5) != pytest.approx(benchmark_energy(1.0, 8.0), rel=1e-3)
