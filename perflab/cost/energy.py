"""The energy a run's devices drew over a benchmark window, from its stored ``runsample`` rows.

Each device is read on its own, best source first:

1. a cumulative energy counter: NVML's ``energy_mj`` (millijoules) on ``accelerator`` rows, or RAPL's
   ``energy_uj`` (microjoules) on ``rapl`` rows, whose wrap-around at ``max_energy_range_uj`` is undone;
   a counter that goes back without a known wrap (a driver reload) is not used;
2. else the ``power_w`` samples of ``accelerator`` rows, integrated with the trapezoid rule;
3. else the device is not measured, and neither is the node: a partial sum would be a guess.

Both sources give the device's cumulative energy E(t) at its sample times. The window's energy is
E(end) − E(start), E taken by linear interpolation between the two samples around each edge (the mean
power of that sampling interval over the part of it inside the window). An edge outside the sampled span
by at most one sampling interval (the series' median) extends the nearest interval's mean power to it;
further out, the device is not measured.

The node's energy is the sum over its devices: the run's GPUs when accelerators were sampled
(``run.gpu_ids``; every GPU sampled when the run has none), else every RAPL package of a CPU host (the
whole package: other processes on it count too).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

POWER_SAMPLES = "power samples"
# source → (counter field, joules per counter unit, wrap field, method name)
_COUNTERS = {
    "accelerator": ("energy_mj", 1e-3, None, "NVML energy counter"),
    "rapl": ("energy_uj", 1e-6, "max_energy_range_uj", "RAPL energy counter"),
}
_DEVICE_KEY = {"accelerator": "gpu", "rapl": "package"}


@dataclass(frozen=True)
class Energy:
    """Joules drawn by the node's ``devices`` over ``window_s`` seconds, and how they were measured."""

    joules: float
    window_s: float
    devices: int
    methods: tuple[str, ...]

    @property
    def mean_power_w(self) -> float:
        return self.joules / self.window_s


@dataclass(frozen=True)
class NotMeasured:
    """Why a window's energy is not known."""

    reason: str


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        return None
    return float(value)


def _series(rows: Iterable[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Times and values, in time order, the first sample of a repeated time kept."""
    times: list[float] = []
    values: list[float] = []
    for t_s, value in sorted(rows, key=lambda row: row[0]):
        if times and t_s <= times[-1]:
            continue
        times.append(t_s)
        values.append(value)
    return np.asarray(times), np.asarray(values)


def counter_energy(times: np.ndarray, readings: np.ndarray, wrap: float | None) -> np.ndarray | None:
    """Cumulative energy (counter units) at each reading, wrap-arounds undone; None if the counter
    went back without a known wrap."""
    steps = np.diff(readings)
    if wrap is not None:
        steps = np.where(steps < 0, steps + wrap, steps)
    if np.any(steps < 0):
        return None
    return np.concatenate(([0.0], np.cumsum(steps)))


def power_energy(times: np.ndarray, watts: np.ndarray) -> np.ndarray:
    """Cumulative joules at each sample time: the trapezoid rule over the power samples."""
    return np.concatenate(([0.0], np.cumsum((watts[1:] + watts[:-1]) / 2.0 * np.diff(times))))


def _at(t: float, times: np.ndarray, cumulative: np.ndarray) -> float | None:
    """E(t) by linear interpolation; up to one median sampling interval outside the samples, the
    nearest interval's mean power extended; None further out."""
    reach = float(np.median(np.diff(times)))
    if t < times[0] - reach or t > times[-1] + reach:
        return None
    if times[0] <= t <= times[-1]:
        return float(np.interp(t, times, cumulative))
    edge = 0 if t < times[0] else -2
    rate = (cumulative[edge + 1] - cumulative[edge]) / (times[edge + 1] - times[edge])
    anchor = 0 if t < times[0] else -1
    return float(cumulative[anchor] + rate * (t - times[anchor]))


def _device_energy(
    source: str, rows: Sequence[tuple[float, Mapping[str, Any]]], window: tuple[float, float]
) -> tuple[float, str] | str:
    """(joules, method) of one device over ``window``, or why it is not measured."""
    field, scale, wrap_field, counter_method = _COUNTERS[source]
    counters = [(t, _number(values.get(field))) for t, values in rows]
    counter_rows = [(t, reading) for t, reading in counters if reading is not None]
    candidates: list[tuple[str, np.ndarray, np.ndarray, float]] = []
    if len(counter_rows) >= 2:
        times, readings = _series(counter_rows)
        wraps = [_number(values.get(wrap_field)) for _, values in rows] if wrap_field else []
        wrap = next((value for value in wraps if value), None)
        cumulative = counter_energy(times, readings, wrap) if len(times) >= 2 else None
        if cumulative is not None:
            candidates.append((counter_method, times, cumulative, scale))
    powers = [(t, _number(values.get("power_w"))) for t, values in rows]
    power_rows = [(t, watts) for t, watts in powers if watts is not None and watts >= 0]
    if len(power_rows) >= 2:
        times, watts = _series(power_rows)
        if len(times) >= 2:
            candidates.append((POWER_SAMPLES, times, power_energy(times, watts), 1.0))
    if not candidates:
        return "no energy counter or power samples"
    for method, times, cumulative, unit in candidates:
        start, end = _at(window[0], times, cumulative), _at(window[1], times, cumulative)
        if start is not None and end is not None:
            return (end - start) * unit, method
    return "its samples do not cover the benchmark window"


def window_energy(
    samples: Iterable[tuple[float, str, Mapping[str, Any]]],
    window: tuple[float, float],
    gpu_ids: Sequence[int] | None = None,
) -> Energy | NotMeasured:
    """The node's energy over ``window`` (seconds on the samples' clock) from ``(t_s, source, values)``
    samples; ``gpu_ids`` are the run's accelerators (None or empty: every one sampled)."""
    start, end = window
    if not end > start:
        return NotMeasured("no benchmark window")
    devices: dict[str, dict[int, list[tuple[float, Mapping[str, Any]]]]] = {
        "accelerator": defaultdict(list),
        "rapl": defaultdict(list),
    }
    for t_s, source, values in samples:
        key = _DEVICE_KEY.get(source)
        index = values.get(key) if key else None
        if isinstance(index, int) and not isinstance(index, bool):
            devices[source][index].append((float(t_s), values))
    if devices["accelerator"]:
        source, names, wanted = "accelerator", "GPU", list(gpu_ids or devices["accelerator"])
    elif devices["rapl"]:
        source, names, wanted = "rapl", "CPU package", list(devices["rapl"])
    else:
        return NotMeasured("no power or energy samples")
    joules = 0.0
    methods: set[str] = set()
    for index in sorted(wanted):
        found = _device_energy(source, devices[source].get(index, []), window)
        if isinstance(found, str):
            return NotMeasured(f"{names} {index}: {found}")
        joules += found[0]
        methods.add(found[1])
    return Energy(joules=joules, window_s=end - start, devices=len(wanted), methods=tuple(sorted(methods)))
