"""Benchmark metrics from per-request records, as pure functions (definitions in DESIGN.md).

- TTFT: request sent → first chunk carrying generated text.
- TPOT: (E2EL − TTFT) / (output tokens − 1) per request with at least two output tokens.
- ITL: gaps between successive text chunks, pooled over all successful requests.
- E2EL: request sent → last text chunk.
- duration: first dispatch → last completion; throughputs divide the successful totals by it.
- peak output tokens/s: the largest number of output tokens received in one 1-second bucket
  (buckets start at the first dispatch), as ``vllm bench serve`` counts it, but never below the
  average output throughput: a run shorter than a second has one bucket holding fewer tokens than
  a second would (vLLM then reports a "peak" under the average), and a partial last bucket can only
  lower the maximum.
- input tokens and peak concurrent requests come in two definitions; ``total_input_tokens``,
  ``total_token_throughput`` and ``max_concurrent_requests`` (vLLM's names) use the one chosen, vLLM
  0.32.0's by default, and both values are kept under their own names:
  - input tokens ``usage`` (vLLM): the server's ``usage.prompt_tokens`` (chat template included), else
    the prompt's own count; ``prompt`` (perflab): the prompt's own tokens as the dataset counted them.
  - peak concurrency ``per-second`` (vLLM ``calculate_metrics``): 1-second buckets from the first
    successful request's start; each successful request counts in every bucket from the one it was
    sent in to the one its last token arrived in; the fullest bucket. ``exact`` (perflab): the
    maximum overlap of all requests' [sent, ended) intervals.
- goodput: successful requests per second meeting every SLO (``ttft``, ``tpot``, ``e2el`` in ms;
  a request with one output token has TPOT 0 for this purpose).

Failed requests are counted (with their reasons) and left out of latency and token statistics.
Statistics of an empty list are 0, percentiles interpolate linearly between closest ranks and the
standard deviation is the population one, all as ``vllm bench serve`` computes them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from perflab.bench.records import RequestRecord

DEFAULT_PERCENTILES: Tuple[float, ...] = (50.0, 90.0, 95.0, 99.0)
LATENCY_METRICS: Tuple[str, ...] = ("ttft", "tpot", "itl", "e2el")
SLO_METRICS: Tuple[str, ...] = ("ttft", "tpot", "e2el")
INPUT_TOKEN_DEFINITIONS: Tuple[str, ...] = ("usage", "prompt")
CONCURRENCY_DEFINITIONS: Tuple[str, ...] = ("per-second", "exact")


@dataclass
class Summary:
    """Mean, median, standard deviation and chosen percentiles of one latency metric, in ms."""

    mean_ms: float
    median_ms: float
    std_ms: float
    percentiles_ms: List[Tuple[float, float]]


@dataclass
class Metrics:
    """Everything the text block and the JSON result report about one run."""

    completed: int
    failed: int
    duration_s: float
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float
    request_goodput: Optional[float]
    output_throughput: float
    total_token_throughput: float
    max_output_tokens_per_s: float
    max_concurrent_requests: int
    latency: Dict[str, Summary]
    input_tokens_definition: str = "usage"
    peak_concurrency_definition: str = "per-second"
    input_tokens_by_definition: Dict[str, int] = field(default_factory=dict)
    concurrency_by_definition: Dict[str, int] = field(default_factory=dict)
    failure_reasons: Dict[str, int] = field(default_factory=dict)
    output_tokens_source: Dict[str, int] = field(default_factory=dict)
    timeseries: List[Dict[str, float]] = field(default_factory=list)


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); 0 for an empty list."""
    if not sorted_values:
        return 0.0
    rank = (len(sorted_values) - 1) * pct / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = rank - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


def summarize(values_s: Sequence[float], percentiles: Sequence[float]) -> Summary:
    """Summary in milliseconds of latencies given in seconds."""
    if not values_s:
        return Summary(0.0, 0.0, 0.0, [(p, 0.0) for p in percentiles])
    ordered = sorted(values_s)
    count = len(ordered)
    mean = math.fsum(ordered) / count
    variance = math.fsum((value - mean) ** 2 for value in ordered) / count
    return Summary(
        mean_ms=mean * 1000.0,
        median_ms=percentile(ordered, 50.0) * 1000.0,
        std_ms=math.sqrt(variance) * 1000.0,
        percentiles_ms=[(p, percentile(ordered, p) * 1000.0) for p in percentiles],
    )


def meets_slos(record: RequestRecord, slos_ms: Dict[str, float]) -> bool:
    """Whether a successful request meets every SLO."""
    values_s = {
        "ttft": record.ttft_s or 0.0,
        "tpot": record.tpot_s or 0.0,
        "e2el": record.e2el_s or 0.0,
    }
    return all(values_s[name] * 1000.0 <= limit for name, limit in slos_ms.items())


def _bucket_count(duration_s: float) -> int:
    return max(1, math.ceil(duration_s)) if duration_s > 0 else 0


def peak_in_flight(spans: Sequence[Tuple[float, float]], bin_ends: Sequence[float]) -> List[int]:
    """For each consecutive bin (each ends at the next of ``bin_ends``, exclusive), the largest number
    of the [start, end) ``spans`` in flight at any instant in it."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    peaks = [0] * len(bin_ends)
    in_flight = 0
    position = 0
    for index, bin_end in enumerate(bin_ends):
        peak = in_flight
        while position < len(events) and events[position][0] < bin_end:
            in_flight += events[position][1]
            peak = max(peak, in_flight)
            position += 1
        peaks[index] = peak
    return peaks


def concurrency_per_second(records: Sequence[RequestRecord], origin_s: float, buckets: int) -> List[int]:
    """For each 1-second bucket, the largest number of requests in flight at any instant in it."""
    spans = [(record.start_s, record.end_s) for record in records]
    return peak_in_flight(spans, [origin_s + bucket + 1 for bucket in range(buckets)])


def active_requests_per_second(successes: Sequence[RequestRecord]) -> List[int]:
    """vLLM 0.32.0's concurrency series: for each 1-second bucket from the first successful request's
    start, how many successful requests were active at some moment of it (sent in or before the
    bucket, last token in or after it)."""
    spans = [(record.start_s, record.e2el_s or 0.0) for record in successes]
    if not spans:
        return []
    origin = min(start for start, _ in spans)
    last_end = max(start + latency for start, latency in spans)
    counts = [0] * (int(math.ceil(last_end - origin)) + 1)
    for start, latency in spans:
        for second in range(int(start - origin), int(start + latency - origin) + 1):
            counts[second] += 1
    return counts


def build_timeseries(
    successes: Sequence[RequestRecord],
    everything: Sequence[RequestRecord],
    origin_s: float,
    duration_s: float,
) -> List[Dict[str, float]]:
    """Per-second output tokens, completed requests and peak requests in flight."""
    buckets = _bucket_count(duration_s)
    if not buckets:
        return []
    tokens = [0] * buckets
    completed = [0] * buckets
    for record in successes:
        for arrival, count in zip(record.chunk_times_s, record.chunk_tokens):
            tokens[min(int(arrival - origin_s), buckets - 1)] += count
        completed[min(int(record.end_s - origin_s), buckets - 1)] += 1
    in_flight = concurrency_per_second(everything, origin_s, buckets)
    return [
        {
            "t": bucket,
            "output_tokens": tokens[bucket],
            "requests_in_flight": in_flight[bucket],
            "completed": completed[bucket],
        }
        for bucket in range(buckets)
    ]


def compute(
    records: Sequence[RequestRecord],
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    goodput_slos_ms: Optional[Dict[str, float]] = None,
    input_tokens: str = "usage",
    peak_concurrency: str = "per-second",
) -> Metrics:
    """Compute the run's metrics from its measured (non-warmup) requests, with the ``input_tokens``
    and ``peak_concurrency`` definitions given for the fields that carry vLLM's names."""
    successes = [record for record in records if record.success]
    failures = [record for record in records if not record.success]
    origin_s = min((record.dispatched_s for record in records), default=0.0)
    end_s = max((record.end_s for record in records), default=origin_s)
    duration_s = max(end_s - origin_s, 0.0)

    ttfts: List[float] = []
    tpots: List[float] = []
    itls: List[float] = []
    e2els: List[float] = []
    for record in successes:
        ttfts.append(record.ttft_s or 0.0)
        e2els.append(record.e2el_s or 0.0)
        itls.extend(record.itl_s)
        tpot = record.tpot_s
        if tpot is not None:
            tpots.append(tpot)

    input_totals = {
        definition: sum(record.input_tokens_as(definition) for record in successes)
        for definition in INPUT_TOKEN_DEFINITIONS
    }
    total_input = input_totals[input_tokens]
    total_output = sum(record.output_tokens for record in successes)
    timeseries = build_timeseries(successes, records, origin_s, duration_s)

    def per_second(amount: float) -> float:
        return amount / duration_s if duration_s > 0 else 0.0

    goodput: Optional[float] = None
    if goodput_slos_ms:
        goodput = per_second(sum(1 for record in successes if meets_slos(record, goodput_slos_ms)))

    reasons: Dict[str, int] = {}
    for record in failures:
        reason = record.reason or "error"
        reasons[reason] = reasons.get(reason, 0) + 1
    sources: Dict[str, int] = {}
    for record in successes:
        sources[record.output_tokens_source] = sources.get(record.output_tokens_source, 0) + 1

    concurrency = {
        "per-second": max(active_requests_per_second(successes), default=0),
        "exact": int(max((row["requests_in_flight"] for row in timeseries), default=0)),
    }

    return Metrics(
        completed=len(successes),
        failed=len(failures),
        duration_s=duration_s,
        total_input_tokens=total_input,
        total_output_tokens=total_output,
        request_throughput=per_second(len(successes)),
        request_goodput=goodput,
        output_throughput=per_second(total_output),
        total_token_throughput=per_second(total_input + total_output),
        max_output_tokens_per_s=max(
            float(max((row["output_tokens"] for row in timeseries), default=0)), per_second(total_output)
        ),
        max_concurrent_requests=concurrency[peak_concurrency],
        latency={
            "ttft": summarize(ttfts, percentiles),
            "tpot": summarize(tpots, percentiles),
            "itl": summarize(itls, percentiles),
            "e2el": summarize(e2els, percentiles),
        },
        failure_reasons=reasons,
        output_tokens_source=sources,
        timeseries=timeseries,
        input_tokens_definition=input_tokens,
        peak_concurrency_definition=peak_concurrency,
        input_tokens_by_definition=input_totals,
        concurrency_by_definition=concurrency,
    )
