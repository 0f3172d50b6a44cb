"""The bench against the simulator in fixed mode: latencies within 2 % of the injected truth at 1 and
256 concurrent requests, exact input lengths (local tokenizer or the server's /tokenize), usage counts."""

from __future__ import annotations

import pytest

from perflab.bench import BenchOptions, run_benchmark
from perflab.bench.datasets import load_dataset
from perflab.bench.tokenizer import ServerTokenizer, load_local_tokenizer

TTFT_MS = 500.0
ITL_MS = 40.0
OUTPUT_LEN = 32
INPUT_LEN = 48


@pytest.fixture(scope="module")
def fixed_sim(tiny_tokenizer_path, tmp_path_factory):
    from tests.fixtures.sim_server import SimServerFactory

    factory = SimServerFactory(tmp_path_factory.mktemp("fixed-sim"))
    url = factory(fixed_ttft_ms=TTFT_MS, fixed_itl_ms=ITL_MS, tokenizer=str(tiny_tokenizer_path))
    yield url
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
                f"{stat} {name}: {measured:.2f} ms vs {truth} ms"
            )


@pytest.mark.parametrize("concurrency, prompts, rate", [(1, 2, float("inf")), (256, 256, 512.0)])
def test_latencies_within_two_percent_of_injected(fixed_sim, tiny_tokenizer_path, concurrency, prompts, rate):
    result = run_benchmark(
        BenchOptions(
            base_urls=[fixed_sim],
            model="sim-model",
            num_prompts=prompts,
            max_concurrency=concurrency,
            request_rate=rate,
            input_len=INPUT_LEN,
            output_len=OUTPUT_LEN,
            tokenizer=str(tiny_tokenizer_path),
            progress="none",
        )
    )
    assert (result["completed"], result["failed"]) == (prompts, 0)
    assert result["max_concurrent_requests"] == concurrency
    assert_matches_injected(result)
    assert result["total_input_tokens"] == prompts * INPUT_LEN
    assert result["input_tokens_source"] == "tokenizer"
    assert result["input_tokens_check"]["mismatched"] == 0 and result["input_tokens_check"]["checked"] > 0
    assert result["total_output_tokens"] == prompts * OUTPUT_LEN
    assert result["output_tokens_source"] == {"usage": prompts}
    assert result["max_output_tokens_per_s"] == max(row["output_tokens"] for row in result["timeseries"])


def test_exact_lengths_from_the_servers_tokenize_alone(fixed_sim, tiny_tokenizer_path):
    options = BenchOptions(
        base_urls=[fixed_sim],
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
    lengths = [record["input_tokens"] for record in result["requests"]]
    assert all(5 + 15 <= length <= 5 + 45 for length in lengths)
    # The same seed gives the same prompts; the real tokenizer counts exactly what the bench reported.
    server = ServerTokenizer(fixed_sim, "sim-model", {})
    prompts = [sample.prompt for sample in load_dataset(options.dataset_spec(), server).samples]
    server.close()
    local = load_local_tokenizer(str(tiny_tokenizer_path))
    assert [local.count(prompt) for prompt in prompts] == lengths
