"""The bench against the simulator in fixed mode: latencies within 2 % of the injected truth at 1 and
256 concurrent requests, exact input lengths (local tokenizer or the server's /tokenize), usage counts.

The bench times reads by the kernel's receive timestamps, so its own CPU lag does not count; what
remains on a crowded 2-core machine is the simulator (and the bench) waiting for a CPU while other
test runs hold both cores, which only ever adds latency. Where real-time priority is available both
run with it for the measurement (``tests.fixtures.realtime``) and the injected timings are 100 ms /
20 ms: 256 streams then send 12,800 chunks a second, which leaves both processes well inside the
kernel's real-time budget (95 % of a CPU); at 10 ms a busy machine's share of it delayed first tokens
by 4 %. Without real-time priority they are 500 ms / 40 ms, where a few milliseconds of waiting stay
well inside 2 %.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from perflab.bench import BenchOptions, run_benchmark
from perflab.bench.datasets import load_dataset
from perflab.bench.tokenizer import ServerTokenizer, load_local_tokenizer
from tests.fixtures.realtime import realtime_available, realtime_priority

pytestmark = pytest.mark.realtime
REALTIME = realtime_available()
TTFT_MS, ITL_MS = (100.0, 20.0) if REALTIME else (500.0, 40.0)
OUTPUT_LEN = 32
INPUT_LEN = 48
# The seeded schedule puts 256 arrivals within 0.27 s (0.53 s without real-time priority); all 256
# overlap while that, plus the bench's dispatch lag on a busy machine (up to 0.24 s seen), is shorter
# than one request (0.72 s; 1.74 s without real-time priority).
BURST_RATE = 1024.0 if REALTIME else 512.0


@dataclass
class FixedSim:
    url: str
    pid: int


@pytest.fixture(scope="module")
def fixed_sim(tiny_tokenizer_path, tmp_path_factory):
    from tests.fixtures.sim_server import SimServerFactory

    factory = SimServerFactory(tmp_path_factory.mktemp("fixed-sim"))
    url = factory(fixed_ttft_ms=TTFT_MS, fixed_itl_ms=ITL_MS, tokenizer=str(tiny_tokenizer_path))
    yield FixedSim(url, factory.pid(url))
    factory.stop_all()


def assert_matches_injected(result):
    expected = {
        "ttft": TTFT_MS,
        "tpot": ITL_MS,
        "itl": ITL_MS,
        "e2el": TTFT_MS + (OUTPUT_LEN - 1) * ITL_MS,
    }
    for name, truth in expected.items():
        for stat in ("mean", "median"):
            measured = result[f"{stat}_{name}_ms"]
            assert measured == pytest.approx(truth, rel=0.02), (
                f"{stat} {name}: {measured:.2f} ms vs {truth} ms (timing {result['timing_source']}, "
                f"{result['coalesced_chunks']} chunks shared a read, "
                f"dispatch lag {result['dispatch_lag_ms']})"
            )


@pytest.mark.parametrize("concurrency, prompts, rate", [(1, 2, float("inf")), (256, 256, BURST_RATE)])
def test_latencies_within_two_percent_of_injected(
    kernel_timestamps, fixed_sim, tiny_tokenizer_path, concurrency, prompts, rate
):
    options = BenchOptions(
        base_urls=[fixed_sim.url],
        model="sim-model",
        num_prompts=prompts,
        max_concurrency=concurrency,
        request_rate=rate,
        input_len=INPUT_LEN,
        output_len=OUTPUT_LEN,
        tokenizer=str(tiny_tokenizer_path),
        progress="none",
    )
    with realtime_priority(fixed_sim.pid):
        result = run_benchmark(options)
    assert (result["completed"], result["failed"]) == (prompts, 0)
    assert result["max_overlapping_requests"] == concurrency, f"dispatch lag {result['dispatch_lag_ms']}"
    assert result["preconnected"] == concurrency
    assert result["timing_source"] == "kernel"
    assert_matches_injected(result)
    assert result["total_prompt_input_tokens"] == prompts * INPUT_LEN
    assert result["total_input_tokens"] == result["total_usage_input_tokens"]
    assert result["input_tokens_source"] == "tokenizer"
    assert result["input_tokens_check"]["mismatched"] == 0 and result["input_tokens_check"]["checked"] > 0
    assert result["total_output_tokens"] == prompts * OUTPUT_LEN
    assert result["output_tokens_source"] == {"usage": prompts}
    assert result["max_output_tokens_per_s"] == max(
        max(row["output_tokens"] for row in result["timeseries"]), result["output_throughput"]
    )


def test_exact_lengths_from_the_servers_tokenize_alone(fixed_sim, tiny_tokenizer_path):
    options = BenchOptions(
        base_urls=[fixed_sim.url],
        model="sim-model",
        num_prompts=4,
        input_len=30,
        output_len=2,
        range_ratio=0.5,
        prefix_len=5,
        progress="none",
    )
    result = run_benchmark(options)
    assert result["input_tokens_source"] == "server"
    assert result["notes"] == []
    lengths = [record["prompt_input_tokens"] for record in result["requests"]]
    assert all(5 + 15 <= length <= 5 + 45 for length in lengths)
    # The same seed gives the same prompts; the real tokenizer counts exactly what the bench reported.
    server = ServerTokenizer(fixed_sim.url, "sim-model", {})
    prompts = [sample.prompt for sample in load_dataset(options.dataset_spec(), server).samples]
    server.close()
    local = load_local_tokenizer(str(tiny_tokenizer_path))
    assert [local.count(prompt) for prompt in prompts] == lengths
