"""Minimum evidence: a benchmark too short to judge a configuration by.

A figure from a benchmark of a handful of requests, or of a second or two, measures how the engine fills
its first batch and drains its last requests, not how it serves: one such run can differ from the next by
more than any knob does. A result is **too short to judge** below :data:`MIN_DURATION_S` seconds of the
engine's time (on a simulated host with ``time_scale: N``, N × the wall time) or :data:`MIN_COMPLETED`
completed requests. The shortest benchmark in the write-ups perflab imports lasted 7.8 s with 100
requests; both bounds stay below that.

The runner marks such a result when it stores it (``too_short``: the reason, with the figures); a study
never decides on it nor publishes its figures, and every page says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MIN_DURATION_S = 5.0
MIN_COMPLETED = 50
TOO_SHORT = "too_short"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def too_short_reason(result: Mapping[str, Any], time_scale: float = 1.0) -> str | None:
    """Why ``result`` is too short to judge (None when it is long enough, or says nothing of it)."""
    duration, completed = _number(result.get("duration")), _number(result.get("completed"))
    if duration is None or completed is None:
        return None
    engine_s = duration * time_scale
    if engine_s >= MIN_DURATION_S and completed >= MIN_COMPLETED:
        return None
    simulated = f" of simulated time (× {time_scale:g})" if time_scale != 1.0 else ""
    return (
        f"too short to judge: {engine_s:.1f} s{simulated} and {completed:.0f} requests; a decision or a "
        f"published figure needs at least {MIN_DURATION_S:g} s and {MIN_COMPLETED} requests"
    )


def marked(result: Mapping[str, Any], time_scale: float = 1.0) -> dict[str, Any]:
    """``result`` with ``too_short`` set when it is (unchanged otherwise)."""
    reason = too_short_reason(result, time_scale)
    return {**result, TOO_SHORT: reason} if reason is not None else dict(result)


def short_reason(result: Mapping[str, Any] | None) -> str | None:
    """The reason a stored result was marked too short to judge, or None."""
    reason = (result or {}).get(TOO_SHORT)
    return reason if isinstance(reason, str) else None
