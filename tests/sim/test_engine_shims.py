"""Engine CLI shims run as real processes on a simulated host: argv, readiness lines, failures, GPU state."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request

import pytest

from tests.sim.conftest import SimHost, free_port

READY = {
    "vllm": r"Application startup complete\.",
    "sglang": r"The server is fired up and ready to roll!",
    "trtllm": r"Application startup complete\.",
    "mindie": r"Daemon start success!",
}


def _chat(port: int, model: str, max_tokens: int = 4) -> dict:
    body = json.dumps(
        {
            "model": model,
            "messages": [{"role": "user", "content": "hello there"}],
            "max_tokens": max_tokens,
            "ignore_eos": True,
        }
    ).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        data=body,
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _get(port: int, path: str) -> tuple:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _memory_used(host: SimHost) -> list:
    result = host.run(["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"])
    assert result.returncode == 0, result.stderr
    return [int(line.split(", ")[1]) for line in result.stdout.splitlines()]


def test_vllm_serves_registers_gpus_and_stops_cleanly(sim_host):
    host = sim_host("H100", 4)
    port = free_port()
    engine = host.start(
        ["vllm", "serve", "Qwen/Qwen3-8B", "--host", "127.0.0.1", "--port", str(port), "-tp", "2"]
    )
    engine.wait_for(READY["vllm"])
    assert "vLLM API server version 0.11.0" in engine.log
    assert "GPU KV cache size:" in engine.log
    reply = _chat(port, "Qwen/Qwen3-8B")
    assert reply["usage"]["completion_tokens"] == 4
    used = _memory_used(host)
    assert used[0] > 60000 and used[1] > 60000 and used[2] == 0 and used[3] == 0
    table = host.run(["nvidia-smi"]).stdout
    assert "VLLM::Worker_TP0" in table and "VLLM::Worker_TP1" in table
    assert engine.terminate() == 0
    assert "Finished server process" in engine.log
    assert _memory_used(host) == [0, 0, 0, 0]
    assert not list((host.home / "state").glob("gpu-*.json"))


def test_vllm_cli_errors_like_argparse(sim_host):
    host = sim_host()
    unknown = host.run(["vllm", "serve", "Qwen/Qwen3-8B", "--no-such-flag"])
    assert unknown.returncode == 2
    assert "vllm serve: error: unrecognized arguments: --no-such-flag" in unknown.stderr
    bad_choice = host.run(["vllm", "serve", "Qwen/Qwen3-8B", "--kv-cache-dtype", "int3"])
    assert bad_choice.returncode == 2 and "invalid choice: 'int3'" in bad_choice.stderr
    version = host.run(["vllm", "--version"])
    assert version.returncode == 0 and version.stdout.strip() == "0.11.0"


@pytest.mark.parametrize(
    ("accelerator", "count", "argv", "env", "message"),
    [
        (
            "A100",
            1,
            ["trtllm-serve", "Qwen/Qwen3-32B-FP8"],
            {},
            "RuntimeError: Unsupported SM version for FP8 block scaling GEMM",
        ),
        ("A100", 1, ["trtllm-serve", "Qwen/Qwen3-32B-AWQ"], {}, "KeyError: 'weight'"),
        (
            "A100",
            1,
            ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-14B-FP8"],
            {},
            "type fp8e4nv not supported in this architecture",
        ),
        (
            "A100",
            4,
            ["vllm", "serve", "Qwen/Qwen3-235B-A22B-Instruct-2507", "-tp", "4"],
            {},
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate",
        ),
        (
            "A100",
            8,
            ["vllm", "serve", "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "-tp", "8"],
            {},
            "is not divisible by weight quantization block_n = 128",
        ),
        (
            "H100",
            8,
            ["vllm", "serve", "acme/no-such-model"],
            {},
            "Invalid repository ID or local directory specified: 'acme/no-such-model'",
        ),
        ("H100", 8, ["trtllm-serve", "acme/no-such-model"], {}, "is not a valid model identifier"),
        (
            "H100",
            8,
            ["vllm", "serve", "Qwen/Qwen3-8B", "-tp", "2"],
            {"CUDA_VISIBLE_DEVICES": "3"},
            "World size (2) is larger than the number of available GPUs (1)",
        ),
        (
            "A100",
            1,
            ["vllm", "serve", "Qwen/Qwen3-32B", "--gpu-memory-utilization", "0.85"],
            {},
            "To serve at least one request with the models's max seq len (40960)",
        ),
    ],
)
def test_engines_fail_with_real_messages(sim_host, accelerator, count, argv, env, message):
    host = sim_host(accelerator, count)
    result = host.run(argv + ["--port", str(free_port())], env=env)
    assert result.returncode != 0
    assert message in result.stderr, result.stdout + result.stderr
    assert not list((host.home / "state").glob("gpu-*.json"))


def test_models_that_fit_start(sim_host):
    """235B bf16 OOMs on 4×A100 (above) but fits on 8; FP8 on A100 runs through vLLM's Marlin fallback."""
    host = sim_host("A100", 8)
    port = free_port()
    big = host.start(
        [
            "vllm",
            "serve",
            "Qwen/Qwen3-235B-A22B-Instruct-2507",
            "-tp",
            "8",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
    )
    big.wait_for(READY["vllm"])
    assert big.terminate() == 0
    fp8 = host.start(
        ["vllm", "serve", "Qwen/Qwen3-14B-FP8", "--host", "127.0.0.1", "--port", str(free_port())]
    )
    fp8.wait_for(READY["vllm"])
    assert "Weight-only FP8 compression will be used leveraging the Marlin kernel" in fp8.log
    assert fp8.terminate() == 0


def test_port_in_use_and_busy_gpu(sim_host):
    host = sim_host("H100", 2)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        result = host.run(
            ["vllm", "serve", "Qwen/Qwen3-8B", "--host", "127.0.0.1", "--port", str(taken.getsockname()[1])]
        )
    assert result.returncode == 1 and "[Errno 98] Address already in use" in result.stderr
    first = host.start(
        ["vllm", "serve", "Qwen/Qwen3-8B", "--host", "127.0.0.1", "--port", str(free_port())],
        env={"CUDA_VISIBLE_DEVICES": "1"},
    )
    first.wait_for(READY["vllm"])
    second = host.run(
        ["vllm", "serve", "Qwen/Qwen3-8B", "--host", "127.0.0.1", "--port", str(free_port())],
        env={"CUDA_VISIBLE_DEVICES": "1"},
    )
    assert second.returncode == 1
    assert (
        "Free memory on device" in second.stderr
        and "less than desired GPU memory utilization" in second.stderr
    )
    assert first.terminate() == 0


def test_sglang_ready_line_metrics_only_when_enabled(sim_host):
    host = sim_host("H100", 2)
    port = free_port()
    plain = host.start(
        ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--port", str(port)]
    )
    plain.wait_for(READY["sglang"])
    assert _get(port, "/metrics")[0] == 404
    assert _chat(port, "Qwen/Qwen3-8B")["usage"]["completion_tokens"] == 4
    assert plain.terminate() == 0
    port = free_port()
    metered = host.start(
        [
            "python3",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "Qwen/Qwen3-8B",
            "--port",
            str(port),
            "--enable-metrics",
            "--tp-size",
            "2",
            "--served-model-name",
            "qwen",
        ]
    )
    metered.wait_for(READY["sglang"])
    status, text = _get(port, "/metrics")
    assert status == 200 and 'sglang:num_running_reqs{model_name="qwen"}' in text
    assert "sglang::scheduler_TP1" in host.run(["nvidia-smi"]).stdout
    assert metered.terminate() == 0
    bad = host.run(["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--bogus"])
    assert bad.returncode == 2 and "launch_server.py: error: unrecognized arguments: --bogus" in bad.stderr


def test_trtllm_options_file_and_click_errors(sim_host, tmp_path):
    host = sim_host("H100", 2)
    options = tmp_path / "extra.yaml"
    options.write_text(
        "kv_cache_config:\n  enable_block_reuse: true\n  dtype: fp8\nenable_chunked_prefill: true\n"
        "max_num_tokens: 4096  # budget\n"
    )
    port = free_port()
    engine = host.start(
        [
            "trtllm-serve",
            "serve",
            "Qwen/Qwen3-8B",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--tp_size=2",
            "--max_batch_size",
            "64",
            "--extra_llm_api_options",
            str(options),
        ]
    )
    engine.wait_for(READY["trtllm"])
    assert "max_num_tokens=4096, max_batch_size=64" in engine.log
    status, body = _get(port, "/metrics")
    assert status == 200 and json.loads(body)[0]["maxNumActiveRequests"] == 64
    assert _get(port, "/prometheus/metrics")[0] == 404  # no return_perf_metrics in the options file
    assert engine.terminate() == 0
    unknown = host.run(["trtllm-serve", "Qwen/Qwen3-8B", "--tp-size", "2"])
    assert unknown.returncode == 2
    assert "Usage: trtllm-serve serve [OPTIONS] MODEL" in unknown.stderr
    assert "Error: No such option: --tp-size" in unknown.stderr
    bad_key = tmp_path / "bad.yaml"
    bad_key.write_text("not_an_option: 1\n")
    invalid = host.run(["trtllm-serve", "Qwen/Qwen3-8B", "--extra_llm_api_options", str(bad_key)])
    assert invalid.returncode == 1 and "Extra inputs are not permitted" in invalid.stderr


def test_trtllm_prometheus_gauges_and_served_name(sim_host, tmp_path):
    """With ``return_perf_metrics: true`` the gauges perflab samples are on /prometheus/metrics."""
    host = sim_host("H100", 1)
    options = tmp_path / "extra.yaml"
    options.write_text("return_perf_metrics: true\nenable_iter_perf_stats: true\n")
    port = free_port()
    argv = ["trtllm-serve", "Qwen/Qwen3-8B", "--host", "127.0.0.1", "--port", str(port)]
    engine = host.start([*argv, "--served_model_name", "qwen", "--extra_llm_api_options", str(options)])
    engine.wait_for(READY["trtllm"])
    assert _chat(port, "qwen")["model"] == "qwen"
    status, text = _get(port, "/prometheus/metrics")
    assert status == 200
    for gauge in (
        "trtllm_num_requests_running",
        "trtllm_num_requests_waiting",
        "trtllm_kv_cache_utilization",
    ):
        assert f"\n{gauge}{{" in text
    assert engine.terminate() == 0


@pytest.mark.parametrize(
    ("backend", "started", "message", "failure_class"),
    [
        ("flash_attn", True, "", None),
        ("fa3", False, "Unknown attention backend: 'FA3'. Valid options are:", "unknown_argument"),
        (
            "FLASHMLA",
            False,
            "Selected backend AttentionBackendEnum.FLASHMLA is not valid for this configuration. "
            "Reason: ['compute capability not supported']",
            "unsupported_hardware",
        ),
    ],
)
def test_vllm_attention_backend_names_are_the_enum(sim_host, backend, started, message, failure_class):
    from perflab.engines import get_adapter

    host = sim_host("A100", 1)
    argv = ["vllm", "serve", "Qwen/Qwen3-8B", "--host", "127.0.0.1", "--port", str(free_port())]
    if started:
        engine = host.start([*argv, "--attention-backend", backend])
        engine.wait_for(READY["vllm"])
        assert engine.terminate() == 0
        return
    result = host.run([*argv, "--attention-backend", backend])
    assert result.returncode == 1 and message in result.stderr
    failure = get_adapter("vllm").classify_failure(result.stderr)
    assert failure is not None and failure.failure_class == failure_class


def _mindie_config(model: str, weights: str, world_size: int, prefix_cache: bool, port: int) -> dict:
    schedule = {"maxBatchSize": 64, "maxPrefillTokens": 8192, "templateType": "Standard"}
    model_config = {"modelName": model, "modelWeightPath": weights, "worldSize": world_size}
    if prefix_cache:
        schedule["enablePrefixCache"] = True
        model_config["plugin_params"] = json.dumps({"plugin_type": "prefix_cache"})
    return {
        "ServerConfig": {"ipAddress": "127.0.0.1", "port": port, "httpsEnabled": False},
        "BackendConfig": {
            "npuDeviceIds": [list(range(world_size))],
            "ModelDeployConfig": {"maxSeqLen": 8192, "ModelConfig": [model_config]},
            "ScheduleConfig": schedule,
        },
    }


def test_mindie_daemon_reads_config_and_crashes_on_moe_prefix_cache(sim_host, tmp_path):
    host = sim_host("910B", 8)
    port = free_port()
    config = tmp_path / "config.json"
    config.write_text(json.dumps(_mindie_config("Qwen3-8B", "/models/Qwen3-8B", 2, False, port)))
    config.chmod(0o644)
    refused = host.run(["mindieservice_daemon"], env={"MIES_CONFIG_JSON_PATH": str(config)})
    assert refused.returncode == 1
    assert "Check Other group permission failed" in refused.stdout
    assert "Required permisssion is 640, but got permission is 644" in refused.stdout  # MindIE's own typo
    config.chmod(0o640)
    engine = host.start(
        ["mindieservice_daemon"], env={"MIES_CONFIG_JSON_PATH": str(config), "MIES_SERVICE_MONITOR_MODE": "1"}
    )
    engine.wait_for(READY["mindie"])
    assert _chat(port, "Qwen3-8B")["model"] == "Qwen3-8B"
    status, text = _get(port, "/metrics")
    assert status == 200 and "npu_cache_usage_perc" in text
    npu = host.run(["npu-smi", "info"]).stdout
    assert "mindie_llm_back" in npu and "No running processes found in NPU 2" in npu
    assert engine.terminate() == 0
    config.write_text(json.dumps(_mindie_config("Qwen3-30B-A3B", "/models/Qwen3-30B-A3B", 4, True, port)))
    crash = host.run(["mindieservice_daemon"], env={"MIES_CONFIG_JSON_PATH": str(config)})
    assert crash.returncode == 1 and "prefix cache" in crash.stderr and "MoE" in crash.stderr
    config.write_text(json.dumps(_mindie_config("Qwen/Qwen3-8B", "/models/Qwen3-8B", 2, False, port)))
    bad_name = host.run(["mindieservice_daemon"], env={"MIES_CONFIG_JSON_PATH": str(config)})
    assert (
        bad_name.returncode == 1 and "The value of modelName must meet the following rules" in bad_name.stderr
    )
    default = host.run(["mindieservice_daemon"])
    assert default.returncode == 1 and "httpsEnabled" in default.stderr  # the shipped config wants TLS


def test_sigterm_during_startup_exits_promptly(sim_host):
    host = sim_host("H100", 1, time_scale=1.0)
    engine = host.start(["vllm", "serve", "Qwen/Qwen3-8B", "--host", "127.0.0.1", "--port", "0"])
    engine.wait_for(r"non-default args")
    assert engine.terminate(timeout=10) == 0, engine.log
    assert "Application startup complete" not in engine.log


def test_startup_scale_shortens_start_up_alone(sim_host):
    # At time scale 1 a 14B vLLM start takes about 40 s; startup_scale cuts only that wait.
    host = sim_host("H100", 1, time_scale=1.0, startup_scale=1000.0)
    engine = host.start(["vllm", "serve", "Qwen/Qwen3-14B", "--host", "127.0.0.1", "--port", "0"])
    engine.wait_for(r"Application startup complete", timeout=20)
    assert engine.terminate(timeout=10) == 0, engine.log
