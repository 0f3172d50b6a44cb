"""Minimum evidence: a benchmark long enough to judge a configuration by, whatever its speed.

A figure from a benchmark of a handful of requests, or of a second or two, measures how the engine fills
its first batch and drains its last requests, not how it serves: one such run can differ from the next by
more than any knob does. A result is **too short to judge** below :data:`MIN_DURATION_S` seconds of the
engine's time or :data:`MIN_COMPLETED` completed requests. The benchmark's ``duration`` is in the
seconds of the clock that timed it: the wall clock, or a simulated engine's own clock
(:mod:`perflab.bench.simclock`), which the wall clock paces — either way a simulated host with
``time_scale: N`` runs N times faster than the engine it simulates, so its engine time is N × the
duration (the simulated clock leaves out only the machine's lag, it does not undo the time scale). The
shortest benchmark in the write-ups perflab imports lasted 7.8 s with 100 requests; both bounds stay
below that.

A fixed prompt count would make a faster configuration's benchmark shorter, so the floor would discard
the largest gains. The runner therefore sizes every benchmark to clear it: the bench sends the profile's
workload again, in rounds of fresh prompts, until the rounds have measured the floor
(:func:`floor_args`, :mod:`perflab.bench.rounds`) by the clock that times the result, so the floor it
reaches is the one the result is judged by; every round samples the same load, so a configuration
twice as fast measures the same quantity over twice as many rounds. :func:`sized_benchmark` says how a
configuration of a given speed is sized, and whether it could still end too short (only past the
bench's bound on requests in all).

A result can also have **ridden an earlier run's prefix cache**: the same prompts sent before on the
same engine (a search's screening with the tuning profile's seed did exactly that) are found cached,
and the run measures a prefill it did not do. Its engine's hit rate over the window is then above what
the run's own prompts can account for (``own_prefix_share``, :mod:`perflab.bench.prefix_share`) by more
than :data:`CACHE_RIDE_TOLERANCE_PCT` points.

The runner marks such results when it stores them (``too_short``, ``rode_cache``: the reason, with the
figures); a study measures such a configuration again instead of deciding on it, never publishes its
figures, and every page says why (:func:`unjudged_reason`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from perflab.bench.rounds import Floor, sized

MIN_DURATION_S = 5.0
MIN_COMPLETED = 50
TOO_SHORT = "too_short"
RODE_CACHE = "rode_cache"
# Points of hit rate above the run's own bound taken for an earlier run's cache: the bound counts prefixes
# to the character and the engine to its block, which can tip either way by a token or so a prompt.
CACHE_RIDE_TOLERANCE_PCT = 3.0
# The bench is asked for this much more than the floor, so no rounding leaves a result just under it.
MARGIN = 1.02


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


def cache_ride_reason(result: Mapping[str, Any]) -> str | None:
    """Why ``result`` rode an earlier run's prefix cache (None when its hit rate is within what its own
    prompts account for, or either figure is missing)."""
    hit_rate, own = _number(result.get("prefix_cache_hit_rate")), _number(result.get("own_prefix_share"))
    if hit_rate is None or own is None or hit_rate <= own + CACHE_RIDE_TOLERANCE_PCT:
        return None
    return (
        f"rode an earlier run's prefix cache: {hit_rate:.1f} % of its prompt tokens were found cached, where "
        f"its own prompts account for {own:.1f} % at most; its figures measure a prefill it did not do"
    )


def marked(result: Mapping[str, Any], time_scale: float = 1.0) -> dict[str, Any]:
    """``result`` with ``too_short`` and ``rode_cache`` set when it is (unchanged otherwise)."""
    marks = {TOO_SHORT: too_short_reason(result, time_scale), RODE_CACHE: cache_ride_reason(result)}
    return {**result, **{key: reason for key, reason in marks.items() if reason is not None}}


def short_reason(result: Mapping[str, Any] | None) -> str | None:
    """The reason a stored result was marked too short to judge, or None."""
    reason = (result or {}).get(TOO_SHORT)
    return reason if isinstance(reason, str) else None


def unjudged_reason(result: Mapping[str, Any] | None) -> str | None:
    """Why no decision or published figure may use a stored result: too short to judge, or riding an
    earlier run's prefix cache; None when it can be judged."""
    reason = short_reason(result) or (result or {}).get(RODE_CACHE)
    return reason if isinstance(reason, str) else None


def floor_args(time_scale: float = 1.0) -> list[str]:
    """The ``perflab bench`` flags that size a benchmark to clear the floor on a host running
    ``time_scale`` times faster than real time (the bench counts the seconds of the clock that times it,
    the ``duration`` :func:`too_short_reason` multiplies by ``time_scale``)."""
    return [
        "--perflab-min-duration",
        f"{MIN_DURATION_S * MARGIN / time_scale:.6g}",
        "--perflab-min-requests",
        str(MIN_COMPLETED),
    ]


@dataclass(frozen=True)
class BenchmarkSize:
    """How the runner sizes one benchmark: ``rounds`` of the profile's requests, ``duration_s`` of the
    engine's time and ``completed`` requests in all, and ``too_short``: the reason the result would be
    stored with, None when it can be judged."""

    rounds: int
    duration_s: float
    completed: int
    too_short: str | None


def sized_benchmark(round_s: float, per_round: int) -> BenchmarkSize:
    """How the runner sizes the benchmark of a configuration whose one pass of the profile (its
    ``per_round`` requests, each completing) lasts ``round_s`` seconds of the engine's time — for a
    configuration serving ``T`` tokens/s a profile of ``W`` tokens a pass, ``round_s = W / T`` — and
    whether it could still end too short to judge. Pure: the rule the bench applies as its rounds end
    (:func:`perflab.bench.rounds.sized`) under the floor the runner asks for (:func:`floor_args`), on
    rounds that all last alike. A configuration is censored (``too_short`` set) only when even the
    bench's bound on requests in all cannot reach the floor: ``round_s`` below about 5 ms a request."""
    if round_s <= 0 or per_round < 1:
        raise ValueError("a pass of the profile lasts a positive time and completes a request at least")
    size = sized(Floor(MIN_DURATION_S * MARGIN, MIN_COMPLETED), round_s, per_round)
    reason = too_short_reason({"duration": size.measured_s, "completed": size.completed})
    return BenchmarkSize(size.rounds, size.measured_s, size.completed, reason)
