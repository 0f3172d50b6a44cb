"""Energy from a real H200's power readings (tests/data/nvidia-h200/power-under-load.jsonl, nvidia-smi
every 0.5 s): integrated over each recorded phase, the mean power is what the recording's notes say
(≈78 W idle, ≈692 W at the 700 W cap, ≈520 W at 50 % duty) within the phase's first readings, which
still carry the phase before (the 1 s average lags: the full-load phase starts at 83 W, the half-duty
one at 692 W); from ``power.draw.average``, though the instant reading swings 190–840 W at 50 % duty."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from perflab.cost.energy import Energy, window_energy

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
