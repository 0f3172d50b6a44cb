"""A benchmark as it runs: its completion rate, requests in flight and measured latency over time, and
when it should end (the runner writes the history, the Run page reads it).

The runner keeps the bench's once-a-second progress lines of the running profile in
``run.progress["history"]`` as ``[elapsed_s, done, failed, in_flight, e2el_sum_s, e2el_n]`` points
(the last :data:`HISTORY_POINTS`; a bench that reports no latency sums leaves the last two out).
``done`` counts every request that ended, failed ones included.

- The live latency is measured: the mean end-to-end latency of the successful requests that ended
  within the last :data:`SMOOTHING_S` seconds (from the bench's running sums), so no point lies
  outside the latencies the requests really had; the completion rate is smoothed over the same window.
- The time left comes from the profile's own progress: the requests still to end at the rate they
  have ended since the first one did (the wait for the first completions is the requests' latency,
  not their pace). It is given only once that rate rests on :data:`SETTLED_FRACTION` of the planned
  requests (and at least :data:`SETTLED_REQUESTS`); before that the page says it is estimating.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

HISTORY_POINTS = 600
SMOOTHING_S = 5.0
SETTLED_FRACTION = 0.05
SETTLED_REQUESTS = 3
COLUMNS = ("t", "completed_per_s", "requests_in_flight", "latency_s")
_REQUIRED = ("elapsed_s", "done", "failed", "in_flight")
_LATENCY = ("e2el_sum_s", "e2el_n")
_WIDTH = len(_REQUIRED) + len(_LATENCY)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(value)
    return float(value)


def history_point(values: dict[str, Any]) -> list[float] | None:
    """A progress line as a history point, or None when it lacks a count (the latency sums are kept
    when the line has both)."""
    try:
        point = [_number(values[key]) for key in _REQUIRED]
    except (KeyError, ValueError):
        return None
    try:
        return point + [_number(values[key]) for key in _LATENCY]
    except (KeyError, ValueError):
        return point


def with_point(history: list[list[float]], values: dict[str, Any]) -> list[list[float]]:
    """``history`` with the point of ``values`` appended (a restarted count starts a new history),
    the last :data:`HISTORY_POINTS` kept."""
    point = history_point(values)
    if point is None:
        return history
    if history and point[0] < history[-1][0]:
        history = []
    return [*history, point][-HISTORY_POINTS:]


def _points(history: Any) -> np.ndarray:
    """The usable points of a stored history as an (n, 6) array in time order, NaN where a point has
    no latency sums."""
    rows = []
    for row in history or []:
        if not isinstance(row, list) or len(row) not in (len(_REQUIRED), _WIDTH):
            continue
        try:
            numbers = [_number(value) for value in row]
        except ValueError:
            continue
        rows.append(numbers + [np.nan] * (_WIDTH - len(numbers)))
    points = np.asarray(rows, dtype=float).reshape(-1, _WIDTH)
    return points[np.argsort(points[:, 0], kind="stable")]


def live_frame(history: Any) -> pd.DataFrame:
    """At each history point after the first: its time ``t``, requests completed per second and the
    mean end-to-end latency (s) of the successful requests that ended over the last
    :data:`SMOOTHING_S` seconds (NaN when none did, or the bench sent no latency sums), and the
    requests in flight at ``t``."""
    points = _points(history)
    if len(points) < 2:
        return pd.DataFrame(columns=list(COLUMNS))
    times = points[:, 0]
    # For each point, the last point at least SMOOTHING_S older (else the first one).
    start = np.searchsorted(times, times - SMOOTHING_S, side="right") - 1
    start = np.clip(start, 0, None)
    later = np.arange(1, len(points))
    earlier = np.minimum(start[later], later - 1)
    elapsed = times[later] - times[earlier]
    keep = elapsed > 0
    later, earlier, elapsed = later[keep], earlier[keep], elapsed[keep]
    ended = points[later, 1] - points[earlier, 1]
    latency_sum = points[later, 4] - points[earlier, 4]
    latency_count = points[later, 5] - points[earlier, 5]
    with np.errstate(divide="ignore", invalid="ignore"):
        latency = np.where(latency_count > 0, latency_sum / latency_count, np.nan)
    return pd.DataFrame(
        {
            "t": times[later],
            "completed_per_s": ended / elapsed,
            "requests_in_flight": points[later, 3],
            "latency_s": latency,
        }
    )


def eta_s(history: Any, total: int) -> float | None:
    """Seconds until all ``total`` planned requests have ended, at the rate they have ended since the
    first one did; None without a total, or while that rate is not settled (see the module doc)."""
    points = _points(history)
    if not total or len(points) < 2:
        return None
    last = points[-1]
    if last[1] >= total:
        return 0.0
    began = points[points[:, 1] > 0]
    if not len(began):
        return None
    ended = last[1] - began[0][1]
    elapsed = last[0] - began[0][0]
    if elapsed <= 0 or ended < max(SETTLED_REQUESTS, SETTLED_FRACTION * total):
        return None
    return (total - last[1]) * elapsed / ended
