"""A benchmark as it runs: its completion rate, requests in flight and estimated latency over time,
and when it should end (the runner writes the history, the Run page reads it).

The runner keeps the bench's once-a-second progress lines of the running profile in
``run.progress["history"]`` as ``[elapsed_s, done, failed, in_flight]`` points (the last
:data:`HISTORY_POINTS`). Per-request latencies reach the database only when the benchmark ends, so the
live latency is an estimate by Little's law: requests in flight ÷ completions per second is the mean
time a request spends in the system (exact on average in a steady state); the page says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

HISTORY_POINTS = 600
# The completion rate behind the ETA: over the last this many seconds.
ETA_WINDOW_S = 10.0
COLUMNS = ("t", "completed_per_s", "requests_in_flight", "latency_s")


def history_point(values: dict[str, Any]) -> list[float] | None:
    """A progress line as a history point, or None when it lacks a number."""
    try:
        return [float(values[key]) for key in ("elapsed_s", "done", "failed", "in_flight")]
    except (KeyError, TypeError, ValueError):
        return None


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
    """The usable points of a stored history as an (n, 4) array, in time order."""
    rows = [row for row in history or [] if isinstance(row, list) and len(row) == 4]
    try:
        points = np.asarray(rows, dtype=float).reshape(-1, 4)
    except ValueError:
        return np.empty((0, 4))
    return points[np.argsort(points[:, 0], kind="stable")]


def live_frame(history: Any) -> pd.DataFrame:
    """Per interval between history points: its end ``t``, requests completed per second, requests
    in flight at its end and the latency estimate (in flight ÷ completions/s; empty while none ends)."""
    points = _points(history)
    if len(points) < 2:
        return pd.DataFrame(columns=list(COLUMNS))
    elapsed = np.diff(points[:, 0])
    ended = np.diff(points[:, 1])
    keep = elapsed > 0
    rate = ended[keep] / elapsed[keep]
    in_flight = points[1:, 3][keep]
    with np.errstate(divide="ignore", invalid="ignore"):
        latency = np.where(rate > 0, in_flight / rate, np.nan)
    return pd.DataFrame(
        {
            "t": points[1:, 0][keep],
            "completed_per_s": rate,
            "requests_in_flight": in_flight,
            "latency_s": latency,
        }
    )


def eta_s(history: Any, total: int) -> float | None:
    """Seconds until all ``total`` requests have ended at the completion rate of the last
    :data:`ETA_WINDOW_S` seconds (None before any has ended or without a total)."""
    points = _points(history)
    if not total or len(points) < 2:
        return None
    last = points[-1]
    window = points[points[:, 0] >= last[0] - ETA_WINDOW_S]
    first = window[0] if len(window) > 1 else points[-2]
    ended = last[1] - first[1]
    elapsed = last[0] - first[0]
    if ended <= 0 or elapsed <= 0:
        return None
    return max(0.0, (total - last[1]) / (ended / elapsed))
