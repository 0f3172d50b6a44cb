"""Energy over a benchmark window from sampled rows: counters first, else power samples, else not measured."""

from __future__ import annotations

from typing import Any

import pytest

from perflab.cost.energy import POWER_SAMPLES, Energy, NotMeasured, window_energy


def gpu_rows(gpu: int, times: list[float], **series: list[Any]) -> list[tuple[float, str, dict[str, Any]]]:
    return [
        (t, "accelerator", {"gpu": gpu, **{name: values[i] for name, values in series.items()}})
        for i, t in enumerate(times)
    ]


def measured(found: Energy | NotMeasured) -> Energy:
    assert isinstance(found, Energy), found
    return found


def test_constant_power_on_two_gpus_over_an_inner_window() -> None:
    times = [float(t) for t in range(11)]
    rows = gpu_rows(0, times, power_w=[500.0] * 11) + gpu_rows(1, times, power_w=[300.0] * 11)
    energy = measured(window_energy(rows, (2.0, 7.0), [0, 1]))
    assert energy.joules == pytest.approx((500 + 300) * 5)
    assert energy.devices == 2 and energy.methods == (POWER_SAMPLES,)
    assert energy.mean_power_w == pytest.approx(800)


def test_trapezoid_and_edges_interpolated_inside_sampling_intervals() -> None:
    rows = gpu_rows(0, [0.0, 1.0, 2.0, 3.0], power_w=[100.0, 200.0, 300.0, 400.0])
    assert measured(window_energy(rows, (0.0, 3.0))).joules == pytest.approx(150 + 250 + 350)
    # E(0.5) = 75 J, E(2.5) = 150 + 250 + 175 J: each edge takes its interval's mean power
    assert measured(window_energy(rows, (0.5, 2.5))).joules == pytest.approx(500.0)


def test_edges_up_to_one_interval_outside_the_samples_extend_the_nearest_interval() -> None:
    rows = gpu_rows(0, [1.0, 2.0, 3.0, 4.0, 5.0], power_w=[100.0, 100.0, 100.0, 100.0, 300.0])
    # before 1.0: 100 W for 0.5 s; after 5.0: the last interval's mean, 200 W, for 0.5 s
    assert measured(window_energy(rows, (0.5, 5.5))).joules == pytest.approx(50 + 300 + 200 + 100)
    too_early = window_energy(rows, (-0.5, 5.0))
    assert isinstance(too_early, NotMeasured) and "do not cover the benchmark window" in too_early.reason


def test_nvml_counter_wins_over_power_samples() -> None:
    rows = gpu_rows(3, [0.0, 1.0, 2.0], energy_mj=[5_000_000, 5_600_000, 6_400_000], power_w=[1.0, 1.0, 1.0])
    energy = measured(window_energy(rows, (0.0, 2.0), [3]))
    assert energy.joules == pytest.approx(1400.0) and energy.methods == ("NVML energy counter",)


def test_counter_that_goes_back_falls_back_to_power_samples() -> None:
    rows = gpu_rows(0, [0.0, 1.0, 2.0], energy_mj=[9_000, 1_000, 2_000], power_w=[200.0, 200.0, 200.0])
    energy = measured(window_energy(rows, (0.0, 2.0)))
    assert energy.joules == pytest.approx(400.0) and energy.methods == (POWER_SAMPLES,)


def test_rapl_counter_wrap_around_is_undone() -> None:
    wrap = {"max_energy_range_uj": 1_000_000}
    rows = [
        (0.0, "rapl", {"package": 0, "energy_uj": 900_000, **wrap}),
        (1.0, "rapl", {"package": 0, "energy_uj": 100_000, **wrap}),
        (2.0, "rapl", {"package": 0, "energy_uj": 300_000, **wrap}),
        (0.0, "rapl", {"package": 1, "energy_uj": 0, **wrap}),
        (2.0, "rapl", {"package": 1, "energy_uj": 50_000, **wrap}),
    ]
    energy = measured(window_energy(rows, (0.0, 2.0), [0, 1]))
    assert energy.joules == pytest.approx(0.4 + 0.05)
    assert energy.devices == 2 and energy.methods == ("RAPL energy counter",)


def test_a_gpu_without_power_leaves_the_node_not_measured() -> None:
    rows = gpu_rows(0, [0.0, 1.0], power_w=[100.0, 100.0]) + gpu_rows(1, [0.0, 1.0], utilization_pct=[50, 60])
    found = window_energy(rows, (0.0, 1.0), [0, 1])
    assert found == NotMeasured("GPU 1: no energy counter or power samples")
    assert window_energy([], (0.0, 1.0)) == NotMeasured("no power or energy samples")
    assert window_energy(rows, (1.0, 1.0)) == NotMeasured("no benchmark window")


def test_power_values_that_are_not_numbers_are_not_samples() -> None:
    rows = gpu_rows(0, [0.0, 1.0, 2.0], power_w=[None, True, "250"])
    assert window_energy(rows, (0.0, 2.0)) == NotMeasured("GPU 0: no energy counter or power samples")
