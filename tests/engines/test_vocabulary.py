"""Enumerated knob values are checked with each engine's own words, and the simulator knows the same words."""

from __future__ import annotations

import pytest

from perflab.engines import EngineConfig, InvalidKnobValue, get_adapter
from perflab.engines import vocabulary as words
from perflab.sim.engines import sglang as sim_sglang
from perflab.sim.engines import vllm as sim_vllm
from perflab.sim.profiles import PROFILES


def _refusal(engine: str, **knobs: object) -> InvalidKnobValue:
    """The refusal of the static tables, the fallback where the installed engine cannot be asked."""
    with pytest.raises(InvalidKnobValue) as caught:
        get_adapter(engine).with_vocabulary().validate(EngineConfig(engine=engine, model="/m", **knobs))
    return caught.value


@pytest.mark.parametrize(
    "knobs",
    [
        {"kv_cache_dtype": "octave_k3v4"},
        {"attention_backend": "STEP5_DSA"},
        {"speculative_config": {"method": "step5_mtp", "num_speculative_tokens": 1}},
    ],
)
def test_vllm_leaves_words_newer_than_its_tables_to_the_installed_engine(knobs: dict) -> None:
    adapter = get_adapter("vllm")
    config = EngineConfig(engine="vllm", model="/m", **knobs)
    adapter.leaving_words_to_engine().validate(config)
    with pytest.raises(InvalidKnobValue, match="not one of vLLM 0.32.0's values"):
        adapter.validate(config)


def test_vllm_refuses_another_engines_spelling_even_when_the_engine_judges_the_rest() -> None:
    with pytest.raises(InvalidKnobValue, match="'fa3' is not one of vLLM 0.32.0's values; use FLASH_ATTN"):
        get_adapter("vllm").leaving_words_to_engine().validate(
            EngineConfig(engine="vllm", model="/m", attention_backend="fa3")
        )


def test_an_engine_that_cannot_be_asked_keeps_its_tables() -> None:
    adapter = get_adapter("trtllm")
    assert adapter.leaving_words_to_engine() is adapter


def test_an_installed_registry_replaces_the_table_naming_its_version() -> None:
    static = words.VLLM_VOCABULARY["kv_cache_dtype"]
    adapter = get_adapter("vllm").with_vocabulary(
        {"kv_cache_dtype": static.installed("0.33.0", (*static.values, "octave_k3v4"))}
    )
    adapter.validate(EngineConfig(engine="vllm", model="/m", kv_cache_dtype="octave_k3v4"))
    with pytest.raises(InvalidKnobValue, match="not one of vLLM 0.33.0's values"):
        adapter.validate(EngineConfig(engine="vllm", model="/m", kv_cache_dtype="fp4_e2m1"))


@pytest.mark.parametrize(
    ("value", "hint"), [("fa3", "FLASH_ATTN"), ("triton", "TRITON_ATTN"), ("torch_native", "TORCH_SDPA")]
)
def test_vllm_refuses_other_engines_backend_names_naming_the_enum_member(value: str, hint: str) -> None:
    error = _refusal("vllm", attention_backend=value)
    assert error.knob == "attention_backend"
    assert f"{value!r} is not one of vLLM 0.32.0's values; use {hint}" in str(error)
    assert "FLASHINFER" in str(error)


@pytest.mark.parametrize("value", ["FLASH_ATTN", "flashinfer", "Triton_Attn", "auto", "CPU_ATTN"])
def test_vllm_takes_enum_names_in_any_case(value: str) -> None:
    get_adapter("vllm").validate(EngineConfig(engine="vllm", model="m", attention_backend=value))


@pytest.mark.parametrize(
    ("engine", "knobs", "knob"),
    [
        ("vllm", {"kv_cache_dtype": "fp4_e2m1"}, "kv_cache_dtype"),
        ("vllm", {"quantization": "bitsandbytes"}, "quantization"),
        (
            "vllm",
            {"speculative_config": {"method": "nextn", "num_speculative_tokens": 1}},
            "speculative_config",
        ),
        ("vllm-ascend", {"quantization": "w8a8"}, "quantization"),
        ("sglang", {"attention_backend": "FLASH_ATTN"}, "attention_backend"),
        ("sglang", {"quantization": "fp_quant"}, "quantization"),
        ("trtllm", {"attention_backend": "flash_attn"}, "attention_backend"),
        ("trtllm", {"kv_cache_dtype": "fp8_e5m2"}, "kv_cache_dtype"),
    ],
)
def test_values_outside_the_engine_vocabulary_are_refused(engine: str, knobs: dict, knob: str) -> None:
    error = _refusal(engine, **knobs)
    assert error.knob == knob
    assert "'s values" in str(error)


def test_sglang_kv_cache_fp4_e2m1_is_gone_since_0_5_23() -> None:
    error = _refusal("sglang", kv_cache_dtype="fp4_e2m1")
    assert "'fp4_e2m1' is not one of SGLang 0.5.23's values; use nvfp4 or fp4_mx_block16" in str(error)


@pytest.mark.parametrize(
    ("engine", "knobs"),
    [
        ("vllm", {"quantization": "online", "kv_cache_dtype": "nvfp4", "performance_mode": "throughput"}),
        ("vllm", {"speculative_config": {"method": "qwen3_next_mtp", "num_speculative_tokens": 2}}),
        ("vllm-ascend", {"quantization": "ascend"}),
        ("sglang", {"attention_backend": "fa4", "kv_cache_dtype": "fp8", "quantization": "w8a8_fp8"}),
        ("trtllm", {"attention_backend": "flashinfer", "kv_cache_dtype": "fp8"}),
    ],
)
def test_values_in_the_engine_vocabulary_pass(engine: str, knobs: dict) -> None:
    get_adapter(engine).validate(EngineConfig(engine=engine, model="/m", **knobs))


def test_the_simulated_vllm_knows_every_value_the_adapter_accepts() -> None:
    assert set(words.VLLM_KV_CACHE_DTYPES) == set(sim_vllm.KV_CACHE_DTYPES)
    assert set(words.VLLM_ASCEND_QUANTIZATION_METHODS) == set(sim_vllm.QUANTIZATION_METHODS)
    assert set(words.VLLM_ATTENTION_BACKENDS) == set(PROFILES["vllm"].backend_names())


def test_the_simulated_sglang_knows_every_value_the_adapter_accepts() -> None:
    assert set(words.SGLANG_ATTENTION_BACKENDS) == set(sim_sglang.ATTENTION_BACKENDS)
    assert set(words.SGLANG_KV_CACHE_DTYPES) == set(sim_sglang.KV_CACHE_DTYPES)
    assert set(words.SGLANG_QUANTIZATION_METHODS) == set(sim_sglang.QUANTIZATION_METHODS)
    assert set(words.SGLANG_SPECULATIVE_ALGORITHMS) == set(sim_sglang.SPECULATIVE_ALGORITHMS)


@pytest.mark.parametrize("engine", ["vllm", "vllm-ascend"])
def test_underscore_spelling_of_a_typed_knob_flag_is_a_repeat(engine: str) -> None:
    """vLLM reads ``--enable_chunked_prefill`` as ``--enable-chunked-prefill``, so both repeat the knob."""
    config = EngineConfig(engine=engine, model="m", extra_args=("--enable_chunked_prefill",))
    with pytest.raises(
        InvalidKnobValue, match="repeats --enable-chunked-prefill; set enable_chunked_prefill"
    ):
        get_adapter(engine).validate(config)


def test_sglang_refuses_vllm_chunked_prefill_flag_in_extra_args() -> None:
    """docs/studies.md once appended --enable-chunked-prefill to every engine; SGLang has no such flag."""
    config = EngineConfig(engine="sglang", model="m", extra_args=("--enable-chunked-prefill",))
    with pytest.raises(
        InvalidKnobValue, match="vLLM's flag for enable_chunked_prefill, which SGLang does not"
    ):
        get_adapter("sglang").validate(config)
