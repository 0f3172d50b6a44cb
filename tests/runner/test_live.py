"""The live view of a running benchmark from its progress history: rates, in flight, the measured
latency of the requests that ended and the time left, against hand-computed values."""

from __future__ import annotations

import pytest

from perflab.runner import live


def test_history_keeps_points_and_restarts_with_a_new_count() -> None:
    history: list[list[float]] = []
    for t in range(3):
        history = live.with_point(
            history,
            {
                "elapsed_s": t,
                "done": 5 * t,
                "failed": 0,
                "total": 9,
                "in_flight": 4,
                "e2el_sum_s": t,
                "e2el_n": t,
            },
        )
    assert history == [
        [0.0, 0.0, 0.0, 4.0, 0.0, 0.0],
        [1.0, 5.0, 0.0, 4.0, 1.0, 1.0],
        [2.0, 10.0, 0.0, 4.0, 2.0, 2.0],
    ]
    assert live.with_point(history, {"elapsed_s": 1, "done": 1}) == history  # a line without in_flight
    # a bench that reports no latency sums: the counts alone
    assert live.with_point(history, {"elapsed_s": 0.5, "done": 1, "failed": 0, "in_flight": 2}) == [
        [0.5, 1.0, 0.0, 2.0]
    ]
    long = [[float(t), float(t), 0.0, 1.0] for t in range(live.HISTORY_POINTS)]
    kept = live.with_point(long, {"elapsed_s": 9999, "done": 9999, "failed": 0, "in_flight": 1})
    assert len(kept) == live.HISTORY_POINTS and kept[-1][0] == 9999.0 and kept[0][0] == 1.0


def test_rates_and_latency_are_measured_over_the_smoothing_window() -> None:
    # 0→2 s: 8 requests end, their latencies summing to 24 s; 2→4 s: none ends; 4→5 s: 6 end (one
    # failed) whose five successes took 2.5 s in all.
    history = [
        [0.0, 0.0, 0.0, 16.0, 0.0, 0.0],
        [2.0, 8.0, 0.0, 12.0, 24.0, 8.0],
        [4.0, 8.0, 0.0, 12.0, 24.0, 8.0],
        [5.0, 14.0, 1.0, 3.0, 26.5, 13.0],
        [11.0, 20.0, 1.0, 0.0, 29.5, 19.0],
    ]
    assert live.SMOOTHING_S == 5.0
    frame = live.live_frame(history)
    assert frame["t"].tolist() == [2.0, 4.0, 5.0, 11.0]
    assert frame["requests_in_flight"].tolist() == [12.0, 12.0, 3.0, 0.0]
    # each point looks back to the last point at least 5 s older (the first one while there is none)
    assert frame["completed_per_s"].tolist() == pytest.approx([4.0, 2.0, 14 / 5, 6 / 6])
    latency = frame["latency_s"].tolist()
    assert latency[:3] == pytest.approx([3.0, 3.0, 26.5 / 13])
    assert latency[3] == pytest.approx(0.5)  # 5→11 s: 6 successes, 3 s in all
    no_sums = live.live_frame([row[:4] for row in history])
    assert no_sums["latency_s"].isna().all() and no_sums["completed_per_s"].tolist()[0] == 4.0
    assert live.live_frame([]).empty and live.live_frame([["x"]]).empty


def test_time_left_counts_from_the_first_completion_once_settled() -> None:
    # Latency 3 s, then 10 requests end each second: 1000 planned.
    history = [[0.0, 0.0, 0.0, 30.0]] + [[float(t), 10.0 * (t - 2), 0.0, 30.0] for t in range(3, 13)]
    # Since the first completion (t=3, 10 ended): 90 more in 9 s → 10/s; 900 left → 90 s.
    assert live.eta_s(history, 1000) == pytest.approx(90.0)
    # Not before 5 % of the plan ended after the first completions: the rate has not settled.
    assert live.eta_s(history[:6], 1000) is None  # 40 ended since, 50 needed
    assert live.eta_s(history[:7], 1000) == pytest.approx((1000 - 60) / 10)
    assert live.eta_s(history, 0) is None
    assert live.eta_s(history[:1], 20) is None
    assert live.eta_s([[0.0, 0.0, 0.0, 5.0], [3.0, 0.0, 0.0, 5.0]], 20) is None  # nothing ended yet
    assert live.eta_s([[0.0, 0.0, 0.0, 5.0], [3.0, 20.0, 0.0, 0.0]], 20) == 0.0


def test_once_every_request_is_sent_the_time_left_is_the_rest_of_one_latency() -> None:
    # A closed loop of 20 in flight, 100 planned: until t=5 five requests end each second, each having
    # taken 4 s (a slow start), then ten a second, each having taken 2 s. The last request goes out at
    # t=11 and ends at t=13.
    done = [0, 0, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90]
    e2el_sum = [0, 0, 20, 40, 60, 80, 100, 120, 140, 160, 180, 200, 220]
    history = [
        [float(t), float(ended), 0.0, float(min(20, 100 - ended)), float(e2el_sum[t]), float(ended)]
        for t, ended in enumerate(done)
    ]
    # t=10: 10 still to send: the requests left at the rate since the first completion (65 in 8 s)
    assert live.eta_s(history[:11], 100) == pytest.approx(30 / (65 / 8))
    # t=11: every request sent (at t=10 + 10 ÷ that rate, within the second: t=11); the last latencies
    # (t=6→11: 50 requests, 100 s) say it ends 2 s later
    assert live.eta_s(history[:12], 100) == pytest.approx(11.0 + 2.0 - 11.0)
    assert live.eta_s(history[:13], 100) == pytest.approx(11.0 + 2.0 - 12.0)
    # without latency sums: the requests left at the rate (here 1.2 s, where 1 s was left)
    assert live.eta_s([row[:4] for row in history], 100) == pytest.approx(10 / (85 / 10))


def test_a_profile_says_its_step_and_since_when() -> None:
    now = [100.0]
    tracked = live.ProfileProgress(50, clock=lambda: now[0])
    assert tracked.started() == {
        "done": 0, "failed": 0, "total": 50, "step": live.STARTING, "step_since": 100.0,
    }  # fmt: skip
    now[0] = 112.0
    warm = tracked.line(
        {"phase": "warmup", "done": 2, "failed": 0, "total": 5, "elapsed_s": 1.0, "in_flight": 3}
    )
    assert warm == {
        "done": 0, "failed": 0, "total": 50, "in_flight": 0, "warmup_done": 2, "warmup_total": 5,
        "step": live.WARMUP, "step_since": 112.0,
    }  # fmt: skip
    assert tracked.history == []  # the warm-up is not the profile's measured history
    now[0] = 115.0
    line = {"phase": "benchmark", "done": 10, "failed": 1, "total": 50, "elapsed_s": 2.0, "in_flight": 8}
    measuring = tracked.line(line)
    assert (
        "phase" not in measuring and measuring["step"] == live.MEASURING and measuring["step_since"] == 115.0
    )
    assert measuring["history"] == [[2.0, 10.0, 1.0, 8.0]]
    now[0] = 118.0
    draining = tracked.line({**line, "done": 42, "in_flight": 8, "elapsed_s": 5.0})
    assert (draining["step"], draining["step_since"]) == (live.DRAINING, 118.0)
    now[0] = 119.0
    assert tracked.line({**line, "done": 46, "in_flight": 4, "elapsed_s": 6.0})["step_since"] == 118.0
    now[0] = 120.0
    ended = tracked.line({**line, "done": 50, "in_flight": 0, "elapsed_s": 7.0})
    assert (ended["step"], ended["step_since"]) == (live.COLLECTING, 120.0)
