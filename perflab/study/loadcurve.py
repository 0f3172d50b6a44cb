"""Load curves: a profile swept over request rates or concurrency caps on one launch, read back.

Each sweep point is one stored result with its ``sweep_point`` (``{kind, value, index, points}``).
:func:`analyze` orders the points by load and finds

- the **peak**: the point with the highest output throughput;
- the **saturation point**: the lowest load whose throughput is within ``plateau`` (10 %) of the peak,
  provided a higher load was measured and did not rise past that band; None when the curve still
  rises at its last point (the runner's sweep stops once a point no longer adds ``flat_gain``, so a
  measured curve usually ends just past its plateau);
- the **SLO limit**: the highest load whose point meets every SLO (``{"p99_ttft_ms": 2000,
  "mean_tpot_ms": 50}``: each result field at most its limit) with no failed requests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_PLATEAU = 0.10
LOAD_UNITS = {"request_rate": "req/s", "max_concurrency": "concurrent requests"}
LOAD_TITLES = {"request_rate": "Request rate (req/s)", "max_concurrency": "Max concurrency"}


@dataclass(frozen=True)
class LoadPoint:
    """One sweep point: its load and the figures measured at it."""

    load: float
    output_throughput: float
    total_token_throughput: float
    figures: Mapping[str, float]
    failed: int
    meets_slos: bool
    violations: tuple[str, ...] = ()


@dataclass(frozen=True)
class LoadCurve:
    """A swept profile's points, lowest load first, with what the curve shows."""

    kind: str
    points: tuple[LoadPoint, ...]
    slos: Mapping[str, float] = field(default_factory=dict)
    peak: LoadPoint | None = None
    saturation: LoadPoint | None = None
    slo_limit: LoadPoint | None = None

    @property
    def unit(self) -> str:
        return LOAD_UNITS.get(self.kind, "")


# The most decimals a figure past its SLO is shown with.
MAX_SLO_DECIMALS = 6


def past_limit(value: float, limit: float) -> str:
    """``value`` (above ``limit``) with one decimal, or as many as the limit is written with, and more
    while the text would not read above the limit: ``0.277`` against 0.262 (not ``0.3``), ``52.41``
    against 52.4 (not ``52.4``)."""
    written = f"{limit:g}"
    decimals = 1 if "e" in written else max(1, len(written.partition(".")[2]))
    text = f"{value:.{decimals}f}"
    while float(text) <= limit and decimals < MAX_SLO_DECIMALS:
        decimals += 1
        text = f"{value:.{decimals}f}"
    return text


def slo_violations(result: Mapping[str, Any], slos: Mapping[str, float]) -> tuple[str, ...]:
    """Each SLO the result misses, worded ``p99_ttft_ms 2450.1 > 2000`` (:func:`past_limit`); a missing
    figure misses too."""
    missed = []
    for name, limit in slos.items():
        value = result.get(name)
        if not isinstance(value, (int, float)):
            missed.append(f"{name} not measured")
        elif value > limit:
            missed.append(f"{name} {past_limit(value, limit)} > {limit:g}")
    return tuple(missed)


def point_of(result: Mapping[str, Any], load: float, slos: Mapping[str, float]) -> LoadPoint:
    """A stored sweep-point result as a :class:`LoadPoint`."""
    figures = {
        name: float(value)
        for name, value in result.items()
        if name.endswith("_ms") and isinstance(value, (int, float)) and not isinstance(value, bool)
    }
    failed = int(result.get("failed") or 0)
    violations = slo_violations(result, slos)
    if failed:
        violations = (*violations, f"{failed} failed requests")
    return LoadPoint(
        load=float(load),
        output_throughput=float(result.get("output_throughput") or 0.0),
        total_token_throughput=float(result.get("total_token_throughput") or 0.0),
        figures=figures,
        failed=failed,
        meets_slos=not violations,
        violations=violations,
    )


def saturation_point(points: Sequence[LoadPoint], plateau: float = DEFAULT_PLATEAU) -> LoadPoint | None:
    """The lowest load on the throughput plateau, or None while the curve still rises at its end."""
    if len(points) < 2:
        return None
    peak = max(point.output_throughput for point in points)
    first = next(point for point in points if point.output_throughput >= peak * (1.0 - plateau))
    return None if first is points[-1] else first


def analyze(
    kind: str,
    samples: Sequence[tuple[float, Mapping[str, Any]]],
    slos: Mapping[str, float] | None = None,
    *,
    plateau: float = DEFAULT_PLATEAU,
) -> LoadCurve:
    """The load curve of ``(load, result)`` samples under ``slos``."""
    limits = dict(slos or {})
    points = tuple(sorted((point_of(result, load, limits) for load, result in samples), key=lambda p: p.load))
    peak = max(points, key=lambda point: point.output_throughput) if points else None
    within = [point for point in points if point.meets_slos]
    return LoadCurve(
        kind=kind,
        points=points,
        slos=limits,
        peak=peak,
        saturation=saturation_point(points, plateau),
        slo_limit=within[-1] if within and limits else None,
    )


def curve_from_results(
    results: Sequence[tuple[Mapping[str, Any] | None, Mapping[str, Any]]],
    slos: Mapping[str, float] | None = None,
    *,
    plateau: float = DEFAULT_PLATEAU,
) -> LoadCurve | None:
    """The curve of stored ``(sweep_point, result)`` pairs of one profile; None without sweep points."""
    samples = [(float(point["value"]), result) for point, result in results if point]
    if not samples:
        return None
    kind = next(str(point["kind"]) for point, _ in results if point)
    return analyze(kind, samples, slos, plateau=plateau)
