"""Metric names, directions and the seeds' number formats."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from perflab.views.compare import verdict
from perflab.views.formatting import (
    format_bytes,
    format_change,
    format_duration,
    format_metric,
    format_number,
    format_throughput,
    format_time,
    host_label,
    percent_change,
)
from perflab.views.metrics import metric_for, metric_value, result_metrics, with_success_rate


@pytest.mark.parametrize(
    ("key", "label", "unit", "direction"),
    [
        ("total_token_throughput", "Total token throughput", "tok/s", "higher"),
        ("mean_ttft_ms", "Mean TTFT", "ms", "lower"),
        ("median_tpot_ms", "Median TPOT", "ms", "lower"),
        ("p99.9_e2el_ms", "P99.9 E2EL", "ms", "lower"),
        ("std_itl_ms", "Std ITL", "ms", None),
        ("failed", "Failed requests", "", "lower"),
        ("duration", "Benchmark duration", "s", None),
    ],
)
def test_metric_names_units_and_directions(key: str, label: str, unit: str, direction: str | None) -> None:
    metric = metric_for(key)
    assert metric is not None
    assert (metric.label, metric.unit, metric.direction) == (label, unit, direction)


def test_non_metrics_are_ignored_and_order_is_stable() -> None:
    assert metric_for("model_id") is None and metric_for("p99_foo_ms") is None
    results = [
        {
            "p99_ttft_ms": 3.0,
            "mean_ttft_ms": 1.0,
            "p50_ttft_ms": 2.0,
            "model_id": "m",
            "completed": 9,
            "failed": 1,
        },
        {"total_token_throughput": 10.0, "mean_tpot_ms": None, "p90_tpot_ms": 4.0, "backend": "vllm"},
    ]
    assert [metric.key for metric in result_metrics(results)] == [
        "total_token_throughput",
        "success_rate",
        "completed",
        "failed",
        "mean_ttft_ms",
        "p50_ttft_ms",
        "p99_ttft_ms",
        "p90_tpot_ms",
    ]


def test_success_rate_is_derived_in_percent() -> None:
    assert with_success_rate({"completed": 3, "failed": 1})["success_rate"] == 75.0
    assert "success_rate" not in with_success_rate({"completed": 3})
    assert "success_rate" not in with_success_rate({"completed": 0, "failed": 0})
    assert metric_value({"completed": 1, "failed": 1}, "success_rate") == 50.0
    assert metric_value({"mean_ttft_ms": True}, "mean_ttft_ms") is None


def test_seed_000_numbers_format_as_printed() -> None:
    # seed 000: "Total TPS: 3019.19x2 (+59.2%)" against the baseline's 3792.50.
    node_total = 3019.19 * 2
    assert format_throughput(node_total, 2) == "3019.19×2"
    assert format_change(percent_change(node_total, 3792.50)) == "+59.2%"
    assert format_throughput(3792.5) == "3792.50"
    assert format_change(percent_change(150.72, 123.36)) == "+22.2%"
    assert format_change(percent_change(90.0, 100.0)) == "-10.0%"
    assert percent_change(1.0, 0.0) is None and percent_change(None, 1.0) is None
    assert format_change(None) == "—"


def test_a_change_that_prints_as_zero_is_no_change() -> None:
    # energy per token 0.4001 J against 0.4002 J: -0.02 %, printed +0.0 %, neither better nor worse
    change = percent_change(0.4001, 0.4002)
    assert change is not None and change < 0
    assert format_change(change) == "+0.0%"
    assert verdict(change, "lower") == "" and verdict(-change, "higher") == ""
    assert format_change(-0.06) == "-0.1%" and verdict(-0.06, "lower") == "better"
    assert verdict(0.06, "lower") == "worse"


def test_small_formats() -> None:
    assert format_number(None) == "—" and format_number(3) == "3" and format_number(float("inf")) == "inf"
    metric = metric_for("success_rate")
    assert metric is not None and format_metric(metric, 99.44) == "99.4 %"
    completed = metric_for("completed")
    assert completed is not None and format_metric(completed, 1000.0) == "1000"
    assert host_label("gpu-a", False) == "gpu-a" and host_label("local-sim", True) == "local-sim (simulated)"
    assert host_label(None, False) == "—"
    assert [format_bytes(size) for size in (512, 2048, 5 * 1024**2, 3 * 1024**3)] == [
        "512 B",
        "2.0 KiB",
        "5.0 MiB",
        "3.0 GiB",
    ]
    assert [format_duration(value) for value in (3.21, 75, 7300)] == ["3.2 s", "1 min 15 s", "2 h 1 min"]
    assert format_time(datetime(2025, 1, 31, 14, 5, 9, tzinfo=timezone.utc)) == "2025-01-31 14:05:09 UTC"
    assert format_time(None) == "—"
