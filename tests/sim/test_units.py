"""Pure pieces of the simulator: tokenizer, YAML subset, model catalogue, Prometheus rendering."""

from __future__ import annotations

import pytest
import yaml

from perflab.sim import yamlish
from perflab.sim.catalog import resolve_model
from perflab.sim.metrics import EngineGauges, MetricsRecorder, metric_names, render_prometheus
from perflab.sim.tokenizer import BUILTIN_WORDS, WordTokenizer, output_piece


def test_word_tokenizer_round_trips_and_counts():
    tokenizer = WordTokenizer()
    ids = list(range(0, 7000, 97)) + [len(BUILTIN_WORDS) - 1]
    text = tokenizer.decode(ids)
    assert tokenizer.encode(text) == ids and tokenizer.count(text) == len(ids)
    assert tokenizer.count("Hi, there!  New\nline") == 6
    unknown = tokenizer.encode("Hello")
    assert unknown[0] >= len(BUILTIN_WORDS) and tokenizer.decode(unknown) == "Hello"
    generated = "".join(output_piece(42, index) for index in range(50))
    assert tokenizer.count(generated) == 50


def test_yaml_subset():
    text = """
# TensorRT-LLM options
kv_cache_config:
  enable_block_reuse: false
  free_gpu_memory_fraction: 0.85
speculative_config: {decoding_type: MTP, num_nextn_predict_layers: 3}
cuda_graph_config:
  batch_sizes: [1, 2, 4]
  padding: "yes # not a comment"
list_block:
  - 8
  - 'sixteen'
empty:
"""
    assert yamlish.loads(text) == {
        "kv_cache_config": {"enable_block_reuse": False, "free_gpu_memory_fraction": 0.85},
        "speculative_config": {"decoding_type": "MTP", "num_nextn_predict_layers": 3},
        "cuda_graph_config": {"batch_sizes": [1, 2, 4], "padding": "yes # not a comment"},
        "list_block": [8, "sixteen"],
        "empty": None,
    }
    assert yamlish.loads("") == {}
    dumped = yaml.safe_dump(
        {
            "kv_cache_config": {"enable_block_reuse": True, "dtype": "fp8"},
            "cuda_graph_config": {"batch_sizes": [1, 8]},
            "attn_backend": "FLASHINFER",
            "speculative_config": {"decoding_type": "MTP", "num_nextn_predict_layers": 2},
        },
        sort_keys=False,
    )
    assert yamlish.loads(dumped) == yaml.safe_load(dumped)
    with pytest.raises(ValueError, match="line 2"):
        yamlish.loads("a: 1\nb c\n")


@pytest.mark.parametrize(
    ("model_id", "base", "fmt", "moe"),
    [
        ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "qwen3-235b-a22b", "fp8", True),
        ("Qwen/Qwen3-32B-AWQ", "qwen3-32b", "int4", False),
        ("vllm-ascend/Qwen3-8B-W8A8", "qwen3-8b", "w8a8", False),
        ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4", "qwen2.5-7b", "int4", False),
        ("acme/Giant-45B-A5B", "giant-45b-a5b", "bf16", True),
    ],
)
def test_model_ids_resolve(model_id, base, fmt, moe):
    spec = resolve_model(model_id)
    assert (spec.base_name, spec.weight_format, spec.arch.is_moe) == (base, fmt, moe)
    assert resolve_model("acme/no-such-model") is None


def test_local_hf_config_is_read(tmp_path):
    (tmp_path / "config.json").write_text(
        '{"architectures": ["MyForCausalLM"], "hidden_size": 2048, "num_hidden_layers": 24, '
        '"num_attention_heads": 16, "num_key_value_heads": 4, "intermediate_size": 5632, "vocab_size": 32000}'
    )
    spec = resolve_model(str(tmp_path))
    assert spec.arch.architecture == "MyForCausalLM" and spec.arch.kv_heads == 4
    assert 1.0 < spec.arch.params_b < 1.5


def test_prometheus_histogram_is_cumulative():
    recorder = MetricsRecorder()
    for value in (0.003, 0.05, 0.05, 7.0):
        recorder.ttft.observe(value)
    text = render_prometheus("vllm", 'm"x', recorder, EngineGauges(running=3, waiting=2), 0.0)
    assert 'vllm:num_requests_running{engine="0",model_name="m\\"x"} 3.0' in text
    assert 'vllm:time_to_first_token_seconds_bucket{le="0.005",engine="0",model_name="m\\"x"} 1.0' in text
    assert 'vllm:time_to_first_token_seconds_bucket{le="0.06",engine="0",model_name="m\\"x"} 3.0' in text
    assert 'vllm:time_to_first_token_seconds_bucket{le="+Inf",engine="0",model_name="m\\"x"} 4.0' in text
    assert "vllm:kv_cache_usage_perc" in metric_names("vllm") and "npu_cache_usage_perc" in metric_names(
        "mindie"
    )
    assert "trtllm_kv_cache_utilization" in metric_names("trtllm")
