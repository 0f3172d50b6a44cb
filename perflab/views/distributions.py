"""Latency distributions from per-request records: the values of one metric and their CDF.

TTFT, TPOT and E2EL have one value per successful request; ITL pools the gaps between streamed
chunks of every successful request (as ``vllm bench serve`` does). A CDF is thinned to at most
``max_points`` quantiles so charts stay small for 10⁵ values.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perflab.views.metrics import LATENCY_NAMES

DISTRIBUTION_METRICS: tuple[str, ...] = ("ttft", "tpot", "e2el", "itl")


def latency_values(records: pd.DataFrame, metric: str) -> np.ndarray:
    """The values in ms of ``metric`` (ttft, tpot, e2el, itl) over the successful requests."""
    if metric not in LATENCY_NAMES:
        raise ValueError(f"unknown latency metric {metric!r}; choose one of {', '.join(LATENCY_NAMES)}")
    if records.empty:
        return np.array([], dtype=float)
    successful = records[records["success"].astype(bool)]
    if metric == "itl":
        pooled = [gap for gaps in successful["itl_ms"] for gap in (gaps or [])]
        values = np.asarray(pooled, dtype=float)
    else:
        values = successful[f"{metric}_ms"].to_numpy(dtype=float)
    return values[np.isfinite(values)]


def has_values(records: pd.DataFrame, metric: str) -> bool:
    """Whether any successful request has a value of ``metric``."""
    return latency_values(records, metric).size > 0


def cdf_points(values: np.ndarray, max_points: int = 200) -> pd.DataFrame:
    """The empirical CDF of ``values`` as ``value``/``fraction`` rows, at most ``max_points`` of them.

    ``fraction`` is the share of values ≤ ``value``; the last point is (max, 1.0).
    """
    if max_points < 2:
        raise ValueError("a CDF needs at least two points")
    ordered = np.sort(np.asarray(values, dtype=float))
    count = ordered.size
    if count == 0:
        return pd.DataFrame({"value": pd.Series(dtype=float), "fraction": pd.Series(dtype=float)})
    positions = np.unique(np.linspace(0, count - 1, num=min(count, max_points)).round().astype(int))
    return pd.DataFrame({"value": ordered[positions], "fraction": (positions + 1) / count})


def metric_label(metric: str) -> str:
    """``ttft`` → ``TTFT (ms)``."""
    return f"{LATENCY_NAMES[metric]} (ms)"
