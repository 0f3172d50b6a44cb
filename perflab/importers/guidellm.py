"""guidellm JSON reports: ``guidellm run … --output kind=json,path=report.json`` (guidellm 0.8, whose
``guidellm/cli/run.py`` replaced the ``guidellm benchmark … --output-path report.json`` of earlier releases;
the report's fields read here are the same in both).

Each entry of the report's ``benchmarks`` list becomes one result with vLLM's field names.
guidellm's metrics are distributions (``metrics.<name>.successful`` with mean, median, std_dev and
percentiles); the names map as DESIGN.md says: guidellm's ``inter_token_latency_ms`` is vLLM's TPOT
(excl. the first token), ``time_to_first_token_ms`` is TTFT and ``request_latency`` (seconds) is
E2EL. guidellm has no equivalent of vLLM's ITL, which stays absent. Throughputs are recomputed
the vLLM way, totals of successful requests over the benchmark duration.
"""

from __future__ import annotations

from typing import Any

from perflab.importers.model import ImportedResult, ImportFileError

# guidellm metric → (vLLM metric, scale to ms)
LATENCY_METRICS: tuple[tuple[str, str, float], ...] = (
    ("time_to_first_token_ms", "ttft", 1.0),
    ("inter_token_latency_ms", "tpot", 1.0),
    ("request_latency", "e2el", 1000.0),
)
# guidellm percentile key → vLLM percentile name
PERCENTILES: tuple[tuple[str, str], ...] = (
    ("p50", "p50"),
    ("p90", "p90"),
    ("p95", "p95"),
    ("p99", "p99"),
    ("p999", "p99.9"),
)


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _first(data: Any, paths: tuple[tuple[str, ...], ...]) -> Any:
    for path in paths:
        value = _get(data, *path)
        if value is not None:
            return value
    return None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _duration(benchmark: dict[str, Any]) -> float | None:
    duration = _number(benchmark.get("duration"))
    if duration is not None:
        return duration
    for start_path, end_path in (
        (("start_time",), ("end_time",)),
        (("scheduler_metrics", "measure_start_time"), ("scheduler_metrics", "measure_end_time")),
        (("run_stats", "start_time"), ("run_stats", "end_time")),
    ):
        start, end = _number(_get(benchmark, *start_path)), _number(_get(benchmark, *end_path))
        if start is not None and end is not None:
            return end - start
    return None


def _latencies(metrics: dict[str, Any]) -> dict[str, float]:
    values: dict[str, float] = {}
    for source, metric, scale in LATENCY_METRICS:
        summary = _get(metrics, source, "successful")
        if not isinstance(summary, dict):
            continue
        for stat, key in (("mean", "mean"), ("median", "median"), ("std", "std_dev")):
            number = _number(summary.get(key))
            if number is not None:
                values[f"{stat}_{metric}_ms"] = number * scale
        for source_key, name in PERCENTILES:
            number = _number(_get(summary, "percentiles", source_key))
            if number is not None:
                values[f"{name}_{metric}_ms"] = number * scale
    return values


def _strategy(benchmark: dict[str, Any]) -> dict[str, Any]:
    strategy = _first(benchmark, (("config", "strategy"), ("args", "strategy")))
    return strategy if isinstance(strategy, dict) else {}


def _load_fields(strategy: dict[str, Any]) -> dict[str, Any]:
    kind = strategy.get("type_")
    if kind == "synchronous":
        return {"max_concurrency": 1}
    if kind == "concurrent" and _number(strategy.get("streams")) is not None:
        return {"max_concurrency": int(strategy["streams"])}
    if kind in ("constant", "poisson") and _number(strategy.get("rate")) is not None:
        return {"request_rate": float(strategy["rate"])}
    return {}


def _profile_name(strategy: dict[str, Any]) -> str:
    """``guidellm constant 10 req/s``, ``guidellm concurrent 64``, ``guidellm synchronous``, …"""
    load = _load_fields(strategy)
    parts = ["guidellm", str(strategy.get("type_") or "").strip()]
    if "request_rate" in load:
        parts.append(f"{load['request_rate']:g} req/s")
    elif "max_concurrency" in load and strategy.get("type_") == "concurrent":
        parts.append(str(load["max_concurrency"]))
    return " ".join(part for part in parts if part)


def _benchmark_result(name: str, index: int, benchmark: Any, report: dict[str, Any]) -> ImportedResult:
    where = f"benchmark {index}"
    metrics = _get(benchmark, "metrics")
    if not isinstance(metrics, dict):
        raise ImportFileError(name, f"{where} of the guidellm report has no metrics")
    totals = _first(benchmark, (("metrics", "request_totals"), ("request_totals",))) or {}
    completed = _number(totals.get("successful"))
    duration = _duration(benchmark)
    if completed is None or duration is None or duration <= 0:
        raise ImportFileError(
            name, f"{where} of the guidellm report lacks request totals or a positive duration"
        )
    result: dict[str, Any] = {"completed": int(completed), "duration": duration}
    failed = _number(totals.get("errored"))
    if failed is not None:
        result["failed"] = int(failed)
    input_tokens = _number(_get(metrics, "prompt_token_count", "successful", "total_sum"))
    output_tokens = _number(_get(metrics, "output_token_count", "successful", "total_sum"))
    result["request_throughput"] = completed / duration
    if input_tokens is not None:
        result["total_input_tokens"] = round(input_tokens)
    if output_tokens is not None:
        result["total_output_tokens"] = round(output_tokens)
        result["output_throughput"] = output_tokens / duration
        if input_tokens is not None:
            result["total_token_throughput"] = (input_tokens + output_tokens) / duration
    peak_rate = _number(_get(metrics, "output_tokens_per_second", "successful", "max"))
    if peak_rate is not None:
        result["max_output_tokens_per_s"] = peak_rate
    peak_concurrency = _number(_get(metrics, "request_concurrency", "successful", "max"))
    if peak_concurrency is not None:
        result["max_concurrent_requests"] = peak_concurrency
    result.update(_latencies(metrics))
    strategy = _strategy(benchmark)
    result.update(_load_fields(strategy))
    model = _first(
        benchmark, (("config", "backend", "model"), ("worker", "backend_model"), ("args", "model"))
    )
    model = model or _get(report, "args", "model")
    if isinstance(model, str):
        result["model_id"] = model
    profile: dict[str, Any] = {"name": _profile_name(strategy), **_load_fields(strategy)}
    return ImportedResult(
        line=1, source_format="guidellm", result=result, profile=profile, label=profile["name"]
    )


def parse_guidellm(name: str, report: dict[str, Any]) -> list[ImportedResult]:
    """One result per benchmark of a guidellm report."""
    benchmarks = report.get("benchmarks")
    if not isinstance(benchmarks, list) or not benchmarks:
        raise ImportFileError(name, "the guidellm report has no benchmarks")
    return [
        _benchmark_result(name, index, benchmark, report) for index, benchmark in enumerate(benchmarks, 1)
    ]
