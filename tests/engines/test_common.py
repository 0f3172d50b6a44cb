"""Behaviour every adapter shares: knob coverage, facts, extra args, env, validation errors."""

from __future__ import annotations

import pytest

from perflab.engines import (
    ADAPTERS,
    ENGINE_NAMES,
    KNOBS,
    EngineConfig,
    EngineConfigError,
    InvalidKnobValue,
    UnsupportedKnob,
    get_adapter,
)

FACTS = {
    # engine: (default port, health path, visible devices variable, running-requests gauge or None)
    "vllm": (8000, "/health", "CUDA_VISIBLE_DEVICES", "vllm:num_requests_running"),
    "sglang": (30000, "/health", "CUDA_VISIBLE_DEVICES", "sglang:num_running_reqs"),
    "trtllm": (8000, "/health", "CUDA_VISIBLE_DEVICES", "trtllm_num_requests_running"),
    "mindie": (1025, "/v2/health/ready", "ASCEND_RT_VISIBLE_DEVICES", "num_requests_running"),
    "vllm-ascend": (8000, "/health", "ASCEND_RT_VISIBLE_DEVICES", "vllm:num_requests_running"),
}


def test_one_adapter_per_engine() -> None:
    assert tuple(ADAPTERS) == ENGINE_NAMES
    assert all(get_adapter(name).name == name for name in ENGINE_NAMES)


def test_unknown_engine_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="known engines: vllm, sglang"):
        get_adapter("tgi")


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_every_knob_is_rendered_or_refused(engine: str) -> None:
    adapter = get_adapter(engine)
    assert set(KNOBS) <= adapter.covered_knobs()
    assert not set(adapter.unsupported) & (adapter.flags.knobs() | adapter.file_knobs)


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_engine_facts(engine: str) -> None:
    adapter = get_adapter(engine)
    port, health, devices, running = FACTS[engine]
    assert (adapter.default_port, adapter.health_path, adapter.visible_devices_env) == (port, health, devices)
    assert (adapter.metrics.running if adapter.metrics else None) == running


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_unsupported_knobs_raise_with_engine_knob_and_hint(engine: str) -> None:
    adapter = get_adapter(engine)
    values = {
        "dp": 2,
        "quantization": "fp8",
        "attention_backend": "FLASH_ATTN",
        "kv_cache_dtype": "fp8",
        "performance_mode": "throughput",
        "gpu_memory_utilization": 0.9,
        "reasoning_parser": "qwen3",
        "served_model_name": "qwen",
    }
    for knob, hint in adapter.unsupported.items():
        config = EngineConfig(engine=engine, model="m", **{knob: values[knob]})
        with pytest.raises(UnsupportedKnob) as caught:
            adapter.serve_argv(config, port=8000)
        assert (caught.value.engine, caught.value.knob, caught.value.hint) == (
            adapter.display_name,
            knob,
            hint,
        )
        assert str(caught.value).startswith(f"{adapter.display_name} has no ")
        with pytest.raises(UnsupportedKnob):
            adapter.display_command(config)


def test_unsupported_message_reads_as_one_sentence() -> None:
    config = EngineConfig(engine="trtllm", model="Qwen/Qwen3-32B", performance_mode="throughput")
    with pytest.raises(
        UnsupportedKnob, match="^TensorRT-LLM has no performance-mode setting; tune max_num_seqs"
    ):
        get_adapter("trtllm").validate(config)


@pytest.mark.parametrize(
    ("engine", "item", "knob"),
    [
        ("vllm", "--max-model-len=4096", "max_model_len"),
        ("vllm", "-tp", "tp"),
        ("vllm", "--enable-expert-parallel", "ep"),
        ("sglang", "--context-length", "max_model_len"),
        ("sglang", "--speculative-num-steps=3", "speculative_config"),
        ("trtllm", "--max_batch_size", "max_num_seqs"),
        ("vllm-ascend", "--no-enable-prefix-caching", "enable_prefix_caching"),
    ],
)
def test_extra_args_may_not_repeat_a_typed_knob(engine: str, item: str, knob: str) -> None:
    config = EngineConfig(engine=engine, model="m", extra_args=(item,))
    with pytest.raises(InvalidKnobValue, match=f"repeats {item.partition('=')[0]}; set {knob} instead"):
        get_adapter(engine).serve_argv(config, port=8000)


@pytest.mark.parametrize(
    ("engine", "item"),
    [
        ("vllm", "--port"),
        ("sglang", "--enable-metrics"),
        ("trtllm", "--extra_llm_api_options=x.yaml"),
        ("sglang", "--model"),
    ],
)
def test_extra_args_may_not_repeat_launch_flags(engine: str, item: str) -> None:
    config = EngineConfig(engine=engine, model="m", extra_args=(item,))
    with pytest.raises(InvalidKnobValue, match="perflab sets it itself|set model instead"):
        get_adapter(engine).validate(config)


def test_extra_args_pass_verbatim_and_last() -> None:
    config = EngineConfig(
        engine="vllm", model="m", extra_args=("--trust-remote-code", "--chat-template", "a b.jinja")
    )
    argv = get_adapter("vllm").serve_argv(config, port=8000)
    assert argv[-3:] == ["--trust-remote-code", "--chat-template", "a b.jinja"]
    assert get_adapter("vllm").display_command(config).endswith("--chat-template 'a b.jinja'")


def test_extra_args_must_be_single_lines() -> None:
    config = EngineConfig(engine="vllm", model="m", extra_args=("--x\n--y",))
    with pytest.raises(InvalidKnobValue, match="single line"):
        get_adapter("vllm").validate(config)


def test_wrong_engine_for_adapter() -> None:
    with pytest.raises(EngineConfigError, match="'sglang', not 'vllm'"):
        get_adapter("vllm").validate(EngineConfig(engine="sglang", model="m"))


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_env_sets_visible_devices_and_user_env(engine: str) -> None:
    adapter = get_adapter(engine)
    config = EngineConfig(engine=engine, model="m", tp=2, env={"HF_HOME": "/data/hf"})
    env = adapter.env(config, gpu_ids=[2, 3], run_dir="/runs/7")
    assert env[adapter.visible_devices_env] == "2,3"
    assert env["HF_HOME"] == "/data/hf"
    assert "CUDA_VISIBLE_DEVICES" not in env or adapter.visible_devices_env == "CUDA_VISIBLE_DEVICES"


def test_env_uses_config_gpu_ids_by_default_and_checks_the_count() -> None:
    adapter = get_adapter("vllm")
    config = EngineConfig(engine="vllm", model="m", tp=2, gpu_ids=(6, 7))
    assert adapter.env(config)["CUDA_VISIBLE_DEVICES"] == "6,7"
    with pytest.raises(InvalidKnobValue, match="gives 1 devices to a replica that needs tp×dp = 2"):
        adapter.env(config, gpu_ids=[0])


def test_env_may_not_set_visible_devices_itself() -> None:
    config = EngineConfig(engine="vllm", model="m", env={"CUDA_VISIBLE_DEVICES": "0"})
    with pytest.raises(InvalidKnobValue, match="use gpu_ids instead"):
        get_adapter("vllm").env(config, gpu_ids=[0])


def test_env_names_are_checked() -> None:
    config = EngineConfig(engine="sglang", model="m", env={"BAD-NAME": "1"})
    with pytest.raises(InvalidKnobValue, match="not a valid variable name"):
        get_adapter("sglang").validate(config)


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_single_word_knobs_reject_spaces(engine: str) -> None:
    config = EngineConfig(engine=engine, model="m", reasoning_parser="qwen3 --evil")
    with pytest.raises(EngineConfigError, match="reasoning_parser"):
        get_adapter(engine).validate(config)


def test_display_command_shows_port_and_env_but_not_host() -> None:
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-14B", port=8100, env={"VLLM_USE_V1": "1"})
    assert (
        get_adapter("vllm").display_command(config) == "VLLM_USE_V1=1 vllm serve Qwen/Qwen3-14B --port 8100"
    )
