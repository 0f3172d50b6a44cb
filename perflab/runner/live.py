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
  not their pace); once all are sent, the rest of the last one's latency (a closed loop drains its
  last requests together, not at that rate).
  It is given only once that rate rests on :data:`SETTLED_FRACTION` of the planned requests (and at
  least :data:`SETTLED_REQUESTS`); before that the page says it is estimating.
- A benchmark sized to a floor of evidence sends its requests in rounds (:mod:`perflab.bench.rounds`;
  its lines carry :class:`Rounds`): each round's requests are added to ``total`` as it begins, it
  drains its last requests as a closed loop does, and the bench prepares the next one while the floor
  is not reached. The time left is then the current round's (from its own points, as above) and the
  rounds the floor still asks for after it, each as long as this one and the mean pause between rounds
  (:func:`rounds_plan`); between rounds, as long as the mean round so far.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from perflab.bench.rounds import MAX_MEASURED_REQUESTS

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


# What a running profile is doing, in the order it happens (``run.progress["step"]``, with the wall-clock
# time it began in ``step_since``): the agent and the dataset shipped to the host and the prompts
# prepared, the warm-up requests, the measured requests, the last ones in flight once every request
# (of the round) was sent, the next round's prompts drawn while the floor of evidence is not reached,
# and the result written, fetched and stored.
STARTING = "starting the benchmark"
WARMUP = "warm-up"
MEASURING = "benchmarking"
DRAINING = "draining"
PREPARING = "preparing the next round"
COLLECTING = "collecting the result"


def _whole(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _seconds(value: Any) -> float | None:
    number = _number_or_none(value)
    return number if number is not None and number >= 0 else None


def _number_or_none(value: Any) -> float | None:
    try:
        return _number(value)
    except ValueError:
        return None


@dataclass(frozen=True)
class Rounds:
    """Where a benchmark sent in rounds stands (a progress line's ``rounds``, see
    :mod:`perflab.bench.progress`): round ``number`` (from 1) began after ``first`` requests had ended,
    at ``started_s`` of the line's ``elapsed_s``; the rounds that ended measured ``measured_s`` seconds
    and ``completed`` requests, with ``paused_s`` of pauses between them; the floor is
    ``min_duration_s`` and ``min_requests``; ``next``: a round ended and the next is being prepared."""

    number: int
    first: int
    started_s: float
    measured_s: float
    completed: int
    paused_s: float
    min_duration_s: float
    min_requests: int
    next: bool = False

    @classmethod
    def read(cls, value: Any) -> Rounds | None:
        """The rounds of a stored progress line, or None when it has none (or they do not read)."""
        if not isinstance(value, dict):
            return None
        counts = {key: _whole(value.get(key)) for key in ("number", "first", "completed", "min_requests")}
        times = {
            key: _seconds(value.get(key)) for key in ("started_s", "measured_s", "paused_s", "min_duration_s")
        }
        if any(found is None for found in (*counts.values(), *times.values())) or not counts["number"]:
            return None
        return cls(**counts, **times, next=value.get("next") is True)  # type: ignore[arg-type]

    def reached(self, measured_s: float, completed: float) -> bool:
        return measured_s >= self.min_duration_s and completed >= self.min_requests

    def floor_text(self, measured: bool = False) -> str:
        """``at least 5.1 s and at least 50 requests``; ``measured``: what the ended rounds measured of
        it, ``2.4 of at least 5.1 s and 40 of at least 50 requests measured``."""
        floors = (
            (self.min_duration_s, f"{self.measured_s:.1f}", f"{self.min_duration_s:.1f} s"),
            (self.min_requests, f"{self.completed}", f"{self.min_requests} requests"),
        )
        parts = [
            (f"{so_far} of " if measured else "") + f"at least {floor}"
            for wanted, so_far, floor in floors
            if wanted
        ]
        return " and ".join(parts) + (" measured" if measured else "")


@dataclass(frozen=True)
class RoundsPlan:
    """What a benchmark in rounds still has to do: ``round_left_s`` of the current round (0 between
    rounds), then ``more`` rounds of ``per_round`` requests, each ``each_s`` long with its pause."""

    round_left_s: float
    more: int
    per_round: int
    each_s: float

    @property
    def left_s(self) -> float:
        return self.round_left_s + self.more * self.each_s


class ProfileProgress:
    """The progress of one benchmark as the runner stores it: the step it is at and since when, and for
    the measured requests their counts and :func:`with_point` history; a warm-up line counts the
    warm-up apart (``warmup_done`` of ``warmup_total``), the measured counts staying at 0 of
    ``total``."""

    def __init__(self, total: int, clock: Callable[[], float] = time.time) -> None:
        self.total = total
        self.history: list[list[float]] = []
        self._clock = clock
        self.step = STARTING
        self.since = clock()

    def _at(self, step: str) -> dict[str, Any]:
        if step != self.step:
            self.step, self.since = step, self._clock()
        return {"step": self.step, "step_since": self.since}

    def started(self) -> dict[str, Any]:
        """The fields stored when the benchmark is being started."""
        return {"done": 0, "failed": 0, "total": self.total, **self._at(STARTING)}

    def line(self, values: dict[str, Any]) -> dict[str, Any]:
        """The fields stored for one of the bench's progress lines."""
        fields = {key: value for key, value in values.items() if key != "phase"}
        if values.get("phase") == "warmup":
            warmup = {"warmup_done": fields.get("done"), "warmup_total": fields.get("total")}
            return {"done": 0, "failed": 0, "total": self.total, "in_flight": 0, **warmup, **self._at(WARMUP)}
        self.history = with_point(self.history, fields)
        done, total, in_flight = (_count(fields.get(key)) for key in ("done", "total", "in_flight"))
        rounds = Rounds.read(fields.get("rounds"))
        if rounds is not None and rounds.next:
            step = PREPARING
        elif total and done >= total:
            step = COLLECTING
        elif total and in_flight and done + in_flight >= total:
            step = DRAINING
        else:
            step = MEASURING
        return {**fields, "history": self.history, **self._at(step)}


def _count(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


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


def _recent_latency_s(points: np.ndarray) -> float | None:
    """The mean end-to-end latency of the successful requests that ended over the last
    :data:`SMOOTHING_S` seconds, else of all that ended so far (None when the bench sent no sums)."""
    last = points[-1]
    if np.isnan(last[5]) or last[5] <= 0:
        return None
    older = points[points[:, 0] <= last[0] - SMOOTHING_S]
    if len(older) and not np.isnan(older[-1][5]) and last[5] > older[-1][5]:
        return float((last[4] - older[-1][4]) / (last[5] - older[-1][5]))
    return float(last[4] / last[5])


def eta_s(history: Any, total: int, rounds: Rounds | None = None) -> float | None:
    """Seconds until all ``total`` planned requests have ended — with ``rounds``, until the rounds the
    floor asks for have (:func:`rounds_plan`); None without a total, or while the rate they end at is
    not settled (see the module doc)."""
    if rounds is not None:
        plan = rounds_plan(history, total, rounds)
        return plan.left_s if plan is not None else None
    return _requests_left_s(_points(history), total)


def _requests_left_s(points: np.ndarray, total: int) -> float | None:
    """Seconds until all ``total`` requests counted by ``points`` have ended.

    While requests are still to be sent, the requests left end at the rate requests have ended since
    the first one did (with C in flight, that rate is C ÷ their latency: the last C are counted at it
    as the time they take). Once every request is sent, a closed loop drains its last requests
    together, not one after another at that rate: what is left is the rest of one latency — the mean
    end-to-end latency of the requests that ended lately — after the moment the last one was sent (at
    the rate alone when the bench sends no latency sums)."""
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
    rate = ended / elapsed
    unsent = total - points[:, 1] - points[:, 3]
    latency = _recent_latency_s(points)
    if unsent[-1] > 0 or latency is None:
        return (total - last[1]) / rate
    return max(0.0, _all_sent_s(points, unsent, rate) + latency - last[0])


def rounds_plan(history: Any, total: int, rounds: Rounds) -> RoundsPlan | None:
    """The rest of a benchmark in rounds (see the module doc): the current round's time left from its
    own points (its counts taken from where it began), and the rounds after it that the floor asks for,
    as the bench decides (:func:`perflab.bench.rounds.another_round`) — each as long as this round is
    (or, between rounds, as the mean round so far) with the mean pause between rounds, and completing
    as many requests. None while the current round's rate is not settled."""
    if rounds.next:
        ended = rounds.number
        per_round = max(total - rounds.first, 0)
        each_s, ok = rounds.measured_s / ended, rounds.completed / ended
        return _plan(rounds, 0.0, rounds.measured_s, rounds.completed, total, per_round, each_s, ok)
    points = _points(history)
    own = points[points[:, 0] >= rounds.started_s]
    per_round = total - rounds.first
    if not len(own) or per_round <= 0:
        return None
    shifted = own.copy()
    shifted[:, 1] -= rounds.first
    shifted[:, 2] -= own[0][2]
    round_left = _requests_left_s(shifted, per_round)
    if round_left is None:
        return None
    round_s = own[-1][0] - rounds.started_s + round_left
    ok = per_round - shifted[-1][2]
    measured_s, completed = rounds.measured_s + round_s, rounds.completed + ok
    return _plan(rounds, round_left, measured_s, completed, total, per_round, round_s, ok)


def _plan(
    rounds: Rounds,
    round_left_s: float,
    measured_s: float,
    completed: float,
    sent: int,
    per_round: int,
    round_s: float,
    ok: float,
) -> RoundsPlan:
    """The rounds after ``measured_s`` seconds and ``completed`` requests of ``sent`` that reach the
    floor at ``round_s`` and ``ok`` a round (none once a round completes nothing, none past
    :data:`~perflab.bench.rounds.MAX_MEASURED_REQUESTS`)."""
    more = 0
    if not rounds.reached(measured_s, completed) and ok > 0 and per_round > 0:
        by_time = math.ceil((rounds.min_duration_s - measured_s) / round_s) if round_s > 0 else math.inf
        by_count = math.ceil((rounds.min_requests - completed) / ok)
        wanted = max(by_time if measured_s < rounds.min_duration_s else 0, max(by_count, 0))
        more = int(min(wanted, max(MAX_MEASURED_REQUESTS - sent, 0) // per_round))
    pause = rounds.paused_s / (rounds.number - 1) if rounds.number > 1 else 0.0
    return RoundsPlan(round_left_s, more, per_round, round_s + pause)


def _all_sent_s(points: np.ndarray, unsent: np.ndarray, rate: float) -> float:
    """When the last request was sent: after the last point that still had some to send, as many
    seconds as those took at ``rate`` (within the second the points are apart)."""
    waiting = np.flatnonzero(unsent > 0)
    if not len(waiting):
        return float(points[0][0])
    before = waiting[-1]
    sent_at = points[before][0] + unsent[before] / rate
    return float(min(sent_at, points[before + 1][0]))
