"""TensorRT-LLM: click flags, the extra_llm_api_options YAML, refused knobs."""

from __future__ import annotations

import pytest
import yaml

from perflab.engines import EngineConfig, InvalidKnobValue, UnsupportedKnob, get_adapter, parse_serve_command

TRTLLM = get_adapter("trtllm")


def test_flag_knobs() -> None:
    config = EngineConfig(
        engine="trtllm", model="Qwen/Qwen3-30B-A3B", tp=4, ep=2, max_num_batched_tokens=16384,
        max_num_seqs=256, enable_chunked_prefill=True, max_model_len=40960, reasoning_parser="qwen3",
    )  # fmt: skip
    assert TRTLLM.serve_argv(config, port=8000) == [
        "trtllm-serve", "Qwen/Qwen3-30B-A3B", "--host", "127.0.0.1", "--port", "8000", "--tp_size", "4",
        "--ep_size", "2", "--max_num_tokens", "16384", "--max_batch_size", "256", "--enable_chunked_prefill",
        "--max_seq_len", "40960", "--reasoning_parser", "qwen3",
        "--extra_llm_api_options", "extra_llm_api_options.yaml",
    ]  # fmt: skip
    options = yaml.safe_load(TRTLLM.files(config, port=8000)["extra_llm_api_options.yaml"])
    assert options == {"return_perf_metrics": True, "enable_iter_perf_stats": True}
    assert "extra_llm_api_options" not in TRTLLM.display_command(config)


def test_yaml_knobs_go_to_extra_llm_api_options() -> None:
    config = EngineConfig(
        engine="trtllm", model="Qwen/Qwen3-32B", attention_backend="flashinfer", enable_prefix_caching=False,
        kv_cache_dtype="fp8", speculative_config={"method": "mtp", "num_speculative_tokens": 3},
    )  # fmt: skip
    argv = TRTLLM.serve_argv(config, port=8000)
    assert argv[-2:] == ["--extra_llm_api_options", "extra_llm_api_options.yaml"]
    files = TRTLLM.files(config, port=8000)
    assert yaml.safe_load(files["extra_llm_api_options.yaml"]) == {
        "attn_backend": "FLASHINFER",
        "kv_cache_config": {"enable_block_reuse": False, "dtype": "fp8"},
        "speculative_config": {"decoding_type": "MTP", "max_draft_len": 3},
        "return_perf_metrics": True,
        "enable_iter_perf_stats": True,
    }
    assert TRTLLM.display_command(config) == (
        "trtllm-serve Qwen/Qwen3-32B --extra_llm_api_options extra_llm_api_options.yaml"
    )


def test_ngram_speculation() -> None:
    config = EngineConfig(
        engine="trtllm", model="m", speculative_config={"method": "ngram", "num_speculative_tokens": 4,
                                                        "prompt_lookup_max": 3}
    )  # fmt: skip
    options = yaml.safe_load(TRTLLM.files(config, port=8000)["extra_llm_api_options.yaml"])
    assert options["speculative_config"] == {
        "decoding_type": "NGram",
        "max_draft_len": 4,
        "max_matching_ngram_size": 3,
    }


@pytest.mark.parametrize(
    ("update", "knob"),
    [
        ({"attention_backend": "fa3"}, "attention_backend"),
        ({"kv_cache_dtype": "fp8_e5m2"}, "kv_cache_dtype"),
        (
            {"speculative_config": {"method": "eagle3", "num_speculative_tokens": 3, "model": "d"}},
            "speculative_config",
        ),
        ({"tp": 4, "ep": 3}, "ep"),
    ],
)
def test_values_trtllm_rejects(update: dict, knob: str) -> None:
    with pytest.raises(InvalidKnobValue) as caught:
        TRTLLM.files(EngineConfig(engine="trtllm", model="m", **update), port=8000)
    assert caught.value.knob == knob


@pytest.mark.parametrize(
    ("knob", "value", "hint"),
    [
        ("quantization", "fp8", "pick a quantized model id"),
        ("dp", 2, "run replicas"),
        ("gpu_memory_utilization", 0.9, "--kv_cache_free_gpu_memory_fraction"),
    ],
)
def test_refused_knobs(knob: str, value: object, hint: str) -> None:
    with pytest.raises(UnsupportedKnob, match=hint):
        TRTLLM.serve_argv(EngineConfig(engine="trtllm", model="m", **{knob: value}), port=8000)


def test_kv_fraction_may_be_passed_as_extra_args() -> None:
    config = EngineConfig(
        engine="trtllm", model="m", extra_args=("--kv_cache_free_gpu_memory_fraction", "0.8")
    )
    assert TRTLLM.serve_argv(config, port=8000)[-2:] == ["--kv_cache_free_gpu_memory_fraction", "0.8"]


def test_a_command_naming_an_options_file_cannot_be_imported() -> None:
    with pytest.raises(ValueError, match="names a file"):
        parse_serve_command("trtllm-serve m --extra_llm_api_options opts.yaml")


def test_prometheus_gauges_are_read_from_prometheus_metrics() -> None:
    """tensorrt_llm/metrics/collector.py publishes them on /prometheus/metrics with return_perf_metrics."""
    assert TRTLLM.metrics is not None
    assert TRTLLM.metrics.path == "/prometheus/metrics"
    assert (TRTLLM.metrics.running, TRTLLM.metrics.waiting, TRTLLM.metrics.kv_cache_usage) == (
        "trtllm_num_requests_running",
        "trtllm_num_requests_waiting",
        "trtllm_kv_cache_utilization",
    )


def test_served_model_name_is_the_served_model_name_option() -> None:
    """TensorRT-LLM 1.3 has --served_model_name (NVIDIA/TensorRT-LLM#11711)."""
    config = parse_serve_command("trtllm-serve /models/Qwen3-32B --served_model_name qwen3-32b")
    assert config.served_model_name == "qwen3-32b"
    argv = TRTLLM.serve_argv(config, port=8000)
    assert argv[argv.index("--served_model_name") + 1] == "qwen3-32b"
    assert TRTLLM.display_command(config) == "trtllm-serve /models/Qwen3-32B --served_model_name qwen3-32b"


def test_mtp_writes_max_draft_len_not_the_deprecated_layer_count() -> None:
    config = EngineConfig(
        engine="trtllm", model="m", speculative_config={"method": "mtp", "num_speculative_tokens": 2}
    )
    options = yaml.safe_load(TRTLLM.files(config, port=8000)["extra_llm_api_options.yaml"])
    assert options["speculative_config"] == {"decoding_type": "MTP", "max_draft_len": 2}


def test_a_vllm_flag_in_extra_args_names_the_typed_knob() -> None:
    config = EngineConfig(engine="trtllm", model="m", extra_args=("--enable-chunked-prefill",))
    with pytest.raises(
        InvalidKnobValue, match="vLLM's flag for enable_chunked_prefill.*set enable_chunked_prefill"
    ):
        TRTLLM.serve_argv(config, port=8000)
