"""The metrics of a benchmark result: label, unit, group and which direction is better.

Result fields follow ``vllm bench serve --save-result`` (``{mean,median,std,pNN}_{ttft,tpot,itl,e2el}_ms``,
throughputs in tokens or requests per second). Higher throughput, goodput, completed requests and
success rate are better; lower latency and fewer failed requests are better; counts of tokens, the
duration and the spread (std) only describe the run and have no better direction. Cost per 1M tokens
and energy per token or request are better lower, tokens per joule higher (added to a result by
:mod:`perflab.views.cost`; they are not bench fields). The engine's own counts over a result's window —
prefix-cache hits, speculative-decoding acceptance — explain a result and have no better direction.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Direction = Literal["higher", "lower"] | None

LATENCY_NAMES: dict[str, str] = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2EL"}
_LATENCY_FIELD = re.compile(r"^(mean|median|std|p(\d+(?:\.\d+)?))_(ttft|tpot|itl|e2el)_ms$")
_STAT_ORDER = {"mean": 0.0, "median": 1.0, "std": 1000.0}


@dataclass(frozen=True)
class Metric:
    """One result field as shown to users."""

    key: str
    label: str
    unit: str
    group: str
    direction: Direction
    order: float


_FIXED: tuple[Metric, ...] = (
    Metric("total_token_throughput", "Total token throughput", "tok/s", "Throughput", "higher", 0),
    # Added to a result where runs of different budgets are compared (perflab.accelerators).
    Metric(
        "total_token_throughput_per_accelerator",
        "Total token throughput per accelerator",
        "tok/s",
        "Throughput",
        "higher",
        0.5,
    ),
    Metric("output_throughput", "Output token throughput", "tok/s", "Throughput", "higher", 1),
    Metric(
        "output_throughput_per_accelerator",
        "Output token throughput per accelerator",
        "tok/s",
        "Throughput",
        "higher",
        1.5,
    ),
    Metric("request_throughput", "Request throughput", "req/s", "Throughput", "higher", 2),
    Metric("request_goodput", "Request goodput", "req/s", "Throughput", "higher", 3),
    Metric("max_output_tokens_per_s", "Peak output token throughput", "tok/s", "Throughput", "higher", 4),
    Metric("max_concurrent_requests", "Peak concurrent requests", "", "Throughput", None, 5),
    Metric("success_rate", "Success rate", "%", "Requests", "higher", 10),
    Metric("completed", "Successful requests", "", "Requests", "higher", 11),
    Metric("failed", "Failed requests", "", "Requests", "lower", 12),
    Metric("duration", "Benchmark duration", "s", "Requests", None, 13),
    Metric("total_input_tokens", "Total input tokens", "", "Requests", None, 14),
    Metric("total_output_tokens", "Total generated tokens", "", "Requests", None, 15),
    # Cost and energy (perflab.cost): in the currency of hosts.yaml's prices, from sampled power.
    Metric("cost_per_mtok_total", "Cost per 1M tokens", "", "Cost", "lower", 20),
    Metric("cost_per_mtok_output", "Cost per 1M output tokens", "", "Cost", "lower", 21),
    Metric("output_tokens_per_joule", "Output tokens per joule", "tok/J", "Energy", "higher", 22),
    Metric("joules_per_output_token", "Energy per output token", "J", "Energy", "lower", 23),
    Metric("joules_per_request", "Energy per request", "J", "Energy", "lower", 24),
    Metric("mean_power_w_per_accelerator", "Mean power per accelerator", "W", "Energy", None, 25),
    # What the engine counted over the benchmark's window (perflab.bench.engine_metrics) and the usage's
    # cached tokens: they explain a result, so they have no better direction.
    Metric("prefix_cache_hit_rate", "Prefix-cache hit rate", "%", "Cache", None, 30),
    Metric("prefix_cache_hits", "Prompt tokens served from the prefix cache", "", "Cache", None, 31),
    Metric("prefix_cache_queries", "Prompt tokens looked up in the prefix cache", "", "Cache", None, 32),
    Metric("total_cached_tokens", "Cached prompt tokens (usage)", "", "Cache", None, 33),
    Metric("spec_decode_acceptance_rate", "Draft acceptance rate", "%", "Speculative decoding", None, 40),
    Metric("spec_decode_acceptance_length", "Acceptance length", "tok", "Speculative decoding", None, 41),
    Metric("spec_decode_num_drafts", "Drafts", "", "Speculative decoding", None, 42),
    Metric("spec_decode_draft_tokens", "Draft tokens", "", "Speculative decoding", None, 43),
    Metric("spec_decode_accepted_tokens", "Accepted tokens", "", "Speculative decoding", None, 44),
)
FIXED_METRICS: dict[str, Metric] = {metric.key: metric for metric in _FIXED}
LATENCY_GROUP_ORDER = {name: 100 + 100 * position for position, name in enumerate(LATENCY_NAMES)}

# The figures shown first wherever a result is summed up (cards, chart choices).
KEY_METRICS: tuple[str, ...] = (
    "total_token_throughput",
    "output_throughput",
    "request_throughput",
    "mean_ttft_ms",
    "mean_tpot_ms",
    "mean_itl_ms",
)


def latency_metric(key: str) -> Metric | None:
    """The metric of a latency field such as ``p99_ttft_ms``, or None for any other key."""
    match = _LATENCY_FIELD.match(key)
    if match is None:
        return None
    stat, percentile, name = match.group(1), match.group(2), match.group(3)
    short = LATENCY_NAMES[name]
    if percentile is not None:
        label, position = f"P{percentile} {short}", 2.0 + float(percentile) / 1000
    else:
        label, position = f"{stat.capitalize()} {short}", _STAT_ORDER[stat]
    direction: Direction = None if stat == "std" else "lower"
    return Metric(key, label, "ms", short, direction, LATENCY_GROUP_ORDER[name] + position)


def metric_for(key: str) -> Metric | None:
    """The metric called ``key``, or None when ``key`` is not a metric (e.g. ``model_id``)."""
    return FIXED_METRICS.get(key) or latency_metric(key)


def with_success_rate(result: Mapping[str, Any]) -> dict[str, Any]:
    """``result`` plus ``success_rate`` (percent) when both request counts are known."""
    values = dict(result)
    completed, failed = result.get("completed"), result.get("failed")
    if _is_number(completed) and _is_number(failed) and completed + failed > 0:
        values["success_rate"] = 100.0 * completed / (completed + failed)
    return values


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def result_metrics(results: Iterable[Mapping[str, Any]]) -> list[Metric]:
    """Every metric with a numeric value in at least one of ``results``, in display order."""
    found: dict[str, Metric] = {}
    for result in results:
        for key, value in with_success_rate(result).items():
            metric = metric_for(key)
            if metric is not None and _is_number(value):
                found[key] = metric
    return sorted(found.values(), key=lambda metric: (metric.order, metric.key))


def metric_value(result: Mapping[str, Any], key: str) -> float | None:
    """The numeric value of ``key`` in ``result`` (with the derived success rate), or None."""
    value = with_success_rate(result).get(key)
    return float(value) if _is_number(value) else None


def metric_heading(metric: Metric) -> str:
    """``Mean TTFT (ms)``, ``Total token throughput (tok/s)``."""
    return f"{metric.label} ({metric.unit})" if metric.unit else metric.label
