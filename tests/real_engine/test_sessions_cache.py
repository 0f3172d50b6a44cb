"""Sessions on the real vLLM CPU build (0.32.0): a two-turn session run records a prefix-cache hit rate
from vLLM's own counters (``vllm:prefix_cache_queries``/``vllm:prefix_cache_hits``), and vLLM started
without ``VLLM_SERVER_DEV_MODE`` has no reset to offer, which the result says."""

from __future__ import annotations

import pytest

from perflab.bench import BenchOptions, run_benchmark
from perflab.bench.datasets import SharedPrefixSpec
from tests.fixtures.real_vllm import RealVllmServer

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(900)]


def test_a_two_turn_session_run_hits_vllms_prefix_cache(real_vllm_server: RealVllmServer) -> None:
    options = BenchOptions(
        base_urls=[real_vllm_server.base_url],
        model=real_vllm_server.model,
        tokenizer=str(real_vllm_server.model_dir),
        dataset="generated-shared-prefix",
        shared_prefix=SharedPrefixSpec(num_groups=2, system_prompt_len=300, question_len=24, num_turns=2),
        output_len=16,
        num_prompts=4,
        max_concurrency=2,
        flush_cache=True,
        progress="none",
    )
    result = run_benchmark(options)
    assert result["completed"] == 8 and result["sessions"]["completed"] == 4
    assert result["prefix_cache_source"].startswith("vLLM vllm:prefix_cache_hits_total")
    assert result["prefix_cache_queries"] >= result["total_input_tokens"] * 0.9
    assert result["prefix_cache_hits"] > 0 and result["prefix_cache_hit_rate"] > 0.0
    assert [row["turn"] for row in result["ttft_by_turn_ms"]] == [0, 1]
    reset = result["cache_reset"]
    assert reset["requested"] and not reset["done"] and "VLLM_SERVER_DEV_MODE=1" in reset["reason"]
