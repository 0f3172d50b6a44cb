"""Simulated SGLang prefill and decode workers behind the real ``sglang-router``: every request goes
prefill → decode (the KV handoff of each room is logged on both sides), the decode worker streams the
tokens, and a missing transfer library or an unreachable prefill fail the way SGLang's do."""

from __future__ import annotations

import re
import sys
import urllib.request

import pytest

from perflab.engines.disagg import WorkerPorts, router_argv
from perflab.engines.layout import Disaggregation
from tests.sim.conftest import free_port
from tests.sim.handoffs import chat_through_router
from tests.sim.sse_client import post_status

READY = r"The server is fired up and ready to roll!"
MODEL = "Qwen/Qwen3-8B"


def _argv(role: str, port: int, bootstrap: int, backend: str = "mooncake") -> list[str]:
    argv = [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        MODEL,
        "--port",
        str(port),
        "--enable-metrics",
        "--disaggregation-mode",
        role,
        "--disaggregation-transfer-backend",
        backend,
    ]
    return argv + (["--disaggregation-bootstrap-port", str(bootstrap)] if role == "prefill" else [])


def _worker(host, role: str, port: int, bootstrap: int, backend: str = "mooncake"):
    argv = _argv(role, port, bootstrap, backend)
    return host.start(argv, env={"CUDA_VISIBLE_DEVICES": "0" if role == "prefill" else "1"})


def _router(host, prefill: list[WorkerPorts], decode: list[WorkerPorts]):
    port = free_port()
    argv = router_argv(
        "sglang",
        Disaggregation(transfer_backend="mooncake"),
        prefill=prefill,
        decode=decode,
        port=port,
        metrics_port=free_port(),
    )
    argv[0] = sys.executable  # the test venv's Python, where sglang-router is installed
    return host.start(argv), port


@pytest.mark.timeout(180)
def test_every_request_goes_prefill_then_decode_through_the_real_router(sim_host):
    pytest.importorskip("sglang_router")
    host = sim_host("H200", 2, time_scale=50.0, startup_scale=1000.0)
    prefill = WorkerPorts(free_port(), free_port())
    decode = WorkerPorts(free_port(), free_port())
    prefill_worker = _worker(host, "prefill", prefill.api, prefill.side)
    decode_worker = _worker(host, "decode", decode.api, decode.side)
    prefill_worker.wait_for(READY)
    decode_worker.wait_for(READY)
    router, port = _router(host, [prefill], [decode])
    router.wait_for(r"Activated 1 worker\(s\)[\s\S]*Activated 1 worker\(s\)", timeout=60)
    source = rf"127\.0\.0\.1:{prefill.side}"
    chat_through_router(port, MODEL, prefill_worker, decode_worker, r"room=(\d+)", source)
    # the decode worker generated the tokens; the prefill worker only the first one of each request
    prefill_metrics = (
        urllib.request.urlopen(f"http://127.0.0.1:{prefill.api}/metrics", timeout=10).read().decode()
    )
    decode_metrics = (
        urllib.request.urlopen(f"http://127.0.0.1:{decode.api}/metrics", timeout=10).read().decode()
    )
    assert re.search(r"sglang:generation_tokens_total\{[^}]*\} 12(\.0)?$", prefill_metrics, re.M)
    assert re.search(r"sglang:generation_tokens_total\{[^}]*\} 60(\.0)?$", decode_metrics, re.M)


def test_a_transfer_library_the_host_lacks_fails_like_sglang(sim_host):
    host = sim_host("H200", 1, transfer_backends=["mooncake"])
    result = host.run(_argv("prefill", free_port(), free_port(), "nixl"))
    assert result.returncode == 1
    assert "ImportError: Please install NIXL by following the instructions at" in result.stderr


@pytest.mark.timeout(120)
def test_a_decode_worker_that_cannot_reach_its_prefill_fails_the_request(sim_host):
    host = sim_host("H200", 2, time_scale=50.0, startup_scale=1000.0)
    decode = WorkerPorts(free_port(), free_port())
    worker = _worker(host, "decode", decode.api, decode.side)
    worker.wait_for(READY)
    body = {
        "model": MODEL,
        "prompt": "hello",
        "max_tokens": 4,
        "bootstrap_host": "127.0.0.1",
        "bootstrap_port": free_port(),
        "bootstrap_room": 7,
    }
    assert post_status(decode.api, "/v1/completions", body) == 500
    worker.wait_for(r"Could not fetch prefill parallel info from 127\.0\.0\.1:\d+ after 3 attempts")
