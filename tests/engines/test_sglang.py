"""SGLang: flag mapping, chunked prefill and radix cache defaults, speculative algorithms."""

from __future__ import annotations

import pytest

from perflab.engines import EngineConfig, InvalidKnobValue, UnsupportedKnob, get_adapter, parse_serve_command

SGLANG = get_adapter("sglang")


def _argv(**knobs: object) -> list[str]:
    config = EngineConfig(engine="sglang", model="Qwen/Qwen3-14B", **knobs)
    argv = SGLANG.serve_argv(config, port=30000)
    head = ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-14B", "--host", "127.0.0.1",
            "--port", "30000"]  # fmt: skip
    assert argv[: len(head)] == head
    assert argv[-1] == "--enable-metrics"
    return argv[len(head) : -1]


def test_knob_flags() -> None:
    assert _argv(
        tp=4, dp=2, ep=4, quantization="fp8", attention_backend="fa3", max_num_batched_tokens=4096,
        max_num_seqs=128, max_model_len=32768, gpu_memory_utilization=0.8, reasoning_parser="qwen3",
        served_model_name="q",
    ) == [
        "--tp-size", "4", "--dp-size", "2", "--ep-size", "4", "--quantization", "fp8",
        "--attention-backend", "fa3", "--chunked-prefill-size", "4096", "--max-running-requests", "128",
        "--context-length", "32768", "--mem-fraction-static", "0.8", "--reasoning-parser", "qwen3",
        "--served-model-name", "q",
    ]  # fmt: skip


def test_prefix_caching_and_chunked_prefill_are_on_by_default() -> None:
    assert _argv(enable_prefix_caching=True, enable_chunked_prefill=True) == []
    assert _argv(enable_prefix_caching=False, enable_chunked_prefill=False) == [
        "--disable-radix-cache",
        "--chunked-prefill-size",
        "-1",
    ]


def test_chunk_size_and_chunking_off_conflict() -> None:
    config = EngineConfig(
        engine="sglang", model="m", max_num_batched_tokens=4096, enable_chunked_prefill=False
    )
    with pytest.raises(InvalidKnobValue, match="set only one"):
        SGLANG.validate(config)


def test_fp8_kv_cache_means_e4m3() -> None:
    assert _argv(kv_cache_dtype="fp8") == ["--kv-cache-dtype", "fp8_e4m3"]
    with pytest.raises(InvalidKnobValue, match="kv_cache_dtype"):
        _argv(kv_cache_dtype="int8")


def test_expert_parallel_must_divide_tensor_parallel() -> None:
    with pytest.raises(InvalidKnobValue, match=r"\(3\) must divide tp \(4\)"):
        _argv(tp=4, ep=3)


@pytest.mark.parametrize(
    ("spec", "flags"),
    [
        ({"method": "mtp", "num_speculative_tokens": 3},
         ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
          "--speculative-num-draft-tokens", "4"]),
        ({"method": "eagle3", "num_speculative_tokens": 2, "model": "org/eagle3", "eagle_topk": 4,
          "num_draft_tokens": 8},
         ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "2",
          "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8",
          "--speculative-draft-model-path", "org/eagle3"]),
        ({"method": "ngram", "num_speculative_tokens": 5},
         ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "5"]),
    ],
)  # fmt: skip
def test_speculative_config_maps_and_parses_back(spec: dict, flags: list[str]) -> None:
    assert _argv(speculative_config=spec) == flags
    config = EngineConfig(engine="sglang", model="m", speculative_config=spec)
    assert parse_serve_command(SGLANG.display_command(config)) == config


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"method": "medusa", "num_speculative_tokens": 2}, "has no SGLang algorithm"),
        ({"method": "eagle", "num_speculative_tokens": 2}, "needs a draft"),
        ({"method": "mtp"}, "num_speculative_tokens"),
        ({"method": "mtp", "num_speculative_tokens": 2, "prompt_lookup_max": 3}, "cannot map"),
    ],
)
def test_speculative_config_errors(spec: dict, problem: str) -> None:
    with pytest.raises(InvalidKnobValue, match=problem):
        _argv(speculative_config=spec)


def test_performance_mode_is_refused() -> None:
    with pytest.raises(UnsupportedKnob, match="SGLang has no performance-mode setting"):
        _argv(performance_mode="throughput")


def test_parse_reads_model_alias_and_drops_the_metrics_switch() -> None:
    config = parse_serve_command(
        "python -m sglang.launch_server --model Qwen/Qwen3-8B --tp 2 --enable-metrics "
        "--chunked-prefill-size -1 --disable-radix-cache --trust-remote-code"
    )
    assert (config.model, config.tp) == ("Qwen/Qwen3-8B", 2)
    assert (config.enable_chunked_prefill, config.enable_prefix_caching) == (False, False)
    assert config.extra_args == ("--trust-remote-code",)


def test_readiness_is_the_fired_up_line_not_uvicorn() -> None:
    assert SGLANG.is_ready_line("[2026-07-27 08:54:44] The server is fired up and ready to roll!")
    assert not SGLANG.is_ready_line("INFO:     Application startup complete.")
