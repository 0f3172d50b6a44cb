"""What the engine counted over a result's window (prefix-cache hits, speculative decoding) and the
prefix-cache reset before it, against simulated engines serving the engines' own metric names and
reset endpoints, and against a server that has neither."""

from __future__ import annotations

import json

import pytest

from perflab.bench import BenchOptions, run_benchmark
from perflab.bench.datasets import SharedPrefixSpec
from perflab.bench.engine_metrics import NO_COUNTERS, parse_metrics, prefix_cache_fields, spec_decode_fields
from perflab.bench.report import format_text_block
from tests.fixtures.streaming_server import Script

VLLM_PAGE = """# HELP vllm:prefix_cache_queries Prefix cache queries.
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{{engine="0",model_name="m"}} {queries}
vllm:prefix_cache_queries_created{{engine="0",model_name="m"}} 1.7e9
vllm:prefix_cache_hits_total{{engine="0",model_name="m"}} {hits}
vllm:prefix_cache_hits_total{{engine="1",model_name="m"}} 1.0
vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {drafts}
vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {draft_tokens}
vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {accepted}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="0"}} {first}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="1"}} {second}
"""


def _page(**values: float) -> str:
    return VLLM_PAGE.format(**values)


def test_counters_over_the_window_give_vllms_definitions() -> None:
    before = parse_metrics(
        _page(queries=100, hits=10, drafts=5, draft_tokens=10, accepted=4, first=3, second=1)
    )
    after = parse_metrics(
        _page(queries=1100, hits=610, drafts=105, draft_tokens=210, accepted=154, first=93, second=61)
    )
    assert before.values["vllm:prefix_cache_hits_total"] == 11.0  # label sets summed
    fields = prefix_cache_fields([before], [after])
    assert fields["prefix_cache_hit_rate"] == pytest.approx(60.0)
    assert (fields["prefix_cache_hits"], fields["prefix_cache_queries"]) == (600, 1000)
    assert fields["prefix_cache_source"].startswith("vLLM vllm:prefix_cache_hits_total")
    spec = spec_decode_fields([before], [after])
    assert spec["spec_decode_acceptance_rate"] == pytest.approx(75.0)  # 150 of 200 draft tokens
    assert spec["spec_decode_acceptance_length"] == pytest.approx(2.5)  # 1 + 150 / 100 drafts
    assert spec["spec_decode_per_position_acceptance_rates"] == pytest.approx([0.9, 0.6])
    assert spec_decode_fields([before], [before]) == {}
    sglang = parse_metrics(
        'sglang:cached_tokens_total{cache_source="device"} 30\n'
        'sglang:cached_tokens_total{cache_source="host"} 10\n'
        'sglang:prompt_tokens_total{is_streaming="true"} 100\n'
    )
    empty = parse_metrics("sglang:cached_tokens_total 0\nsglang:prompt_tokens_total 0\n")
    assert prefix_cache_fields([empty], [sglang])["prefix_cache_hit_rate"] == pytest.approx(40.0)
    assert prefix_cache_fields([empty], [parse_metrics("trtllm_kv_cache_hit_rate 0.5\n")]) == {
        "prefix_cache_hit_rate": None,
        "prefix_cache_note": NO_COUNTERS,
    }


def _sessions(base_url: str, **fields: object) -> dict:
    values: dict = {
        "base_urls": [base_url],
        "model": "Qwen/Qwen3-8B",
        "dataset": "generated-shared-prefix",
        "shared_prefix": SharedPrefixSpec(num_groups=2, system_prompt_len=256, question_len=32, num_turns=2),
        "output_len": 32,
        "num_prompts": 8,
        "max_concurrency": 4,
        "progress": "none",
        **fields,
    }
    return run_benchmark(BenchOptions(**values))


def test_sessions_on_a_simulated_engine_report_its_prefix_cache_hits(sim_server) -> None:
    engines = {
        "vLLM": sim_server(model="Qwen/Qwen3-8B", accelerator="H100", time_scale=20),
        "SGLang": sim_server(model="Qwen/Qwen3-8B", accelerator="H100", time_scale=20, engine="sglang"),
    }
    for name, url in engines.items():
        result = _sessions(url)
        # later turns and the other sessions of a group find the shared system prompt and the history
        assert result["prefix_cache_hit_rate"] > 40.0, name
        assert result["prefix_cache_source"].startswith(name)
        assert result["prefix_cache_queries"] >= result["total_input_tokens"] * 0.99
    off = _sessions(
        sim_server(model="Qwen/Qwen3-8B", accelerator="H100", time_scale=20, enable_prefix_caching=False)
    )
    assert off["prefix_cache_hit_rate"] is None and off["prefix_cache_queries"] == 0
    assert "prefix caching off" in off["prefix_cache_note"]


def test_speculative_decoding_fields_come_from_the_engines_counters(sim_server) -> None:
    url = sim_server(
        model="Qwen/Qwen3-8B",
        accelerator="H100",
        time_scale=20,
        speculative_config=json.dumps({"method": "eagle3", "num_speculative_tokens": 3}),
    )
    result = _sessions(
        url, shared_prefix=SharedPrefixSpec(num_groups=2, system_prompt_len=256, question_len=32)
    )
    assert 0 < result["spec_decode_acceptance_rate"] <= 100
    assert 1 < result["spec_decode_acceptance_length"] <= 4
    assert result["spec_decode_accepted_tokens"] <= result["spec_decode_draft_tokens"]
    assert len(result["spec_decode_per_position_acceptance_rates"]) == 3
    assert "Speculative Decoding" in format_text_block(result)


def test_a_server_without_metrics_or_reset_says_so(scripted_server) -> None:
    server = scripted_server(Script(token_text=" ok"))
    result = _sessions(server.base_url, model="scripted-model", flush_cache=True)
    assert result["prefix_cache_hit_rate"] is None
    assert "/metrics answered HTTP 404" in result["prefix_cache_note"]
    reset = result["cache_reset"]
    assert reset["requested"] and not reset["done"] and "VLLM_SERVER_DEV_MODE=1" in reset["reason"]
    assert "spec_decode_acceptance_rate" not in result


def _random(base_url: str, seed: int, flush: bool) -> dict:
    options = BenchOptions(
        base_urls=[base_url],
        model="Qwen/Qwen3-8B",
        input_len=2048,
        output_len=8,
        num_prompts=16,
        max_concurrency=8,
        seed=seed,
        flush_cache=flush,
        progress="none",
    )
    return run_benchmark(options)


def test_identical_runs_on_one_launch_measure_alike_after_a_reset(sim_server, monkeypatch) -> None:
    monkeypatch.setenv("VLLM_SERVER_DEV_MODE", "1")
    dev = sim_server(model="Qwen/Qwen3-8B", accelerator="H100", time_scale=1)
    first, second = _random(dev, 7, flush=True), _random(dev, 7, flush=True)
    for result in (first, second):
        assert result["cache_reset"] == {
            "requested": True,
            "done": True,
            "method": "POST /reset_prefix_cache",
            "reason": None,
        }
        assert result["dataset"]["seed"] == 7
    assert first["prefix_cache_hit_rate"] == second["prefix_cache_hit_rate"] == 0.0
    assert second["mean_ttft_ms"] > 0.6 * first["mean_ttft_ms"]  # no cached prefill (a tenth then)
    kept = _random(dev, 7, flush=False)  # the same prompts again, the cache kept
    assert kept["prefix_cache_hit_rate"] > 90.0 and kept["cache_reset"]["requested"] is False
    assert kept["mean_ttft_ms"] < 0.5 * first["mean_ttft_ms"]


def test_without_a_reset_endpoint_a_fresh_seed_keeps_runs_independent(sim_server) -> None:
    plain = sim_server(model="Qwen/Qwen3-8B", accelerator="H100", time_scale=10)
    first, second = _random(plain, 7, flush=True), _random(plain, 8, flush=True)
    assert not first["cache_reset"]["done"] and "VLLM_SERVER_DEV_MODE=1" in first["cache_reset"]["reason"]
    assert first["prefix_cache_hit_rate"] == second["prefix_cache_hit_rate"] == 0.0
    sglang = sim_server(model="Qwen/Qwen3-8B", accelerator="H100", time_scale=10, engine="sglang")
    assert _random(sglang, 7, flush=True)["cache_reset"]["method"] == "POST /flush_cache"


# SGLang 0.5.23 (sglang/srt/observability/metrics_collector.py) declares sglang:cached_tokens_total with
# the label cache_source and increments it only for a request with cached tokens, so a server that has
# served prompts without a hit lists its help and type and no sample of it.
SGLANG_NO_HIT_PAGE = """# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{{model_name="m",is_streaming="true"}} {prompt}
# HELP sglang:cached_tokens_total Number of cached prompt tokens by source (device/host/storage).
# TYPE sglang:cached_tokens_total counter
"""


def test_sglang_without_a_hit_reports_zero_percent_not_missing_counters() -> None:
    before = parse_metrics(SGLANG_NO_HIT_PAGE.format(prompt=0))
    after = parse_metrics(SGLANG_NO_HIT_PAGE.format(prompt=2020))
    fields = prefix_cache_fields([before], [after])
    assert fields["prefix_cache_hit_rate"] == 0.0
    assert (fields["prefix_cache_hits"], fields["prefix_cache_queries"]) == (0, 2020)
    assert "prefix_cache_note" not in fields
    # two replicas, one of which had hits: the other's absent counter counts 0, not "no counters"
    hit = parse_metrics(
        SGLANG_NO_HIT_PAGE.format(prompt=1000) + 'sglang:cached_tokens_total{cache_source="device"} 250\n'
    )
    both = prefix_cache_fields([before, before], [after, hit])
    assert (both["prefix_cache_hits"], both["prefix_cache_queries"]) == (250, 3020)
    # without the prompt-token counter there is no evidence of SGLang's prefix cache at all
    bare = parse_metrics("# TYPE sglang:cached_tokens_total counter\n")
    assert prefix_cache_fields([bare], [bare]) == {
        "prefix_cache_hit_rate": None,
        "prefix_cache_note": NO_COUNTERS,
    }
    # vLLM creates its counters at start: one missing is no evidence of zero hits
    vllm = parse_metrics('vllm:prefix_cache_queries_total{engine="0"} 500\n')
    assert prefix_cache_fields([vllm], [vllm])["prefix_cache_hit_rate"] is None
