"""Energy from a real H200's power readings (tests/data/nvidia-h200/power-under-load.jsonl, nvidia-smi
every 0.5 s): integrated over each recorded phase, the mean power is what the recording's notes say
(≈78 W idle, ≈692 W at the 700 W cap, ≈520 W at 50 % duty) within the phase's first readings, which
still carry the phase before (the 1 s average lags: the full-load phase starts at 83 W, the half-duty
one at 692 W); from ``power.draw.average``, though the instant reading swings 190–840 W at 50 % duty."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perflab.cost.energy import Energy, NotMeasured, window_energy

RECORDING = Path(__file__).resolve().parents[1] / "data" / "nvidia-h200" / "power-under-load.jsonl"
AVERAGE, INSTANT = 6, 7  # power.draw.average and power.draw.instant in the recorded query's columns


def phase_samples(phase: str, column: int) -> list[tuple[float, str, dict[str, Any]]]:
    samples = []
    for line in RECORDING.read_text(encoding="utf-8").splitlines():
        call = json.loads(line)
        if call["phase"] != phase or not any("power.draw.average" in arg for arg in call["argv"]):
            continue
        cells = [cell.strip() for cell in call["stdout"].splitlines()[1].split(",")]
        watts = float(cells[column].removesuffix(" W"))
        samples.append((call["t"], "accelerator", {"gpu": 0, "power_w": watts}))
    return samples


@pytest.mark.parametrize(
    ("phase", "low", "high"), [("idle", 75, 90), ("load_100", 650, 700), ("load_50", 500, 560)]
)
def test_mean_power_over_each_recorded_phase(phase: str, low: float, high: float) -> None:
    samples = phase_samples(phase, AVERAGE)
    window = (samples[0][0], samples[-1][0])
    energy = window_energy(samples, window, [0])
    assert isinstance(energy, Energy)
    assert low <= energy.mean_power_w <= high
    assert energy.joules == pytest.approx(energy.mean_power_w * (window[1] - window[0]))


def test_instant_readings_at_half_duty_swing_where_the_average_holds() -> None:
    instant = [values["power_w"] for _, _, values in phase_samples("load_50", INSTANT)]
    average = [values["power_w"] for _, _, values in phase_samples("load_50", AVERAGE)]
    assert max(instant) - min(instant) > 3 * (max(average) - min(average))


UTILIZATION = 2  # utilization.gpu in the recorded query's columns


def recorded_samples() -> list[tuple[float, str, dict[str, Any]]]:
    """Every periodic reading of the recording, as the sampler stores it: power and utilization."""
    samples = []
    for line in RECORDING.read_text(encoding="utf-8").splitlines():
        call = json.loads(line)
        if not any("power.draw.average" in arg for arg in call["argv"]):
            continue
        cells = [cell.strip() for cell in call["stdout"].splitlines()[1].split(",")]
        values = {
            "gpu": 0,
            "power_w": float(cells[AVERAGE].removesuffix(" W")),
            "utilization_pct": float(cells[UTILIZATION].removesuffix(" %")),
        }
        samples.append((call["t"], "accelerator", values))
    return samples


def test_a_window_that_holds_the_idle_seconds_after_the_load_is_refused_and_says_why() -> None:
    """The half-duty load ends at 38.1 s; a window placed 5 s late, as one ending when the result was
    read back, holds 9 idle readings among its 14 and would publish the idle GPU's tokens per joule."""
    late = window_energy(recorded_samples(), (36.0, 43.0), [0])
    assert isinstance(late, NotMeasured)
    assert late.reason.startswith("GPU 0: 9 of its 14 samples in the window show no load (")
    assert late.reason.endswith(" W): the window holds time outside the benchmark")
    idle_power = [values["power_w"] for t, _, values in recorded_samples() if 36.0 <= t <= 43.0][5:]
    assert f"({sum(idle_power) / len(idle_power):.1f} W)" in late.reason


def test_tokens_per_joule_recomputed_from_the_stored_readings_over_the_benchs_own_window() -> None:
    """Over the half-duty phase's own seconds the energy is the trapezoid rule over the readings inside
    the window, plus, at each edge, the part of the sampling interval around it inside the window at
    that interval's mean power; tokens per joule follow from it."""
    samples = recorded_samples()
    start, end = 25.9, 37.4
    energy = window_energy(samples, (start, end), [0])
    assert isinstance(energy, Energy)
    times = np.array([t for t, _, _ in samples])
    watts = np.array([values["power_w"] for _, _, values in samples])
    inside = np.flatnonzero((times >= start) & (times <= end))
    first, last = inside[0], inside[-1]
    joules = float(np.sum((watts[first + 1 : last + 1] + watts[first:last]) / 2 * np.diff(times[inside])))
    joules += (times[first] - start) * (watts[first - 1] + watts[first]) / 2
    joules += (end - times[last]) * (watts[last] + watts[last + 1]) / 2
    assert energy.joules == pytest.approx(joules, rel=1e-9)
    output_tokens = 30_000
    assert output_tokens / energy.joules == pytest.approx(output_tokens / joules, rel=1e-9)
    assert 500 < energy.mean_power_w < 560
