"""The charts build valid Vega-Lite from the stored test runs and render to PNG."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from db import session as db_session
from perflab.chart_png import chart_png
from perflab.charts import compare as compare_charts
from perflab.charts import run as run_charts
from perflab.charts.datasets import length_histogram
from perflab.views import compare, timeline
from perflab.views.datasets import lengths_frame
from perflab.views.distributions import latency_values
from perflab.views.run_detail import RunDetail, load_run_detail
from tests.fixtures.ui_data import SeededDatabase

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def detail(seeded_database: SeededDatabase) -> RunDetail:
    with db_session.session_scope(db_session.get_engine(seeded_database.url)) as session:
        loaded = load_run_detail(session, seeded_database.runs.done)
    assert loaded is not None
    return loaded


def data_of(chart_dict: dict) -> list[dict]:  # type: ignore[type-arg]
    return [row for rows in chart_dict.get("datasets", {}).values() for row in rows]


def test_run_charts(detail: RunDetail) -> None:
    profile = detail.profiles[0]
    timeline = run_charts.throughput_timeline(profile.timeline).to_dict()
    assert len(timeline["vconcat"]) == 2
    assert {row["series"] for row in data_of(timeline)} == {"Output tokens/s", "Requests in flight"}

    assert run_charts.has_engine_samples(detail.samples) and run_charts.has_accelerator_samples(
        detail.samples
    )
    engine = run_charts.engine_timeline(detail.samples).to_dict()
    series = {row["series"] for row in data_of(engine)}
    assert {"Running requests", "Waiting requests (queue)", "replica 0"} <= series
    assert all(0 <= row["value"] <= 100 for row in data_of(engine) if row["series"] == "replica 0")
    gpus = run_charts.accelerator_timeline(detail.samples).to_dict()
    assert {row["series"] for row in data_of(gpus)} == {"GPU 0", "GPU 1"}
    assert len(gpus["vconcat"]) == 2  # no power, clock or temperature sampled: no empty charts for them

    values = latency_values(profile.records, "ttft")
    assert run_charts.latency_histogram(values, "ttft").to_dict()["encoding"]["x"]["bin"] == {"maxbins": 40}
    cdf = run_charts.latency_cdf(values, "ttft").to_dict()
    assert data_of(cdf)[-1]["fraction"] == 1.0
    scatter = run_charts.ttft_scatter(profile.records).to_dict()
    assert len(data_of(scatter)) == 60 and {row["outcome"] for row in data_of(scatter)} == {"ok"}
    assert scatter["params"][0]["bind"] == "legend"
    assert chart_png(run_charts.ttft_scatter(profile.records)).startswith(PNG_MAGIC)


def test_empty_samples_are_detected() -> None:
    empty = pd.DataFrame(columns=["t_s", "source"])
    assert not run_charts.has_engine_samples(empty) and not run_charts.has_accelerator_samples(empty)
    one_instant = pd.DataFrame(
        [{"t_s": 0.0, "source": "engine", "running": 1, "waiting": 0, "kv_cache_usage": 0.5}]
    )
    assert run_charts.has_samples(one_instant) and not run_charts.has_engine_samples(one_instant)
    engine_only = pd.concat([one_instant, one_instant.assign(t_s=2.0)], ignore_index=True)
    assert run_charts.has_engine_samples(engine_only) and not run_charts.has_accelerator_samples(engine_only)


def test_power_clock_and_temperature_are_charted_where_sampled() -> None:
    # The H200 recordings' idle and full-load readings (tests/data/nvidia-h200/power-under-load.jsonl).
    readings = [(0.0, 0.0, 77.78, 345, 34), (1.0, 100.0, 691.25, 1515, 58), (2.0, 100.0, 692.71, 1485, 56)]
    samples = pd.DataFrame(
        [
            {
                "t_s": t_s,
                "source": "accelerator",
                "gpu": 0,
                "utilization_pct": util,
                "memory_used_mib": 1011,
                "power_w": watts,
                "sm_clock_mhz": clock,
                "temperature_c": temp,
            }
            for t_s, util, watts, clock, temp in readings
        ]
    )
    chart = run_charts.accelerator_timeline(samples).to_dict()
    titles = [panel["encoding"]["y"]["title"] for panel in chart["vconcat"]]
    assert titles == [
        "Utilisation (%)",
        "Memory used (MiB)",
        "Power (W)",
        "SM clock (MHz)",
        "Temperature (°C)",
    ]
    assert sorted(row["value"] for row in data_of(chart) if row["value"] > 600 and row["value"] < 700) == [
        691.25,
        692.71,
    ]


def test_a_run_shorter_than_a_second_gets_a_readable_timeline() -> None:
    # 20 requests 20 ms apart, each streaming 10 chunks 10 ms apart after a 40 ms TTFT (130 ms long).
    records = pd.DataFrame(
        {
            "start_s": [index * 0.02 for index in range(20)],
            "ttft_ms": [40.0] * 20,
            "itl_ms": [[10.0] * 9] * 20,
            "e2el_ms": [130.0] * 20,
            "output_tokens": [10.0] * 20,
            "success": [True] * 20,
        }
    )
    built = timeline.from_records(records)
    assert built.bin_s == 0.02 and len(built.frame) == 26  # the last request ends at 0.51 s
    assert built.frame["output_tokens_per_s"].sum() * built.bin_s == pytest.approx(200.0)
    assert built.frame["requests_in_flight"].max() == 7
    chart = run_charts.throughput_timeline(built).to_dict()
    (tokens, flight) = chart["vconcat"]
    assert tokens["encoding"]["x"]["axis"]["format"] == ",.2f"
    assert tokens["encoding"]["x"]["title"] == "Time since the first request (s), 20 ms bins"
    assert tokens["encoding"]["y"]["axis"]["format"] == ",~r"
    assert chart_png(run_charts.throughput_timeline(built)).startswith(PNG_MAGIC)
    # Without records the bench's per-second series is drawn as it is.
    series = timeline.from_series([{"t": 0, "output_tokens": 400, "requests_in_flight": 20, "completed": 20}])
    assert series.bin_s == 1.0 and series.frame["output_tokens_per_s"].tolist() == [400]


def test_timeline_bins_each_request_s_chunks_at_their_own_times() -> None:
    # A: sent at 5 ms, chunks at 105, 205, 305 ms, 3 tokens. B: sent at 55 ms, chunks at 105 and 355 ms,
    # 4 tokens (2 per chunk). C failed: not counted. 10 ms bins (the run ends at 0.355 s).
    records = pd.DataFrame(
        {
            "start_s": [0.005, 0.055, 0.0],
            "ttft_ms": [100.0, 50.0, float("nan")],
            "itl_ms": [[100.0, 100.0], [250.0], []],
            "e2el_ms": [300.0, 300.0, float("nan")],
            "output_tokens": [3.0, 4.0, float("nan")],
            "success": [True, True, False],
        }
    )
    built = timeline.from_records(records)
    assert built.bin_s == 0.01 and len(built.frame) == 36
    tokens = dict(zip(built.frame.index, built.frame["output_tokens_per_s"] * built.bin_s, strict=True))
    assert {index: count for index, count in tokens.items() if count} == pytest.approx(
        {10: 3.0, 20: 1.0, 30: 1.0, 35: 2.0}
    )
    flight = built.frame["requests_in_flight"].tolist()
    assert flight[0] == 1 and flight[5:30] == [2] * 25 and flight[31:] == [1] * 5


def test_compare_charts(seeded_database: SeededDatabase) -> None:
    with db_session.session_scope(db_session.get_engine(seeded_database.url)) as session:
        compared = compare.load_compare(
            session, [*seeded_database.runs.imported[:4], seeded_database.runs.done]
        )
    bars = compare_charts.grouped_bars(
        compare.bars_frame(compared, "total_token_throughput"), "Total tok/s"
    ).to_dict()
    assert bars["encoding"]["xOffset"]["field"] == "run" and len(data_of(bars)) == 6
    points = compare.pareto_frame(
        compared,
        profile=compare.FIRST_RESULT,
        latency_key="mean_tpot_ms",
        throughput_key="total_token_throughput",
    )
    pareto = compare_charts.pareto_scatter(
        points, latency_title="Mean TPOT (ms)", throughput_title="Total tok/s"
    )
    layers = pareto.to_dict()["layer"]
    front_data = pareto.layer[0].data
    assert len(layers) == 2 and len(front_data) == int(points["on_front"].sum()) >= 1
    curves, _ = compare.cdf_frame(compared, profile=compare.FIRST_RESULT, metric="tpot")
    cdfs = compare_charts.overlaid_cdfs(curves, "TPOT (ms)")
    assert cdfs.to_dict()["encoding"]["color"]["field"] == "run"
    assert chart_png(pareto).startswith(PNG_MAGIC) and chart_png(cdfs).startswith(PNG_MAGIC)


def test_dataset_histogram() -> None:
    chart = length_histogram(lengths_frame([5, 9, 9, 120]))
    assert len(data_of(chart.to_dict())) == 4
    assert chart_png(chart).startswith(PNG_MAGIC)
    assert lengths_frame(None).empty and np.issubdtype(lengths_frame([1]).dtypes["tokens"], np.integer)
