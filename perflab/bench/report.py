"""The benchmark's outputs: the JSON result and the ``vllm bench serve`` text block.

``build_result`` uses the field names of ``vllm bench serve --save-result`` (``ttfts``/``itls`` in
seconds, as vLLM writes them; ``server_queue_times``/``server_ttfts`` in seconds, only when the server
reported any, as vLLM 0.33.0's ``_get_server_metrics_results`` does) plus perflab's extras, listed in
docs/architecture.md.
``format_text_block(result)`` renders the "Serving Benchmark Result" block from such a result with the
labels, order and padding of vLLM 0.32.0 (``benchmark`` in ``vllm/benchmarks/serve.py``): one latency
section per metric of the result's ``percentile_metrics`` (all four for results that name none);
``partial_note(result)`` is the line that says a result covers only the requests that ended before the
bench was stopped, and ``format_failures(result)`` counts the failures by reason.
"""

from __future__ import annotations

import datetime
import math
from typing import Any, Dict, List, Optional, Sequence

from perflab import __version__
from perflab.bench.metrics import LATENCY_METRICS, Metrics
from perflab.bench.options import BenchOptions
from perflab.bench.records import RequestRecord

METRIC_HEADERS = {
    "ttft": ("TTFT", "Time to First Token"),
    "tpot": ("TPOT", "Time per Output Token (excl. 1st token)"),
    "itl": ("ITL", "Inter-token Latency"),
    "e2el": ("E2EL", "End-to-end Latency"),
}


def percentile_label(pct: float) -> str:
    """``99.0`` → ``"99"``, ``99.9`` → ``"99.9"`` (vLLM's key and label spelling)."""
    return str(int(pct)) if int(pct) == pct else str(pct)


def _json_number(value: float) -> Any:
    return "inf" if math.isinf(value) else value


def latency_fields(metrics: Metrics) -> Dict[str, float]:
    fields: Dict[str, float] = {}
    for name in LATENCY_METRICS:
        summary = metrics.latency[name]
        fields[f"mean_{name}_ms"] = summary.mean_ms
        fields[f"median_{name}_ms"] = summary.median_ms
        fields[f"std_{name}_ms"] = summary.std_ms
        for pct, value in summary.percentiles_ms:
            fields[f"p{percentile_label(pct)}_{name}_ms"] = value
    return fields


# The measured requests' first send and last receive on the bench process's perf_counter clock (the
# clock of its progress lines' ``clock_s``): the window over which energy is read.
CLOCK_WINDOW_KEY = "bench_clock_window_s"
# A simulated engine's energy over the measured rounds, on its own clock (MeasuredRounds.simulated_energy).
SIM_ENERGY_KEY = "simulated_energy"


def server_metric_arrays(records: Sequence[RequestRecord]) -> Dict[str, List[Optional[float]]]:
    """``server_queue_times`` and ``server_ttfts`` (seconds, None where a request had none), or nothing
    when no request carried the server's timings."""
    if all(record.server_queue_s is None and record.server_ttft_s is None for record in records):
        return {}
    return {
        "server_queue_times": [record.server_queue_s for record in records],
        "server_ttfts": [record.server_ttft_s for record in records],
    }


def total_cached_tokens(records: Sequence[RequestRecord]) -> Optional[int]:
    """The prompt tokens successful requests found in the server's cache, as their usage reported
    them; None when no request's usage did."""
    cached = [
        record.cached_tokens for record in records if record.success and record.cached_tokens is not None
    ]
    return sum(cached) if cached else None


def build_result(
    options: BenchOptions,
    metrics: Metrics,
    records: Sequence[RequestRecord],
    tokenizer_id: str,
    input_tokens_source: str,
    input_tokens_check: Optional[Dict[str, Any]],
    dispatch_lag: Dict[str, float],
    timing: Dict[str, Any],
    notes: List[str],
) -> Dict[str, Any]:
    """The JSON result of one run."""
    backend = options.backend_name
    result: Dict[str, Any] = {
        "date": datetime.datetime.now().strftime("%Y%m%d-%H%M%S"),
        "backend": backend,
        "endpoint_type": backend,
        "label": options.label,
        "model_id": options.model,
        "tokenizer_id": tokenizer_id,
        "num_prompts": options.num_prompts,
        "request_rate": _json_number(options.request_rate),
        "burstiness": _json_number(options.burstiness),
        "max_concurrency": options.max_concurrency,
        "duration": metrics.duration_s,
        "completed": metrics.completed,
        "failed": metrics.failed,
        "total_input_tokens": metrics.total_input_tokens,
        "total_output_tokens": metrics.total_output_tokens,
        "request_throughput": metrics.request_throughput,
        "request_goodput": metrics.request_goodput,
        "output_throughput": metrics.output_throughput,
        "total_token_throughput": metrics.total_token_throughput,
        "max_output_tokens_per_s": metrics.max_output_tokens_per_s,
        "max_concurrent_requests": metrics.max_concurrent_requests,
    }
    result.update(latency_fields(metrics))
    result.update(server_metric_arrays(records))
    result.update(
        {
            "input_tokens_definition": metrics.input_tokens_definition,
            "total_usage_input_tokens": metrics.input_tokens_by_definition["usage"],
            "total_prompt_input_tokens": metrics.input_tokens_by_definition["prompt"],
            "peak_concurrency_definition": metrics.peak_concurrency_definition,
            "max_requests_per_second_bucket": metrics.concurrency_by_definition["per-second"],
            "max_overlapping_requests": metrics.concurrency_by_definition["exact"],
            "input_lens": [record.input_tokens_as(options.input_tokens) for record in records],
            "output_lens": [record.output_tokens for record in records],
            "ttfts": [record.ttft_s or 0.0 for record in records],
            "itls": [record.itl_s for record in records],
            "errors": [record.error or "" for record in records],
            "perflab_version": __version__,
            "percentiles": list(options.percentiles),
            "percentile_metrics": list(options.percentile_metrics),
            "goodput_slos": dict(options.goodput),
            "warmup_requests": options.warmup,
            "ramp_up_seconds": options.ramp_up_seconds,
            "dataset": {
                "name": options.dataset,
                "path": options.dataset_path,
                "input_len": options.input_len,
                "output_len": options.output_len,
                "range_ratio": options.range_ratio,
                "prefix_len": options.prefix_len,
                "seed": options.seed,
                **options.workload_fields(),
            },
            "input_tokens_source": input_tokens_source,
            "input_tokens_check": input_tokens_check,
            "dispatch_lag_ms": dispatch_lag,
            "timing_source": timing["timing_source"],
            "preconnected": timing["preconnected"],
            "coalesced_chunks": timing["coalesced_chunks"],
            "total_cached_tokens": total_cached_tokens(records),
            "output_tokens_source": metrics.output_tokens_source,
            "failure_reasons": metrics.failure_reasons,
            "timeseries": metrics.timeseries,
            "requests": [record.to_json(options.input_tokens) for record in records],
            "base_urls": list(options.base_urls),
            "notes": list(notes),
            "bench_args": options.to_argv(),
        }
    )
    return result


def _line(label: str, value: Any) -> str:
    if isinstance(value, float):
        return "{:<40} {:<10.2f}".format(label, value)
    return "{:<40} {:<10}".format(label, value)


def format_text_block(result: Dict[str, Any]) -> str:
    """The "Serving Benchmark Result" block of a JSON result."""
    lines = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")]
    lines.append(_line("Successful requests:", result["completed"]))
    lines.append(_line("Failed requests:", result["failed"]))
    if result.get("max_concurrency") is not None:
        lines.append(_line("Maximum request concurrency:", result["max_concurrency"]))
    if result.get("request_rate") not in (None, "inf"):
        lines.append(_line("Request rate configured (RPS):", float(result["request_rate"])))
    lines.append(_line("Benchmark duration (s):", float(result["duration"])))
    lines.append(_line("Total input tokens:", result["total_input_tokens"]))
    lines.append(_line("Total generated tokens:", result["total_output_tokens"]))
    lines.append(_line("Request throughput (req/s):", float(result["request_throughput"])))
    if result.get("request_goodput") is not None:
        lines.append(_line("Request goodput (req/s):", float(result["request_goodput"])))
    lines.append(_line("Output token throughput (tok/s):", float(result["output_throughput"])))
    lines.append(_line("Peak output token throughput (tok/s):", float(result["max_output_tokens_per_s"])))
    lines.append(_line("Peak concurrent requests:", float(result["max_concurrent_requests"])))
    lines.append(_line("Total token throughput (tok/s):", float(result["total_token_throughput"])))
    percentiles = result.get("percentiles") or []
    selected = result.get("percentile_metrics") or LATENCY_METRICS
    for name in (metric for metric in LATENCY_METRICS if metric in selected):
        short, header = METRIC_HEADERS[name]
        lines.append("{s:{c}^{n}}".format(s=header, n=50, c="-"))
        lines.append(_line(f"Mean {short} (ms):", float(result[f"mean_{name}_ms"])))
        lines.append(_line(f"Median {short} (ms):", float(result[f"median_{name}_ms"])))
        for pct in percentiles:
            label = percentile_label(float(pct))
            lines.append(_line(f"P{label} {short} (ms):", float(result[f"p{label}_{name}_ms"])))
    lines.extend(_spec_decode_lines(result))
    lines.append("=" * 50)
    # perflab's own sections follow vLLM's block, so the block reads line for line as `vllm bench serve`'s.
    extra = _cache_and_session_lines(result)
    if extra:
        lines.extend(extra)
        lines.append("=" * 50)
    return "\n".join(lines) + "\n"


def _spec_decode_lines(result: Dict[str, Any]) -> List[str]:
    """vLLM 0.33.0's "Speculative Decoding" section, when the result has its fields."""
    if result.get("spec_decode_acceptance_rate") is None:
        return []
    lines = ["{s:{c}^{n}}".format(s="Speculative Decoding", n=50, c="-")]
    lines.append(_line("Acceptance rate (%):", float(result["spec_decode_acceptance_rate"])))
    lines.append(_line("Acceptance length:", float(result["spec_decode_acceptance_length"])))
    lines.append(_line("Drafts:", int(result["spec_decode_num_drafts"])))
    lines.append(_line("Draft tokens:", int(result["spec_decode_draft_tokens"])))
    lines.append(_line("Accepted tokens:", int(result["spec_decode_accepted_tokens"])))
    per_position = result.get("spec_decode_per_position_acceptance_rates") or []
    if per_position:
        lines.append("Per-position acceptance (%):")
        for index, rate in enumerate(per_position):
            lines.append(_line(f"  Position {index}:", float(rate) * 100.0))
    return lines


def _cache_and_session_lines(result: Dict[str, Any]) -> List[str]:
    """perflab's "Rounds", "Prefix Cache" and "Sessions" sections (after vLLM's block), when the result
    has their figures."""
    lines: List[str] = []
    rounds = result.get("rounds")
    if isinstance(rounds, dict) and rounds.get("count", 1) > 1:
        lines.append("{s:{c}^{n}}".format(s="Rounds", n=50, c="-"))
        lines.append(_line(f"Rounds of {rounds['prompts_per_round']} fresh prompts:", rounds["count"]))
        lines.append(_line("Pauses between rounds (s, left out):", float(rounds["paused_s"])))
    if result.get("prefix_cache_hit_rate") is not None:
        lines.append("{s:{c}^{n}}".format(s="Prefix Cache", n=50, c="-"))
        lines.append(_line("Prefix cache hit rate (%):", float(result["prefix_cache_hit_rate"])))
        lines.append(_line("Prompt tokens from the cache:", int(result["prefix_cache_hits"])))
    sessions = result.get("sessions")
    if sessions:
        lines.append("{s:{c}^{n}}".format(s="Sessions", n=50, c="-"))
        lines.append(_line("Completed sessions:", f"{sessions['completed']} of {sessions['count']}"))
        lines.append(_line("Mean session duration (ms):", float(sessions["duration_ms"]["mean"])))
        if sessions.get("goodput") is not None:
            lines.append(_line("Session goodput (sessions/s):", float(sessions["goodput"])))
        for row in result.get("ttft_by_turn_ms") or []:
            lines.append(_line(f"Mean TTFT turn {row['turn'] + 1} (ms):", float(row["mean_ttft_ms"])))
    return lines


def format_failures(result: Dict[str, Any]) -> str:
    """One line per failure reason with its count and first message; empty when nothing failed."""
    reasons: Dict[str, int] = result.get("failure_reasons") or {}
    if not reasons:
        return ""
    examples: Dict[str, str] = {}
    for record in result.get("requests", []):
        reason = record.get("reason")
        if reason and reason not in examples:
            examples[reason] = record.get("error") or ""
    total = result["failed"] + result["completed"]
    lines = [f"Failed requests by reason ({result['failed']} of {total}):"]
    for reason, count in sorted(reasons.items(), key=lambda item: (-item[1], item[0])):
        example = examples.get(reason)
        lines.append(f"  {reason}: {count}" + (f" (first: {example})" if example else ""))
    return "\n".join(lines) + "\n"


def partial_note(result: Dict[str, Any]) -> str:
    """``Partial result: 40 of 200 requests ended before the run stopped (received SIGTERM).`` for a
    result marked ``partial``."""
    sent = result.get("requests_sent")
    unfinished = result.get("requests_unfinished")
    if isinstance(sent, int) and isinstance(unfinished, int):
        # over rounds the requests sent so far, else the run's count
        planned = sent if isinstance(result.get("rounds"), dict) else result.get("num_prompts", sent)
        ended = f"{sent - unfinished} of {planned} requests ended"
    else:
        ended = "only some of the requests ended"
    reason = result.get("partial_reason") or "no reason recorded"
    return f"Partial result: {ended} before the run stopped ({reason})."


def nothing_sent(result: Dict[str, Any]) -> bool:
    """Whether no request of the result reached a server (every one failed to connect): the bench
    then exits 1."""
    return not any(
        record["error"] is None or record["reason"] != "connect_error"
        for record in result.get("requests") or []
    )
