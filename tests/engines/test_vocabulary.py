"""Enumerated knob values are checked with each engine's own words, release by release, and the simulator
knows the same words.

Tables (perflab/engines/tables): vLLM 0.32.0 and 0.33.0, SGLang 0.5.22 and 0.5.23, TensorRT-LLM's 1.3.0
release candidates. A host's version picks its release's table (the newest for an unknown version); with
no host at all (a spec being read, an imported command) any release's words pass.
"""

from __future__ import annotations

import pytest

from perflab.engines import EngineConfig, InvalidKnobValue, get_adapter, parse_serve_command
from perflab.engines.tables.sglang import SGLANG_0_5_22, SGLANG_0_5_23
from perflab.engines.tables.vllm import VLLM_0_32, VLLM_0_33
from perflab.sim.engines import sglang as sim_sglang
from perflab.sim.engines import vllm as sim_vllm
from perflab.sim.profiles import PROFILES

MEDUSA = {"method": "medusa", "num_speculative_tokens": 1}


def _refusal(engine: str, version: str | None = None, **knobs: object) -> InvalidKnobValue:
    """The refusal of perflab's table of ``version`` (None: the newest release), the fallback where the
    installed engine cannot be asked."""
    adapter = get_adapter(engine).for_version(version)
    assert adapter is not None
    with pytest.raises(InvalidKnobValue) as caught:
        adapter.validate(EngineConfig(engine=engine, model="/m", **knobs))
    return caught.value


def test_vllm_0_33s_table_is_0_32s_with_the_changes_its_wheel_shows() -> None:
    changes = {
        knob: (
            sorted(set(VLLM_0_33.words[knob]) - set(values)),
            sorted(set(values) - set(VLLM_0_33.words[knob])),
        )
        for knob, values in VLLM_0_32.words.items()
    }
    assert changes == {
        "attention_backend": (
            ["FLASH_ATTN_MLA_SPARSE_FA4", "ROCM_FLASHMLA_SPARSE_DSV41", "ROCM_OCTAVE", "STEP5_DSA"],
            [],
        ),
        "kv_cache_dtype": (["octave_k3v3", "octave_k3v3_compact", "octave_k3v4"], []),
        "quantization": ([], []),
        "speculative_config": (["step5_mtp"], ["medusa", "mlp_speculator"]),
        "performance_mode": ([], []),
    }
    assert VLLM_0_33.flags_added == {
        "--monokernel": False, "--no-monokernel": False,
        "--sleep-mode-backend": True, "--watchdog-config": True,
    }  # fmt: skip
    assert SGLANG_0_5_23.words == SGLANG_0_5_22.words
    assert SGLANG_0_5_23.flags_removed == {"--speculative-skip-dp-mlp-sync": False}


@pytest.mark.parametrize(
    ("version", "knobs"),
    [
        ("0.32.0", {"kv_cache_dtype": "octave_k3v4"}),
        ("0.32.0+cpu", {"attention_backend": "STEP5_DSA"}),
        ("0.32.0", {"speculative_config": {"method": "step5_mtp", "num_speculative_tokens": 1}}),
        ("0.33.0", {"speculative_config": MEDUSA}),
        ("0.33.0", {"speculative_config": {"method": "mlp_speculator", "num_speculative_tokens": 1}}),
        (None, {"speculative_config": MEDUSA}),
    ],
)
def test_a_hosts_vllm_version_picks_the_table_that_judges_naming_it(version: str | None, knobs: dict) -> None:
    error = _refusal("vllm", version, **knobs)
    named = "0.33.0" if version is None else version.partition("+")[0]
    assert f"is not one of vLLM {named}'s values" in str(error)


def test_without_a_host_the_words_of_any_release_pass_and_others_are_refused_naming_every_release() -> None:
    adapter = get_adapter("vllm")
    for knobs in ({"speculative_config": MEDUSA}, {"kv_cache_dtype": "octave_k3v4"}):
        adapter.validate(EngineConfig(engine="vllm", model="/m", **knobs))
    with pytest.raises(InvalidKnobValue, match="'fp4_e2m1' is not one of vLLM 0.32.0 or 0.33.0's values"):
        adapter.validate(EngineConfig(engine="vllm", model="/m", kv_cache_dtype="fp4_e2m1"))
    assert get_adapter("vllm").for_version("0.34.0") is None


def test_vllm_refuses_another_engines_spelling_even_when_the_engine_judges_the_rest() -> None:
    with pytest.raises(
        InvalidKnobValue, match="'fa3' is not one of vLLM 0.32.0 or 0.33.0's values; use FLASH_ATTN"
    ):
        get_adapter("vllm").leaving_words_to_engine().validate(
            EngineConfig(engine="vllm", model="/m", attention_backend="fa3")
        )
    get_adapter("vllm").leaving_words_to_engine().validate(
        EngineConfig(engine="vllm", model="/m", kv_cache_dtype="octave_k9")
    )


def test_an_engine_that_cannot_be_asked_keeps_its_tables() -> None:
    adapter = get_adapter("trtllm")
    assert adapter.leaving_words_to_engine() is adapter


def test_an_installed_registry_replaces_the_table_naming_its_version() -> None:
    adapter = get_adapter("vllm")
    static = adapter.vocabulary["kv_cache_dtype"]
    installed = adapter.with_vocabulary({"kv_cache_dtype": static.installed("0.34.0", ("auto", "octave_k9"))})
    installed.validate(EngineConfig(engine="vllm", model="/m", kv_cache_dtype="octave_k9"))
    with pytest.raises(InvalidKnobValue, match="not one of vLLM 0.34.0's values"):
        installed.validate(EngineConfig(engine="vllm", model="/m", kv_cache_dtype="fp8"))


@pytest.mark.parametrize(
    ("value", "hint"), [("fa3", "FLASH_ATTN"), ("triton", "TRITON_ATTN"), ("torch_native", "TORCH_SDPA")]
)
def test_vllm_refuses_other_engines_backend_names_naming_the_enum_member(value: str, hint: str) -> None:
    error = _refusal("vllm", attention_backend=value)
    assert error.knob == "attention_backend"
    assert f"{value!r} is not one of vLLM 0.33.0's values; use {hint}" in str(error)
    assert "FLASHINFER" in str(error) and "STEP5_DSA" in str(error)


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


def test_sglang_kv_cache_fp4_e2m1_is_gone() -> None:
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
        ("trtllm", {"attention_backend": "FLASHINFER_STAR_ATTENTION"}),
    ],
)
def test_values_in_the_engine_vocabulary_pass(engine: str, knobs: dict) -> None:
    get_adapter(engine).validate(EngineConfig(engine=engine, model="/m", **knobs))


@pytest.mark.parametrize(
    ("engine", "flag", "version", "problem"),
    [
        ("vllm", "--monokernel", "0.32.0", "vLLM 0.32.0 has no flag --monokernel (it came in 0.33.0)"),
        (
            "vllm", "--watchdog_config={}", "0.32.0",
            "vLLM 0.32.0 has no flag --watchdog-config (it came in 0.33.0)",
        ),
        (
            "sglang", "--speculative-skip-dp-mlp-sync", "0.5.23",
            "SGLang 0.5.23 has no flag --speculative-skip-dp-mlp-sync (removed in 0.5.23)",
        ),
        (
            "sglang", "--speculative-skip-dp-mlp-sync", None,
            "SGLang 0.5.23 has no flag --speculative-skip-dp-mlp-sync (removed in 0.5.23)",
        ),
    ],
)  # fmt: skip
def test_a_flag_the_hosts_release_lacks_is_refused_naming_the_release_that_changed_it(
    engine: str, flag: str, version: str | None, problem: str
) -> None:
    config = EngineConfig(engine=engine, model="/m", extra_args=(flag,))
    adapter = get_adapter(engine)
    judged = adapter.for_version(version)
    assert judged is not None
    with pytest.raises(InvalidKnobValue, match="extra_args") as caught:
        judged.validate(config)
    assert problem in str(caught.value)
    adapter.validate(config)  # some release has it: no host, no refusal


def test_the_flags_a_release_added_pass_on_that_release_and_read_as_switches_on_import() -> None:
    config = EngineConfig(
        engine="vllm", model="/m", extra_args=("--monokernel", "--sleep-mode-backend", "cumem")
    )
    judged = get_adapter("vllm").for_version("0.33.0")
    assert judged is not None
    judged.validate(config)
    sglang = get_adapter("sglang").for_version("0.5.22")
    assert sglang is not None
    sglang.validate(EngineConfig(engine="sglang", model="/m", extra_args=("--speculative-skip-dp-mlp-sync",)))
    imported = parse_serve_command("vllm serve --monokernel Qwen/Qwen3-8B --max-model-len 4096")
    assert (imported.model, imported.extra_args, imported.max_model_len) == (
        "Qwen/Qwen3-8B",
        ("--monokernel",),
        4096,
    )


def test_the_simulated_vllm_knows_every_value_of_the_0_32_table() -> None:
    """The simulator follows vLLM 0.32.0 (perflab/sim/engines/vllm.py)."""
    assert set(VLLM_0_32.words["kv_cache_dtype"]) == set(sim_vllm.KV_CACHE_DTYPES)
    assert {*VLLM_0_32.words["quantization"], "ascend"} == set(sim_vllm.QUANTIZATION_METHODS)
    assert set(VLLM_0_32.words["attention_backend"]) == set(PROFILES["vllm"].backend_names())


def test_the_simulated_sglang_knows_every_value_the_adapter_accepts() -> None:
    words = SGLANG_0_5_23.words
    assert set(words["attention_backend"]) == set(sim_sglang.ATTENTION_BACKENDS)
    assert set(words["kv_cache_dtype"]) == set(sim_sglang.KV_CACHE_DTYPES)
    assert set(words["quantization"]) == set(sim_sglang.QUANTIZATION_METHODS)
    assert set(words["speculative_config"]) == set(sim_sglang.SPECULATIVE_ALGORITHMS)


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
