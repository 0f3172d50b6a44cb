"""Engine statistics and their Prometheus text exposition, under each engine's real metric names.

:class:`MetricsRecorder` keeps counters and histograms of what the simulated engine did;
:func:`render_prometheus` writes them with the names of one engine flavour (see
``docs/simulator.md`` for the table): ``vllm:*`` for vLLM and vLLM-Ascend, ``sglang:*`` for
SGLang, MindIE's unprefixed names, and ``trtllm_*`` for TensorRT-LLM (served on
``/prometheus/metrics``; its ``/metrics`` is the JSON iteration-stats list of
:func:`trtllm_iteration_stats`).
"""

from __future__ import annotations

import bisect
import time
from typing import Dict, Iterable, List, Sequence, Tuple

# Bucket bounds of vLLM's histograms (seconds).
# fmt: off
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0)
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                   240.0, 480.0, 960.0, 1920.0, 7680.0)
# fmt: on


class Histogram:
    """A cumulative Prometheus histogram."""

    __slots__ = ("bounds", "counts", "total", "count")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float, times: int = 1) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += times
        self.total += value * times
        self.count += times


class MetricsRecorder:
    """What the engine did since start: requests, tokens, latencies, cache and preemption counts."""

    def __init__(self) -> None:
        self.received = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.finished: Dict[str, int] = {"stop": 0, "length": 0, "abort": 0}
        self.preemptions = 0
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.spec_tokens = 0
        self.spec_drafts = 0
        self.spec_draft_tokens = 0
        self.spec_accepted = 0
        self.spec_accepted_per_position: List[int] = []
        self.iterations = 0
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.e2e = Histogram(REQUEST_BUCKETS)
        self.queue = Histogram(REQUEST_BUCKETS)
        self._window: List[Tuple[float, int]] = []

    def on_tokens(self, count: int, now: float) -> None:
        self.generation_tokens += count
        self._window.append((now, count))
        if len(self._window) > 4096:
            del self._window[:2048]

    def enable_speculation(self, tokens: int) -> None:
        """Count speculative decoding with ``tokens`` draft positions (vLLM shows its counters then)."""
        self.spec_tokens = tokens
        self.spec_accepted_per_position = [0] * tokens

    def on_verification(self, drafted: int, accepted: int) -> None:
        """One sequence's verification step: ``drafted`` draft tokens, the first ``accepted`` kept."""
        self.spec_drafts += 1
        self.spec_draft_tokens += drafted
        self.spec_accepted += accepted
        for position in range(accepted):
            self.spec_accepted_per_position[position] += 1

    @property
    def prefix_hit_rate(self) -> float:
        """Share of queried prompt tokens found in the prefix cache (0 before any query)."""
        return self.prefix_hits / self.prefix_queries if self.prefix_queries else 0.0

    def generation_throughput(self, now: float, span: float = 5.0) -> float:
        """Tokens per second over the last ``span`` seconds of loop time."""
        start = now - span
        return sum(count for when, count in self._window if when >= start) / span


class EngineGauges:
    """The instantaneous state the gauges show."""

    __slots__ = ("running", "waiting", "kv_used_tokens", "kv_capacity_tokens", "block_size")

    def __init__(
        self,
        running: int = 0,
        waiting: int = 0,
        kv_used_tokens: int = 0,
        kv_capacity_tokens: int = 0,
        block_size: int = 16,
    ) -> None:
        self.running = running
        self.waiting = waiting
        self.kv_used_tokens = kv_used_tokens
        self.kv_capacity_tokens = kv_capacity_tokens
        self.block_size = block_size

    @property
    def kv_usage(self) -> float:
        return self.kv_used_tokens / self.kv_capacity_tokens if self.kv_capacity_tokens else 0.0

    @classmethod
    def total(cls, parts: Iterable["EngineGauges"]) -> "EngineGauges":
        """The sum of several schedulers' gauges (replicas, attention ranks)."""
        total = cls()
        for part in parts:
            total.running += part.running
            total.waiting += part.waiting
            total.kv_used_tokens += part.kv_used_tokens
            total.kv_capacity_tokens += part.kv_capacity_tokens
            total.block_size = part.block_size
        return total


# What each metric shows: source value → (Prometheus type, help text). "finished" is a counter
# labelled with finished_reason.
SOURCES: Dict[str, Tuple[str, str]] = {
    "running": ("gauge", "Number of requests currently running (in the model execution batch)."),
    "waiting": ("gauge", "Number of requests waiting to be processed."),
    "kv_usage": ("gauge", "KV-cache usage. 1 means 100 percent usage."),
    "kv_used_tokens": ("gauge", "The number of used tokens."),
    "gen_throughput": ("gauge", "The generation throughput (token/s)."),
    "hit_rate": ("gauge", "Prefix cache hit rate."),
    "zero": ("gauge", "Not simulated; always 0."),
    "preemptions": ("counter", "Cumulative number of preemptions from the engine."),
    "prefix_queries": ("counter", "Prefix cache queries, in terms of number of queried tokens."),
    "prefix_hits": ("counter", "Prefix cache hits, in terms of number of cached tokens."),
    "cached_tokens": ("cache_source", "Number of cached prompt tokens by source (device/host/storage)."),
    "spec_drafts": ("speculative", "Number of spec decoding drafts."),
    "spec_draft_tokens": ("speculative", "Number of draft tokens."),
    "spec_accepted": ("speculative", "Number of accepted tokens."),
    "spec_per_position": ("per_position", "Accepted tokens per draft position."),
    "prompt_tokens": ("counter", "Number of prefill tokens processed."),
    "generation_tokens": ("counter", "Number of generation tokens processed."),
    "received": ("counter", "Count of received requests."),
    "completed": ("counter", "Count of successfully processed requests."),
    "finished": ("finished", "Count of successfully processed requests."),
    "ttft": ("histogram", "Histogram of time to first token in seconds."),
    "itl": ("histogram", "Histogram of inter-token latency (time per output token) in seconds."),
    "e2e": ("histogram", "Histogram of end to end request latency in seconds."),
    "queue": ("histogram", "Histogram of time spent waiting in the queue in seconds."),
}
# Each engine's metric names: (name, source).
_VLLM = [
    ("vllm:num_requests_running", "running"),
    ("vllm:num_requests_waiting", "waiting"),
    ("vllm:kv_cache_usage_perc", "kv_usage"),
    ("vllm:gpu_cache_usage_perc", "kv_usage"),
    ("vllm:num_preemptions_total", "preemptions"),
    ("vllm:prefix_cache_queries_total", "prefix_queries"),
    ("vllm:prefix_cache_hits_total", "prefix_hits"),
    ("vllm:spec_decode_num_drafts_total", "spec_drafts"),
    ("vllm:spec_decode_num_draft_tokens_total", "spec_draft_tokens"),
    ("vllm:spec_decode_num_accepted_tokens_total", "spec_accepted"),
    ("vllm:spec_decode_num_accepted_tokens_per_pos_total", "spec_per_position"),
    ("vllm:prompt_tokens_total", "prompt_tokens"),
    ("vllm:generation_tokens_total", "generation_tokens"),
    ("vllm:request_success_total", "finished"),
    ("vllm:time_to_first_token_seconds", "ttft"),
    ("vllm:inter_token_latency_seconds", "itl"),
    ("vllm:time_per_output_token_seconds", "itl"),
    ("vllm:e2e_request_latency_seconds", "e2e"),
    ("vllm:request_queue_time_seconds", "queue"),
]
_SGLANG = [
    ("sglang:num_running_reqs", "running"),
    ("sglang:num_queue_reqs", "waiting"),
    ("sglang:num_used_tokens", "kv_used_tokens"),
    ("sglang:token_usage", "kv_usage"),
    ("sglang:gen_throughput", "gen_throughput"),
    ("sglang:cache_hit_rate", "hit_rate"),
    ("sglang:prompt_tokens_total", "prompt_tokens"),
    ("sglang:cached_tokens_total", "cached_tokens"),
    ("sglang:generation_tokens_total", "generation_tokens"),
    ("sglang:num_requests_total", "completed"),
    ("sglang:time_to_first_token_seconds", "ttft"),
    ("sglang:inter_token_latency_seconds", "itl"),
    ("sglang:e2e_request_latency_seconds", "e2e"),
    ("sglang:queue_time_seconds", "queue"),
]
_MINDIE = [
    ("request_received_total", "received"),
    ("request_success_total", "completed"),
    ("prompt_tokens_total", "prompt_tokens"),
    ("generation_tokens_total", "generation_tokens"),
    ("num_requests_running", "running"),
    ("num_requests_waiting", "waiting"),
    ("num_requests_swapped", "zero"),
    ("avg_generation_throughput_toks_per_s", "gen_throughput"),
    ("failed_request_perc", "zero"),
    ("npu_cache_usage_perc", "kv_usage"),
    ("cpu_cache_usage_perc", "zero"),
    ("npu_prefix_cache_hit_rate", "hit_rate"),
    ("time_to_first_token_seconds", "ttft"),
    ("time_per_output_token_seconds", "itl"),
    ("e2e_request_latency_seconds", "e2e"),
]
_TRTLLM = [
    ("trtllm_request_success_total", "finished"),
    ("trtllm_num_requests_running", "running"),
    ("trtllm_num_requests_waiting", "waiting"),
    ("trtllm_kv_cache_utilization", "kv_usage"),
    ("trtllm_kv_cache_hit_rate", "hit_rate"),
    ("trtllm_time_to_first_token_seconds", "ttft"),
    ("trtllm_time_per_output_token_seconds", "itl"),
    ("trtllm_e2e_request_latency_seconds", "e2e"),
    ("trtllm_request_queue_time_seconds", "queue"),
]
METRIC_TABLES = {"vllm": _VLLM, "vllm-ascend": _VLLM, "sglang": _SGLANG, "mindie": _MINDIE, "trtllm": _TRTLLM}


def metric_names(flavour: str) -> List[str]:
    """The metric names an engine flavour exposes (for documentation and tests)."""
    return [name for name, _ in METRIC_TABLES[flavour]]


def _values(recorder: MetricsRecorder, gauges: EngineGauges, now: float) -> Dict[str, object]:
    return {
        "running": gauges.running,
        "waiting": gauges.waiting,
        "kv_usage": gauges.kv_usage,
        "kv_used_tokens": gauges.kv_used_tokens,
        "gen_throughput": recorder.generation_throughput(now),
        "hit_rate": recorder.prefix_hit_rate,
        "preemptions": recorder.preemptions,
        "prefix_queries": recorder.prefix_queries,
        "prefix_hits": recorder.prefix_hits,
        "cached_tokens": recorder.prefix_hits,
        "spec_drafts": recorder.spec_drafts,
        "spec_draft_tokens": recorder.spec_draft_tokens,
        "spec_accepted": recorder.spec_accepted,
        "spec_per_position": recorder.spec_accepted_per_position,
        "prompt_tokens": recorder.prompt_tokens,
        "generation_tokens": recorder.generation_tokens,
        "received": recorder.received,
        "completed": recorder.finished["stop"] + recorder.finished["length"],
        "finished": recorder.finished,
        "zero": 0,
        "ttft": recorder.ttft,
        "itl": recorder.itl,
        "e2e": recorder.e2e,
        "queue": recorder.queue,
    }


def _labels(base: str, key: str = "", value: object = "") -> str:
    parts = [f'{key}="{value}"'] if key else []
    parts.append(base)
    return "{" + ",".join(parts) + "}"


def _number(value: float) -> str:
    return repr(float(value))


def render_prometheus(
    flavour: str, model_name: str, recorder: MetricsRecorder, gauges: EngineGauges, now: float
) -> str:
    """Prometheus text exposition (format 0.0.4) of one engine flavour."""
    quoted = model_name.replace("\\", "\\\\").replace('"', '\\"')
    base = {
        "vllm": f'engine="0",model_name="{quoted}"',
        "vllm-ascend": f'engine="0",model_name="{quoted}"',
        "trtllm": f'model_name="{quoted}",engine_type="trtllm"',
    }.get(flavour, f'model_name="{quoted}"')
    values = _values(recorder, gauges, now)
    lines: List[str] = []
    for name, source in METRIC_TABLES[flavour]:
        value = values[source]
        kind, help_text = SOURCES[source]
        if kind in ("speculative", "per_position") and not recorder.spec_tokens:
            continue
        prom_type = "histogram" if kind == "histogram" else "gauge" if kind == "gauge" else "counter"
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {prom_type}")
        if kind == "histogram":
            lines.extend(_histogram_lines(name, base, value))  # type: ignore[arg-type]
        elif kind == "finished":
            for reason, count in value.items():  # type: ignore[union-attr]
                lines.append(f"{name}{_labels(base, 'finished_reason', reason)} {_number(count)}")
        elif kind == "per_position":
            for position, count in enumerate(value):  # type: ignore[arg-type]
                lines.append(f"{name}{_labels(base, 'position', position)} {_number(count)}")
        elif kind == "cache_source":
            lines.append(f"{name}{_labels(base, 'cache_source', 'device')} {_number(value)}")  # type: ignore[arg-type]
        else:
            lines.append(f"{name}{_labels(base)} {_number(value)}")  # type: ignore[arg-type]
    return "\n".join(lines) + "\n"


def _histogram_lines(name: str, base: str, histogram: Histogram) -> List[str]:
    lines = []
    cumulative = 0
    for index, bound in enumerate(histogram.bounds):
        cumulative += histogram.counts[index]
        lines.append(f"{name}_bucket{_labels(base, 'le', bound)} {_number(cumulative)}")
    lines.append(f"{name}_bucket{_labels(base, 'le', '+Inf')} {_number(histogram.count)}")
    lines.append(f"{name}_count{_labels(base)} {_number(histogram.count)}")
    lines.append(f"{name}_sum{_labels(base)} {_number(histogram.total)}")
    return lines


def trtllm_iteration_stats(recorder: MetricsRecorder, gauges: EngineGauges, max_batch_size: int) -> list:
    """TensorRT-LLM's ``/metrics`` body: a list with the latest iteration's statistics."""
    used_blocks = -(-gauges.kv_used_tokens // gauges.block_size) if gauges.block_size else 0
    max_blocks = gauges.kv_capacity_tokens // gauges.block_size if gauges.block_size else 0
    return [
        {
            "timestamp": time.strftime("%m-%d-%Y %H:%M:%S"),
            "iter": recorder.iterations,
            "numActiveRequests": gauges.running,
            "numQueuedRequests": gauges.waiting,
            "maxNumActiveRequests": max_batch_size,
            "kvCacheStats": {
                "maxNumBlocks": max_blocks,
                "freeNumBlocks": max(0, max_blocks - used_blocks),
                "usedNumBlocks": used_blocks,
                "tokensPerBlock": gauges.block_size,
                "cacheHitRate": recorder.prefix_hit_rate,
            },
        }
    ]
