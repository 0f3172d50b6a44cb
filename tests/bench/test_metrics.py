"""Every metric of ``perflab.bench.metrics`` against cases computed by hand."""

from __future__ import annotations

import math

import pytest

from perflab.bench.metrics import (
    active_requests_per_second,
    compute,
    concurrency_per_second,
    percentile,
    summarize,
)
from perflab.bench.records import RequestRecord, distribute_tokens


def record(
    index,
    start,
    chunks,
    output_tokens=None,
    success=True,
    dispatched=None,
    end=None,
    input_tokens=10,
    reason=None,
    source="usage",
    chunk_tokens=None,
):
    """A request sent at ``start`` whose text chunks arrived at ``chunks`` (seconds), carrying
    ``chunk_tokens`` tokens each (by default the output tokens spread over the chunks)."""
    tokens = len(chunks) if output_tokens is None else output_tokens
    if chunk_tokens is None:
        chunk_tokens = distribute_tokens(tokens, [4] * len(chunks))
    return RequestRecord(
        index=index,
        base_url="http://a",
        scheduled_s=start,
        dispatched_s=start if dispatched is None else dispatched,
        start_s=start,
        end_s=(chunks[-1] if chunks else start) if end is None else end,
        chunk_times_s=list(chunks),
        chunk_tokens=chunk_tokens if success else [],
        input_tokens=input_tokens,
        output_tokens=tokens if success else 0,
        output_tokens_source=source,
        success=success,
        error=None if success else "boom",
        reason=reason,
    )


def test_percentile_interpolates_like_numpy():
    values = [1.0, 2.0, 3.0, 4.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile(values, 50) == pytest.approx(2.5)
    assert percentile(values, 90) == pytest.approx(3.7)  # rank 2.7 → 3 + 0.7·(4 − 3)
    assert percentile([5.0], 99) == 5.0
    assert percentile([], 50) == 0.0


def test_summary_mean_median_population_std_in_ms():
    summary = summarize([0.010, 0.020, 0.030, 0.040], (50.0, 99.0))
    assert summary.mean_ms == pytest.approx(25.0)
    assert summary.median_ms == pytest.approx(25.0)
    assert summary.std_ms == pytest.approx(math.sqrt(125.0))  # deviations 15, 5, 5, 15 ms
    assert summary.percentiles_ms == [(50.0, pytest.approx(25.0)), (99.0, pytest.approx(39.7))]


def test_two_requests_by_hand():
    # A: sent 0.0, chunks at 0.1, 0.2, 0.4 → TTFT 100, ITL 100/200, E2EL 400, TPOT (400−100)/2 = 150
    # B: sent 0.5, chunks at 0.8, 1.0      → TTFT 300, ITL 200,     E2EL 500, TPOT 200/1 = 200
    a = record(0, 0.0, [0.1, 0.2, 0.4])
    b = record(1, 0.5, [0.8, 1.0])
    metrics = compute([a, b], percentiles=(50.0,))
    assert metrics.completed == 2 and metrics.failed == 0
    assert metrics.duration_s == pytest.approx(1.0)
    assert metrics.latency["ttft"].mean_ms == pytest.approx(200.0)
    assert metrics.latency["ttft"].median_ms == pytest.approx(200.0)
    assert metrics.latency["ttft"].std_ms == pytest.approx(100.0)
    assert metrics.latency["itl"].mean_ms == pytest.approx((100 + 200 + 200) / 3)
    assert metrics.latency["itl"].median_ms == pytest.approx(200.0)
    assert metrics.latency["tpot"].mean_ms == pytest.approx(175.0)
    assert metrics.latency["e2el"].mean_ms == pytest.approx(450.0)
    assert metrics.total_input_tokens == 20
    assert metrics.total_output_tokens == 5
    assert metrics.request_throughput == pytest.approx(2.0)
    assert metrics.output_throughput == pytest.approx(5.0)
    assert metrics.total_token_throughput == pytest.approx(25.0)
    # Both were active at some moment of second 0 (vLLM's count); never at the same instant (exact).
    assert metrics.max_concurrent_requests == metrics.concurrency_by_definition["per-second"] == 2
    assert metrics.concurrency_by_definition["exact"] == 1  # A ends at 0.4, B starts at 0.5
    assert metrics.latency["ttft"].percentiles_ms == [(50.0, pytest.approx(200.0))]


def test_tpot_uses_output_tokens_not_chunks():
    # 2 chunks carrying 5 tokens: TPOT = (0.9 − 0.1) / (5 − 1) = 200 ms, ITL stays one 800 ms gap.
    metrics = compute([record(0, 0.0, [0.1, 0.9], output_tokens=5)])
    assert metrics.latency["tpot"].mean_ms == pytest.approx(200.0)
    assert metrics.latency["itl"].mean_ms == pytest.approx(800.0)


def test_single_token_request_has_no_tpot():
    metrics = compute([record(0, 0.0, [0.05])])
    assert metrics.latency["tpot"].mean_ms == 0.0
    assert metrics.latency["itl"].mean_ms == 0.0
    assert metrics.latency["ttft"].mean_ms == pytest.approx(50.0)


def test_failed_requests_are_counted_and_excluded():
    ok = record(0, 0.0, [0.1, 0.3])
    failed = record(1, 0.0, [0.2], success=False, end=2.0, reason="http_500")
    cut = record(2, 0.1, [], success=False, end=0.5, reason="stream_interrupted")
    other = record(3, 0.1, [], success=False, end=0.6, reason="http_500")
    metrics = compute([ok, failed, cut, other])
    assert metrics.completed == 1
    assert metrics.failed == 3
    assert metrics.failure_reasons == {"http_500": 2, "stream_interrupted": 1}
    assert metrics.latency["ttft"].mean_ms == pytest.approx(100.0)
    assert metrics.total_output_tokens == 2
    assert metrics.duration_s == pytest.approx(2.0)  # the failed request ended last
    assert metrics.request_throughput == pytest.approx(0.5)
    assert compute([ok, failed, cut, other], peak_concurrency="exact").max_concurrent_requests == 4
    # vLLM counts successful requests only: the one that succeeded.
    assert metrics.max_concurrent_requests == 1


def test_duration_runs_from_first_dispatch():
    late_start = record(0, 0.5, [1.0, 1.5], dispatched=0.25)
    metrics = compute([late_start])
    assert metrics.duration_s == pytest.approx(1.25)


def test_peak_output_tokens_counts_tokens_per_one_second_bucket():
    # Bucket 0: 3 tokens from A + 2 from B's chunk at 0.9; bucket 1: the 4 tokens of B's chunk at 1.5.
    a = record(0, 0.0, [0.1, 0.2, 0.3])
    b = record(1, 0.0, [0.9, 1.5], output_tokens=6, chunk_tokens=[2, 4])
    metrics = compute([a, b])
    assert [row["output_tokens"] for row in metrics.timeseries] == [5, 4]
    # 9 tokens in 1.5 s average 6 tok/s: the half-filled last bucket cannot pull the peak below that.
    assert metrics.max_output_tokens_per_s == pytest.approx(6.0)
    assert [row["completed"] for row in metrics.timeseries] == [1, 1]


def test_peak_output_tokens_is_never_below_the_average():
    # 400 tokens in half a second: one bucket of 400 tokens, an average of 800 tok/s.
    chunks = [0.1 + index * 0.001 for index in range(400)]
    short = record(0, 0.0, chunks, output_tokens=400, end=0.5, chunk_tokens=[1] * 400)
    metrics = compute([short])
    assert [row["output_tokens"] for row in metrics.timeseries] == [400]
    assert metrics.output_throughput == pytest.approx(800.0)
    assert metrics.max_output_tokens_per_s == pytest.approx(800.0)


def test_concurrency_is_exact_overlap_with_touching_intervals_not_overlapping():
    a = record(0, 0.0, [1.0])
    b = record(1, 1.0, [2.0])  # starts exactly when a ends
    c = record(2, 0.5, [1.5])
    assert concurrency_per_second([a, b, c], 0.0, 2) == [2, 2]
    assert compute([a, b, c], peak_concurrency="exact").max_concurrent_requests == 2
    assert compute([a, b], peak_concurrency="exact").max_concurrent_requests == 1


def test_timeseries_rows_and_in_flight_per_second():
    requests = [record(i, 0.1 * i, [0.1 * i + 1.2]) for i in range(5)]  # each in flight 1.2 s
    metrics = compute(requests)
    assert [row["t"] for row in metrics.timeseries] == [0, 1]
    assert [row["requests_in_flight"] for row in metrics.timeseries] == [5, 5]
    assert (
        max(row["requests_in_flight"] for row in metrics.timeseries)
        == (metrics.concurrency_by_definition["exact"])
    )


def test_goodput_counts_requests_meeting_every_slo():
    fast = record(0, 0.0, [0.05, 0.06, 0.07])  # TTFT 50, TPOT 10, E2EL 70
    slow_first = record(1, 0.0, [0.5, 0.51])  # TTFT 500
    slow_decode = record(2, 0.0, [0.05, 0.25])  # TPOT 200
    one_token = record(3, 0.0, [0.08])  # TPOT counts as 0
    metrics = compute(
        [fast, slow_first, slow_decode, one_token], goodput_slos_ms={"ttft": 100.0, "tpot": 50.0}
    )
    assert metrics.duration_s == pytest.approx(0.51)
    assert metrics.request_goodput == pytest.approx(2 / 0.51)
    assert compute([fast], goodput_slos_ms={"e2el": 69.0}).request_goodput == 0.0
    assert compute([fast]).request_goodput is None


def test_output_token_sources_are_tallied():
    metrics = compute(
        [
            record(0, 0.0, [0.1]),
            record(1, 0.0, [0.2], source="tokenizer"),
            record(2, 0.0, [0.3], source="usage"),
        ]
    )
    assert metrics.output_tokens_source == {"usage": 2, "tokenizer": 1}


def test_no_requests_gives_zeros():
    metrics = compute([])
    assert metrics.completed == metrics.failed == 0
    assert metrics.duration_s == 0.0
    assert metrics.request_throughput == 0.0
    assert metrics.timeseries == []


def test_distribute_tokens():
    assert distribute_tokens(3, [5, 5, 5]) == [1, 1, 1]
    assert distribute_tokens(6, [2, 4]) == [2, 4]
    assert distribute_tokens(5, [1, 1, 1]) == [2, 2, 1]
    assert sum(distribute_tokens(97, [3, 7, 1, 0, 12])) == 97
    assert distribute_tokens(0, [3]) == [0]
    assert distribute_tokens(4, []) == []


def test_per_second_concurrency_counts_requests_active_in_each_bucket_like_vllm():
    # Eight slots, each sending a 0.1 s request every 0.25 s: never more than 8 in flight at once, but
    # each 1-second bucket sees 8 × 4 = 32 requests come and go (vLLM 0.32 reported 24-50 at cap 8).
    records = []
    for slot in range(8):
        for turn in range(8):
            start = turn * 0.25 + slot * 0.01
            records.append(record(slot * 8 + turn, start, [start + 0.05, start + 0.1]))
    metrics = compute(records)
    assert metrics.concurrency_by_definition["exact"] == 8
    # The last request ends at 1.92 s: vLLM sizes the series ceil(1.92) + 1 = 3 buckets.
    assert active_requests_per_second(records) == [32, 32, 0]
    assert metrics.max_concurrent_requests == 32 and metrics.peak_concurrency_definition == "per-second"
    exact = compute(records, peak_concurrency="exact")
    assert exact.max_concurrent_requests == 8 and exact.peak_concurrency_definition == "exact"


def test_per_second_buckets_start_at_the_first_successful_send_and_span_both_ends():
    # Buckets start at A's send (0.5): A spans buckets 0..2 (done 2.7), B (1.6 to 1.8) bucket 1.
    a = record(0, 0.5, [1.0, 2.7])
    b = record(1, 1.6, [1.7, 1.8])
    failed = record(2, 0.0, [], success=False, end=3.0, reason="timeout")
    assert active_requests_per_second([a, b]) == [1, 2, 1, 0]  # ceil(2.7 − 0.5) + 1 buckets
    assert compute([a, b, failed]).max_concurrent_requests == 2


def test_input_tokens_follow_the_chosen_definition_and_keep_both_totals():
    # The server counted the chat template too (usage 14 and 15); the prompts themselves had 10.
    a = record(0, 0.0, [0.1, 0.2])
    b = record(1, 0.0, [0.1, 0.2])
    c = record(2, 0.0, [0.1, 0.2])
    a.usage_input_tokens, b.usage_input_tokens = 14, 15  # c's server sent no usage: its own 10 count
    metrics = compute([a, b, c])
    assert metrics.input_tokens_definition == "usage"
    assert metrics.total_input_tokens == 14 + 15 + 10
    assert metrics.input_tokens_by_definition == {"usage": 39, "prompt": 30}
    assert metrics.total_token_throughput == pytest.approx((39 + 6) / 0.2)
    prompt = compute([a, b, c], input_tokens="prompt")
    assert prompt.total_input_tokens == 30
    assert prompt.total_token_throughput == pytest.approx((30 + 6) / 0.2)
    assert a.to_json("usage")["input_tokens"] == 14 and a.to_json("usage")["input_tokens_source"] == "usage"
    assert a.to_json("prompt")["input_tokens"] == 10 and a.to_json("prompt")["usage_input_tokens"] == 14
