"""The live view of a running benchmark from its progress history: rates, in flight, the Little's-law
latency estimate and the ETA, against hand-computed values."""

from __future__ import annotations

import math

import pytest

from perflab.runner import live


def test_history_keeps_points_and_restarts_with_a_new_count() -> None:
    history: list[list[float]] = []
    for t in range(3):
        history = live.with_point(
            history, {"elapsed_s": t, "done": 5 * t, "failed": 0, "total": 9, "in_flight": 4}
        )
    assert history == [[0.0, 0.0, 0.0, 4.0], [1.0, 5.0, 0.0, 4.0], [2.0, 10.0, 0.0, 4.0]]
    assert live.with_point(history, {"elapsed_s": 1, "done": 1}) == history  # a line without in_flight
    assert live.with_point(history, {"elapsed_s": 0.5, "done": 1, "failed": 0, "in_flight": 2}) == [
        [0.5, 1.0, 0.0, 2.0]
    ]
    long = [[float(t), float(t), 0.0, 1.0] for t in range(live.HISTORY_POINTS)]
    kept = live.with_point(long, {"elapsed_s": 9999, "done": 9999, "failed": 0, "in_flight": 1})
    assert len(kept) == live.HISTORY_POINTS and kept[-1][0] == 9999.0 and kept[0][0] == 1.0


def test_rates_latency_estimate_and_eta() -> None:
    # 0→2 s: 8 requests end (4/s) with 12 in flight → 3 s each; 2→4 s: none ends; 4→5 s: 6 end, 3 in flight.
    history = [[0.0, 0.0, 0.0, 16.0], [2.0, 8.0, 0.0, 12.0], [4.0, 8.0, 0.0, 12.0], [5.0, 14.0, 1.0, 3.0]]
    frame = live.live_frame(history)
    assert frame["t"].tolist() == [2.0, 4.0, 5.0]
    assert frame["completed_per_s"].tolist() == [4.0, 0.0, 6.0]
    assert frame["requests_in_flight"].tolist() == [12.0, 12.0, 3.0]
    latency = frame["latency_s"].tolist()
    assert latency[0] == pytest.approx(3.0) and math.isnan(latency[1]) and latency[2] == pytest.approx(0.5)
    # Last 10 s: 14 requests in 5 s (2.8/s); 20 - 14 = 6 left → 6 / 2.8 s.
    assert live.eta_s(history, 20) == pytest.approx(6 / 2.8)
    assert live.eta_s(history, 0) is None
    assert live.eta_s(history[:1], 20) is None
    assert live.eta_s([[0.0, 0.0, 0.0, 5.0], [3.0, 0.0, 0.0, 5.0]], 20) is None  # nothing ended yet
    assert live.live_frame([]).empty and live.live_frame([["x"]]).empty
