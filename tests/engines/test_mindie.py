"""MindIE: the config.json mapping, the daemon launch, environment and knob checks."""

from __future__ import annotations

import json

import pytest

from perflab.engines import EngineConfig, InvalidKnobValue, UnsupportedKnob, get_adapter, parse_serve_command

MINDIE = get_adapter("mindie")


def _config_json(
    config: EngineConfig, port: int = 1025, host: str = "127.0.0.1", engine_version: str | None = None
) -> dict:
    files = MINDIE.files(config, port=port, host=host, engine_version=engine_version)
    assert list(files) == ["config.json"]
    return json.loads(files["config.json"])


def test_seed_command_maps_to_a_default_deployment() -> None:
    config = parse_serve_command("mindie serve /models/Qwen3-30B-A3B")
    document = _config_json(config, port=1030)
    server = document["ServerConfig"]
    assert (server["ipAddress"], server["port"], server["managementPort"], server["metricsPort"]) == (
        "127.0.0.1", 1030, 1030, 1030,
    )  # fmt: skip
    assert server["httpsEnabled"] is False and server["allowAllZeroIpListening"] is False
    backend = document["BackendConfig"]
    assert backend["npuDeviceIds"] == [[0]]
    deploy = backend["ModelDeployConfig"]
    assert (deploy["maxSeqLen"], deploy["maxInputTokenLen"]) == (8192, 8192)
    (model,) = deploy["ModelConfig"]
    assert (model["modelName"], model["modelWeightPath"], model["worldSize"], model["tp"]) == (
        "Qwen3-30B-A3B", "/models/Qwen3-30B-A3B", 1, 1,
    )  # fmt: skip
    assert "plugin_params" not in model and "moe_ep" not in model and "dp" not in model
    schedule = backend["ScheduleConfig"]
    assert (schedule["maxBatchSize"], schedule["maxPrefillTokens"], schedule["maxIterTimes"]) == (
        200,
        8192,
        8192,
    )
    assert "enablePrefixCache" not in schedule


def test_prefix_cache_is_the_plugin_plus_the_2x_schedule_flag() -> None:
    config = parse_serve_command("mindie serve /models/Qwen3-30B-A3B --enable-prefix-caching")
    for version, schedule_flag in (("2.1.RC1", True), (None, True), ("3.0.0", False)):
        document = _config_json(config, engine_version=version)
        assert ("enablePrefixCache" in document["BackendConfig"]["ScheduleConfig"]) is schedule_flag
        model = document["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]
        assert json.loads(model["plugin_params"]) == {"plugin_type": "prefix_cache"}


def test_parallelism_and_batching_knobs() -> None:
    config = EngineConfig(
        engine="mindie", model="/models/Qwen3-235B-A22B", served_model_name="qwen3-235b", tp=4, dp=2, ep=8,
        max_num_seqs=32, max_num_batched_tokens=16384, max_model_len=32768,
    )  # fmt: skip
    document = _config_json(config, host="0.0.0.0")
    assert document["ServerConfig"]["allowAllZeroIpListening"] is True
    backend = document["BackendConfig"]
    assert backend["npuDeviceIds"] == [[0, 1, 2, 3, 4, 5, 6, 7]]
    model = backend["ModelDeployConfig"]["ModelConfig"][0]
    keys = ("modelName", "modelWeightPath", "worldSize", "tp", "dp", "moe_tp", "moe_ep")
    assert {key: model[key] for key in keys} == {
        "modelName": "qwen3-235b", "modelWeightPath": "/models/Qwen3-235B-A22B", "worldSize": 8, "tp": 4,
        "dp": 2, "moe_tp": 1, "moe_ep": 8,
    }  # fmt: skip
    assert backend["ModelDeployConfig"]["maxSeqLen"] == 32768
    assert backend["ModelDeployConfig"]["maxInputTokenLen"] == 16384
    schedule = backend["ScheduleConfig"]
    assert (schedule["maxBatchSize"], schedule["maxPrefillBatchSize"], schedule["maxPrefillTokens"]) == (
        32,
        32,
        16384,
    )
    assert schedule["maxIterTimes"] == 32768


def test_chunked_prefill_is_split_fuse() -> None:
    config = EngineConfig(engine="mindie", model="/m", enable_chunked_prefill=True, max_num_seqs=8)
    schedule = _config_json(config)["BackendConfig"]["ScheduleConfig"]
    assert (schedule["templateType"], schedule["enableSplit"], schedule["splitChunkTokens"]) == (
        "Mix",
        True,
        512,
    )
    assert schedule["splitStartBatchSize"] == 8
    current = _config_json(config, engine_version="3.0.0")
    schedule = current["BackendConfig"]["ScheduleConfig"]
    assert schedule["templateType"] == "Mix"
    assert not {
        "enableSplit",
        "splitType",
        "splitStartType",
        "splitChunkTokens",
        "splitStartBatchSize",
    } & set(schedule)
    model = current["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]
    assert json.loads(model["plugin_params"]) == {"plugin_type": "splitfuse"}


def test_mtp_speculation_is_the_mtp_plugin() -> None:
    config = EngineConfig(
        engine="mindie", model="/m", speculative_config={"method": "mtp", "num_speculative_tokens": 2}
    )
    model = _config_json(config)["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]
    assert json.loads(model["plugin_params"]) == {"plugin_type": "mtp", "num_speculative_tokens": 2}
    shown = MINDIE.display_command(config)
    assert shown == "mindie serve /m --enable-multi-token-prediction --multi-token-prediction-tokens 2"
    assert parse_serve_command(shown) == config


def test_launch_is_the_daemon_with_env_pointing_at_the_config() -> None:
    config = EngineConfig(engine="mindie", model="/m", tp=2, gpu_memory_utilization=0.85)
    assert MINDIE.serve_argv(config, port=1025) == ["mindieservice_daemon"]
    assert MINDIE.serve_argv(config, port=1025, engine_version="2.2.RC1") == ["mindieservice_daemon"]
    assert MINDIE.serve_argv(config, port=1025, engine_version="3.0.0") == ["mindie_llm_server"]
    env = MINDIE.env(config, gpu_ids=[6, 7], run_dir="/var/perflab/runs/12")
    assert env["MIES_CONFIG_JSON_PATH"] == "/var/perflab/runs/12/config.json"
    assert env["ASCEND_RT_VISIBLE_DEVICES"] == "6,7"
    assert env["NPU_MEMORY_FRACTION"] == "0.85"
    assert env["MIES_SERVICE_MONITOR_MODE"] == "1"


def test_display_uses_the_simplified_vllm_like_flags() -> None:
    config = EngineConfig(
        engine="mindie", model="/models/Qwen3-30B-A3B", tp=2, ep=2, max_num_seqs=64,
        max_num_batched_tokens=4096, max_model_len=16384, enable_prefix_caching=True,
        gpu_memory_utilization=0.9,
    )  # fmt: skip
    shown = MINDIE.display_command(config)
    assert shown == (
        "mindie serve /models/Qwen3-30B-A3B -tp 2 --moe-expert-parallel-size 2 --max-prefill-tokens 4096 "
        "--max-batch-size 64 --enable-prefix-caching --max-seq-len 16384 --npu-memory-fraction 0.9"
    )
    assert parse_serve_command(shown) == config


@pytest.mark.parametrize(
    ("update", "knob", "problem"),
    [
        ({"tp": 3}, "tp", "power of 2"),
        ({"tp": 2, "ep": 4}, "ep", "must divide the world size"),
        ({"max_num_batched_tokens": 16384}, "max_num_batched_tokens", "must not exceed max_model_len"),
        ({"max_num_seqs": 6000}, "max_num_seqs", "at most 5000"),
        (
            {"enable_prefix_caching": True, "enable_chunked_prefill": True},
            "enable_chunked_prefill",
            "cannot be combined",
        ),
        ({"dp": 2, "enable_prefix_caching": True}, "enable_prefix_caching", "dp > 1"),
        (
            {"speculative_config": {"method": "eagle", "num_speculative_tokens": 2}},
            "speculative_config",
            "mtp",
        ),
        ({"extra_args": ("--foo",)}, "extra_args", "takes no arguments"),
        (
            {"speculative_config": {"method": "mtp", "num_speculative_tokens": 3}},
            "speculative_config",
            "not 1 or 2",
        ),
        ({"model": "Qwen/Qwen3-30B-A3B"}, "model", "not a local directory"),
        ({"served_model_name": "Qwen/Qwen3-30B-A3B"}, "served_model_name", "not a MindIE modelName"),
        ({"served_model_name": "qwen-"}, "served_model_name", "starting and ending with a letter"),
    ],
)
def test_values_mindie_rejects(update: dict, knob: str, problem: str) -> None:
    with pytest.raises(InvalidKnobValue, match=problem) as caught:
        MINDIE.files(EngineConfig(engine="mindie", **{"model": "/m", **update}), port=1025)
    assert caught.value.knob == knob


def test_a_hub_id_can_be_shown_but_not_launched() -> None:
    """The seeds print GPUStack's ``mindie serve Qwen/Qwen3-30B-A3B``; MindIE itself loads a directory."""
    config = parse_serve_command("mindie serve Qwen/Qwen3-30B-A3B")
    assert MINDIE.display_command(config) == "mindie serve Qwen/Qwen3-30B-A3B"
    with pytest.raises(InvalidKnobValue, match="not a local directory"):
        MINDIE.serve_argv(config, port=1025)


@pytest.mark.parametrize(
    ("model", "served", "name"),
    [
        ("/data/weights/Qwen3-30B-A3B/", None, "Qwen3-30B-A3B"),
        ("/data/weights/Qwen3 8B (w8a8)", None, "Qwen3-8B--w8a8"),
        ("/data/weights/DeepSeek-R1", "DeepSeek-R1_w8a8", "DeepSeek-R1_w8a8"),
    ],
)
def test_model_name_is_a_valid_mindie_model_name(model: str, served: str | None, name: str) -> None:
    """MindIE-LLM model_deploy_config.cpp: ^[a-zA-Z0-9_.-]{1,256}$, first and last a letter or digit."""
    config = EngineConfig(engine="mindie", model=model, served_model_name=served)
    deployed = _config_json(config)["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]
    assert (deployed["modelName"], deployed["modelWeightPath"]) == (name, model)
    assert MINDIE.served_name(config) == name


def test_config_json_is_written_with_the_only_mode_mindie_accepts() -> None:
    """MindIE-LLM common_util.cpp checks config.json with FileUtils::FILE_MODE_640."""
    assert MINDIE.file_mode == 0o640


@pytest.mark.parametrize("knob", ["quantization", "kv_cache_dtype", "attention_backend", "reasoning_parser"])
def test_refused_knobs(knob: str) -> None:
    with pytest.raises(UnsupportedKnob, match=f"MindIE has no {knob.replace('_', '-')} setting"):
        MINDIE.serve_argv(EngineConfig(engine="mindie", model="/m", **{knob: "x"}), port=1025)


def test_readiness_line() -> None:
    assert MINDIE.is_ready_line("Daemon start success!")
    assert not MINDIE.is_ready_line("[llm] [INFO] [llm_manager_impl.cpp:76] LLMRuntime init success!")
