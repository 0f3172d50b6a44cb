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

A result timed by a simulated engine's clock carries that engine's own count instead
(``simulated_energy``: the joules its devices drew over the measured rounds on its simulated clock,
:mod:`perflab.sim.energy`): the power samples are taken by the wall clock, and a loaded machine stretches
the wall-clock window a simulated benchmark runs in, so they would measure the machine.
:func:`simulated_energy` takes it, within the physical power limit below, before any sample.

Limits, past which a device (and so the node) is not measured rather than published:

- **Enough samples** (:data:`MIN_WINDOW_SAMPLES`, :data:`MIN_SAMPLED_SHARE`): at least 2 samples of
  the source used must lie inside the window, and the time between the first and the last of them must
  cover at least half of it. A window shorter than the sampling interval (a 0.1 s benchmark sampled
  every 2 s) would otherwise be all interpolation.
- **Physical power** (:data:`MAX_POWER_W`): no accelerator draws more than 5,000 W and no CPU package
  more than 2,000 W (the largest parts draw about 1,400 W and 500 W). A power sample above that, or
  negative, is not a sample; a counter whose readings imply more (between two readings, or over the
  window) is not used; the device's energy over the window must stay within it too.
- **Counter readings** are whole numbers in [0, 2^64) (NVML's and the kernel's counters are unsigned
  64-bit), others are not readings. A counter read by its own command is at its own time
  (``energy_t_s``), else at its row's.
- **The load** (:data:`MIN_BUSY_SHARE`): at least half of the samples inside the window must show the
  benchmark running — an accelerator's ``utilization_pct`` above 0 (each GPU on its own samples), or on a
  CPU host, whose packages say nothing of who used them, the engine's running or waiting requests. A
  window whose samples mostly show idle devices holds seconds outside the benchmark (a window misplaced
  on the samples' clock, or samples stamped at the wrong time), and idle power would be published as the
  benchmark's.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

POWER_SAMPLES = "power samples"
MIN_WINDOW_SAMPLES = 2
MIN_SAMPLED_SHARE = 0.5
MIN_BUSY_SHARE = 0.5
# The most one device can draw, by sample source: accelerators, CPU packages (RAPL).
MAX_POWER_W = {"accelerator": 5000.0, "rapl": 2000.0}
COUNTER_LIMIT = 2**64
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
    """A finite number as a float (None for anything else, an integer too large for a float too)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int) and abs(value) >= COUNTER_LIMIT:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _reading(value: Any) -> float | None:
    """A counter reading: a whole number in [0, 2^64)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < COUNTER_LIMIT:
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


def _within_power(times: np.ndarray, joules: np.ndarray, limit_w: float) -> bool:
    """Whether the cumulative ``joules`` never rise faster than ``limit_w`` between two samples."""
    return bool(np.all(np.diff(joules) <= limit_w * np.diff(times)))


def _window_problem(times: np.ndarray, window: tuple[float, float]) -> str | None:
    """Why the samples at ``times`` are too few for ``window`` (see :data:`MIN_WINDOW_SAMPLES`), or None."""
    start, end = window
    inside = times[(times >= start) & (times <= end)]
    span = float(inside[-1] - inside[0]) if len(inside) else 0.0
    if len(inside) >= MIN_WINDOW_SAMPLES and span >= MIN_SAMPLED_SHARE * (end - start):
        return None
    return (
        f"the window of {end - start:.1f} s holds {len(inside)} of its samples "
        f"(at least {MIN_WINDOW_SAMPLES}, spanning {MIN_SAMPLED_SHARE:.0%} of it, are needed)"
    )


def _candidates(
    source: str, rows: Sequence[tuple[float, Mapping[str, Any]]]
) -> tuple[list[tuple[str, np.ndarray, np.ndarray]], list[str]]:
    """The device's usable energy series, best first, as ``(method, times, cumulative joules)``, and
    why the others are not used."""
    field, scale, wrap_field, counter_method = _COUNTERS[source]
    limit = MAX_POWER_W[source]
    found: list[tuple[str, np.ndarray, np.ndarray]] = []
    refused: list[str] = []
    counter_rows = [
        (_number(values.get("energy_t_s")) or t, reading)
        for t, values in rows
        if (reading := _reading(values.get(field))) is not None
    ]
    if len(counter_rows) >= 2:
        times, readings = _series(counter_rows)
        wraps = [_reading(values.get(wrap_field)) for _, values in rows] if wrap_field else []
        wrap = next((value for value in wraps if value), None)
        cumulative = counter_energy(times, readings, wrap) if len(times) >= 2 else None
        if cumulative is not None and not _within_power(times, cumulative * scale, limit):
            refused.append(f"its {counter_method} rises faster than the {limit:,.0f} W a device can draw")
        elif cumulative is not None:
            found.append((counter_method, times, cumulative * scale))
    powers = [(t, _number(values.get("power_w"))) for t, values in rows]
    power_rows = [(t, watts) for t, watts in powers if watts is not None]
    impossible = [watts for _, watts in power_rows if not 0 <= watts <= limit]
    if impossible:
        refused.append(
            f"a power reading of {impossible[0]:.4g} W is outside the 0–{limit:,.0f} W a device draws"
        )
    elif len(power_rows) >= 2:
        times, watts = _series(power_rows)
        if len(times) >= 2:
            found.append((POWER_SAMPLES, times, power_energy(times, watts)))
    return found, refused


def _device_energy(
    source: str, rows: Sequence[tuple[float, Mapping[str, Any]]], window: tuple[float, float]
) -> tuple[float, str] | str:
    """(joules, method) of one device over ``window``, or why it is not measured."""
    candidates, refused = _candidates(source, rows)
    if not candidates:
        return "; ".join(refused) or "no energy counter or power samples"
    problems: dict[str, str] = {}
    for method, times, cumulative in candidates:
        problem = _window_problem(times, window)
        start, end = _at(window[0], times, cumulative), _at(window[1], times, cumulative)
        if problem is None and (start is None or end is None):
            problem = "its samples do not cover the benchmark window"
        if problem is None and start is not None and end is not None:
            joules = end - start
            if joules <= MAX_POWER_W[source] * (window[1] - window[0]):
                return joules, method
            problem = f"{joules:.4g} J over the window is more than a device can draw"
        problems[method] = str(problem)
    if len(set(problems.values())) == 1:
        return "; ".join([next(iter(problems.values())), *refused])
    return "; ".join([*(f"{method}: {problem}" for method, problem in problems.items()), *refused])


def _load_problem(
    evidence: Sequence[tuple[float, bool, float | None]], window: tuple[float, float]
) -> str | None:
    """Why the samples inside ``window`` do not show the benchmark's load (see :data:`MIN_BUSY_SHARE`),
    from ``(t_s, busy, power_w)`` per sample; None when they do, or say nothing of it."""
    inside = [(busy, watts) for t_s, busy, watts in evidence if window[0] <= t_s <= window[1]]
    idle = [watts for busy, watts in inside if not busy]
    if not inside or len(idle) <= (1.0 - MIN_BUSY_SHARE) * len(inside):
        return None
    powers = [watts for watts in idle if watts is not None]
    at = f" ({np.mean(powers):.1f} W)" if powers else ""
    return (
        f"{len(idle)} of its {len(inside)} samples in the window show no load{at}: the window holds time "
        "outside the benchmark"
    )


def _utilization(rows: Sequence[tuple[float, Mapping[str, Any]]]) -> list[tuple[float, bool, float | None]]:
    """An accelerator's samples that report its utilization: busy when above 0 %."""
    return [
        (t_s, utilization > 0, _number(values.get("power_w")))
        for t_s, values in rows
        if (utilization := _number(values.get("utilization_pct"))) is not None
    ]


def _engine_load(
    samples: Iterable[tuple[float, str, Mapping[str, Any]]],
) -> list[tuple[float, bool, float | None]]:
    """The engine's samples that report its requests: busy when one is running or waiting."""
    found = []
    for t_s, source, values in samples:
        counts = [_number(values.get(name)) for name in ("running", "waiting")]
        if source == "engine" and any(count is not None for count in counts):
            found.append((float(t_s), sum(count or 0.0 for count in counts) > 0, None))
    return found


SIMULATED_COUNTER = "simulated energy counter"


def simulated_energy(value: Any, devices: int | None) -> Energy | NotMeasured | None:
    """A simulated engine's own energy over its result's measured rounds (``{"joules", "window_s"}``) on
    ``devices`` accelerators; None when the result carries none."""
    if value is None:
        return None
    joules = _number(value.get("joules")) if isinstance(value, Mapping) else None
    window_s = _number(value.get("window_s")) if isinstance(value, Mapping) else None
    if joules is None or window_s is None or joules <= 0 or window_s <= 0 or not devices:
        return NotMeasured("the simulated engine's energy is not a positive count over a window")
    if joules > MAX_POWER_W["accelerator"] * devices * window_s:
        return NotMeasured("the simulated engine's energy implies more power than its devices can draw")
    return Energy(joules=joules, window_s=window_s, devices=devices, methods=(SIMULATED_COUNTER,))


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
    samples = list(samples)
    for t_s, source, values in samples:
        key = _DEVICE_KEY.get(source)
        index = values.get(key) if key else None
        if isinstance(index, int) and not isinstance(index, bool):
            devices[source][index].append((float(t_s), values))
    if devices["accelerator"]:
        source, names, wanted = "accelerator", "GPU", list(gpu_ids or devices["accelerator"])
    elif devices["rapl"]:
        source, names, wanted = "rapl", "CPU package", list(devices["rapl"])
        idle = _load_problem(_engine_load(samples), window)
        if idle is not None:
            return NotMeasured(f"the engine: {idle}")
    else:
        return NotMeasured("no power or energy samples")
    joules = 0.0
    methods: set[str] = set()
    for index in sorted(wanted):
        rows = devices[source].get(index, [])
        idle = _load_problem(_utilization(rows), window)
        if idle is not None:
            return NotMeasured(f"{names} {index}: {idle}")
        found = _device_energy(source, rows, window)
        if isinstance(found, str):
            return NotMeasured(f"{names} {index}: {found}")
        joules += found[0]
        methods.add(found[1])
    return Energy(joules=joules, window_s=end - start, devices=len(wanted), methods=tuple(sorted(methods)))
