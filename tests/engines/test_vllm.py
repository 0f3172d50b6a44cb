"""vLLM and vLLM-Ascend: every knob's flag, the EP rule, value checks, Ascend environment."""

from __future__ import annotations

import pytest

from perflab.engines import EngineConfig, InvalidKnobValue, UnsupportedKnob, get_adapter, parse_serve_command

VLLM = get_adapter("vllm")
ASCEND = get_adapter("vllm-ascend")

ALL_KNOBS = EngineConfig(
    engine="vllm",
    model="Qwen/Qwen3-30B-A3B",
    served_model_name="qwen",
    tp=2,
    dp=2,
    ep=4,
    quantization="fp8",
    attention_backend="FLASHINFER",
    max_num_batched_tokens=8192,
    max_num_seqs=256,
    enable_prefix_caching=False,
    kv_cache_dtype="fp8_e4m3",
    enable_chunked_prefill=True,
    speculative_config={"method": "eagle3", "model": "org/draft", "num_speculative_tokens": 3},
    performance_mode="interactivity",
    max_model_len=32768,
    gpu_memory_utilization=0.85,
    reasoning_parser="qwen3",
)


def test_every_knob_uses_the_vllm_flag() -> None:
    assert VLLM.serve_argv(ALL_KNOBS, port=8123, host="0.0.0.0") == [
        "vllm", "serve", "Qwen/Qwen3-30B-A3B", "--host", "0.0.0.0", "--port", "8123",
        "-tp", "2", "-dp", "2", "--enable-expert-parallel", "--quantization", "fp8",
        "--attention-backend", "FLASHINFER", "--max-num-batched-tokens", "8192", "--max-num-seqs", "256",
        "--no-enable-prefix-caching", "--kv-cache-dtype", "fp8_e4m3", "--enable-chunked-prefill",
        "--speculative-config", '{"method":"eagle3","model":"org/draft","num_speculative_tokens":3}',
        "--performance-mode", "interactivity", "--max-model-len", "32768", "--gpu-memory-utilization", "0.85",
        "--reasoning-parser", "qwen3", "--served-model-name", "qwen",
    ]  # fmt: skip


def test_all_knobs_survive_display_and_parse() -> None:
    assert parse_serve_command(VLLM.display_command(ALL_KNOBS)) == ALL_KNOBS


def test_defaults_render_no_flags() -> None:
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-14B")
    assert VLLM.display_command(config) == "vllm serve Qwen/Qwen3-14B"
    assert VLLM.files(config, port=8000) == {}


@pytest.mark.parametrize(("tp", "dp", "ep"), [(4, 1, 2), (2, 2, 2), (8, 1, 16)])
def test_expert_parallel_size_must_be_tp_times_dp(tp: int, dp: int, ep: int) -> None:
    config = EngineConfig(engine="vllm", model="m", tp=tp, dp=dp, ep=ep)
    with pytest.raises(InvalidKnobValue, match=f"must be 1 or TP×DP = {tp * dp}"):
        VLLM.serve_argv(config, port=8000)


def test_expert_parallel_flag_parses_to_tp_times_dp() -> None:
    config = parse_serve_command(
        "vllm serve m --tensor-parallel-size 2 --data-parallel-size 4 --enable-expert-parallel"
    )
    assert (config.tp, config.dp, config.ep) == (2, 4, 8)


@pytest.mark.parametrize(
    ("update", "knob"),
    [
        ({"kv_cache_dtype": "int8"}, "kv_cache_dtype"),
        ({"performance_mode": "fast"}, "performance_mode"),
        ({"speculative_config": {"num_speculative_tokens": 2}}, "speculative_config"),
    ],
)
def test_values_vllm_rejects(update: dict, knob: str) -> None:
    with pytest.raises(InvalidKnobValue) as caught:
        VLLM.with_vocabulary().validate(EngineConfig(engine="vllm", model="m", **update))
    assert caught.value.knob == knob


@pytest.mark.parametrize(
    ("command", "prefix_caching", "chunked_prefill", "extra"),
    [
        ("vllm serve --disable-prefix-caching M", False, None, ()),
        ("vllm serve M --disable-prefix-caching --disable-chunked-prefill", False, False, ()),
        ("vllm serve --enable-prefix-caching --disable-prefix-caching M", False, None, ()),
        (
            "vllm serve --disable-log-stats --no-enable-chunked-prefill M",
            None,
            False,
            ("--disable-log-stats",),
        ),
    ],
)
def test_imports_read_0_33_spellings_and_options_before_the_model(
    command: str, prefix_caching: bool | None, chunked_prefill: bool | None, extra: tuple[str, ...]
) -> None:
    config = parse_serve_command(command)
    assert config.model == "M"
    assert (config.enable_prefix_caching, config.enable_chunked_prefill) == (prefix_caching, chunked_prefill)
    assert config.extra_args == extra


def test_an_extra_argument_contradicting_a_typed_knob_is_refused_naming_both() -> None:
    config = EngineConfig(
        engine="vllm", model="m", enable_prefix_caching=True, extra_args=("--disable-prefix-caching",)
    )
    with pytest.raises(InvalidKnobValue) as caught:
        VLLM.validate(config)
    assert (
        "repeats --disable-prefix-caching, contradicting the typed knob enable_prefix_caching: true"
        in str(caught.value)
    )


def test_parse_reads_aliases_and_negations() -> None:
    config = parse_serve_command(
        "vllm serve m -q awq --no-enable-chunked-prefill --enable-prefix-caching "
        "--gpu-memory-utilization=0.5 --trust-remote-code --seed 7"
    )
    assert config.quantization == "awq"
    assert (config.enable_chunked_prefill, config.enable_prefix_caching) == (False, True)
    assert config.gpu_memory_utilization == 0.5
    assert config.extra_args == ("--trust-remote-code", "--seed", "7")


def test_vllm_ascend_is_vllm_argv_with_ascend_environment() -> None:
    config = EngineConfig(
        engine="vllm-ascend", model="Qwen/Qwen3-30B-A3B", tp=2, env={"TASK_QUEUE_ENABLE": "2"}
    )
    assert ASCEND.serve_argv(config, port=8000)[:3] == ["vllm", "serve", "Qwen/Qwen3-30B-A3B"]
    assert ASCEND.display_command(config) == "TASK_QUEUE_ENABLE=2 vllm serve Qwen/Qwen3-30B-A3B -tp 2"
    env = ASCEND.env(config, gpu_ids=[0, 1], run_dir="/r")
    assert env["ASCEND_RT_VISIBLE_DEVICES"] == "0,1"
    assert env["PYTORCH_NPU_ALLOC_CONF"] == "expandable_segments:True"
    assert env["HCCL_OP_EXPANSION_MODE"] == "AIV"
    assert env["TASK_QUEUE_ENABLE"] == "2"
    assert "CUDA_VISIBLE_DEVICES" not in env


def test_vllm_ascend_refuses_attention_backend() -> None:
    config = EngineConfig(engine="vllm-ascend", model="m", attention_backend="FLASH_ATTN")
    with pytest.raises(UnsupportedKnob, match="vLLM-Ascend has no attention-backend setting"):
        ASCEND.serve_argv(config, port=8000)


def test_vllm_readiness_is_the_uvicorn_startup_line() -> None:
    assert VLLM.is_ready_line("(APIServer pid=1) INFO:     Application startup complete.")
    assert not VLLM.is_ready_line(
        "(APIServer pid=1) INFO 02-13 06:32:06 [api_server.py:500] Starting vLLM API server 0"
    )


CPU_KNOBS = EngineConfig(
    engine="vllm",
    model="/models/tiny",
    cpu_kvcache_space_gib=8,
    cpu_omp_threads_bind="0-31|32-63",
    cpu_reserved_cores=2,
    tp=2,
)


def test_cpu_knobs_are_vllm_cpu_environment_variables() -> None:
    assert VLLM.display_command(CPU_KNOBS) == (
        "VLLM_CPU_KVCACHE_SPACE=8 'VLLM_CPU_OMP_THREADS_BIND=0-31|32-63' VLLM_CPU_NUM_OF_RESERVED_CPU=2 "
        "vllm serve /models/tiny -tp 2"
    )
    assert "VLLM_CPU_KVCACHE_SPACE" not in " ".join(VLLM.serve_argv(CPU_KNOBS, port=8000))
    assert parse_serve_command(VLLM.display_command(CPU_KNOBS)) == CPU_KNOBS


@pytest.mark.parametrize("bind", ["auto", "nobind", "0-31", "5,2-4", "0-31|32-63"])
def test_cpu_thread_binding_takes_vllm_forms(bind: str) -> None:
    VLLM.validate(EngineConfig(engine="vllm", model="m", cpu_omp_threads_bind=bind))


@pytest.mark.parametrize("bind", ["all", "0-", "0;1", "|0"])
def test_cpu_thread_binding_refuses_other_text(bind: str) -> None:
    with pytest.raises(InvalidKnobValue, match="cpu_omp_threads_bind must be auto, nobind or CPU id lists"):
        VLLM.validate(EngineConfig(engine="vllm", model="m", cpu_omp_threads_bind=bind))


def test_cpu_knob_variables_in_env_point_at_the_knob() -> None:
    config = EngineConfig(engine="vllm", model="m", env={"VLLM_CPU_KVCACHE_SPACE": "4"})
    with pytest.raises(InvalidKnobValue, match="sets VLLM_CPU_KVCACHE_SPACE; set cpu_kvcache_space_gib"):
        VLLM.validate(config)
    with pytest.raises(InvalidKnobValue, match="sets CPU_VISIBLE_MEMORY_NODES"):
        VLLM.validate(EngineConfig(engine="vllm", model="m", env={"CPU_VISIBLE_MEMORY_NODES": "1"}))


@pytest.mark.parametrize("engine", ["sglang", "trtllm", "mindie", "vllm-ascend"])
def test_engines_without_a_cpu_build_refuse_cpu_knobs(engine: str) -> None:
    with pytest.raises(UnsupportedKnob, match="it is a knob of vLLM's CPU build"):
        get_adapter(engine).validate(EngineConfig(engine=engine, model="m", cpu_kvcache_space_gib=4))
