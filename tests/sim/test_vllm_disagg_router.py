"""Simulated vLLM prefill and decode workers (``--kv-transfer-config`` with NixlConnector or
MooncakeConnector) behind the real ``vllm-router`` 0.1.17: every request goes prefill → decode — the
router's prefill request carries ``kv_transfer_params`` ``do_remote_decode``, its decode request those
the prefill answered with (NIXL) or the prefill's bootstrap address and engine id (Mooncake, which the
router asks the prefill's bootstrap server for when it starts) — the decode worker streams the tokens,
and a missing transfer library, a bad connector and an unreachable prefill fail the way vLLM's do."""

from __future__ import annotations

import re
import shutil
import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from perflab.engines.disagg import WorkerPorts, role_args, role_env, router_argv
from perflab.engines.layout import Disaggregation
from tests.sim.conftest import free_port
from tests.sim.handoffs import chat_through_router
from tests.sim.sse_client import post_status

READY = r"Application startup complete"
MODEL = "Qwen/Qwen3-8B"
ROUTER = Path(sys.executable).parent / "vllm-router"


def _await_listening(port: int, timeout_s: float = 30.0) -> None:
    """Wait until ``port`` accepts connections: the router may log that it is ready before it listens."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _worker(host, layout: Disaggregation, role: str, ports: WorkerPorts, gpu: int):
    argv = ["vllm", "serve", MODEL, "--port", str(ports.api), *role_args("vllm", layout, role, ports)]
    env = {"CUDA_VISIBLE_DEVICES": str(gpu), **role_env("vllm", layout, role, ports)}
    return host.start(argv, env=env)


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("backend", "word"), [("nixl", "request"), ("mooncake", "transfer")])
def test_every_request_goes_prefill_then_decode_through_the_real_vllm_router(sim_host, backend, word):
    if not ROUTER.exists() and shutil.which("vllm-router") is None:
        pytest.skip("vllm-router is not installed")
    host = sim_host("H200", 2, time_scale=50.0, startup_scale=1000.0)
    layout = Disaggregation(transfer_backend=backend)
    prefill = WorkerPorts(free_port(), free_port())
    decode = WorkerPorts(free_port(), free_port())
    prefill_worker = _worker(host, layout, "prefill", prefill, 0)
    decode_worker = _worker(host, layout, "decode", decode, 1)
    prefill_worker.wait_for(READY)
    decode_worker.wait_for(READY)
    port = free_port()
    argv = router_argv(
        "vllm", layout, prefill=[prefill], decode=[decode], port=port, metrics_port=free_port()
    )
    router = host.start([str(ROUTER) if ROUTER.exists() else argv[0], *argv[1:]])
    router.wait_for(r"Router ready \| workers:", timeout=90)
    _await_listening(port)
    # NIXL's side channel is on VLLM_NIXL_SIDE_CHANNEL_HOST (localhost), Mooncake's bootstrap server on
    # the prefill URL's host
    source = rf"(?:localhost|127\.0\.0\.1):{prefill.side}"
    chat_through_router(port, MODEL, prefill_worker, decode_worker, rf"{word}=(\S+)", source)
    # the prefill worker computed one token of each request, the decode worker the rest
    prefill_metrics = urllib.request.urlopen(f"http://127.0.0.1:{prefill.api}/metrics", timeout=10).read()
    decode_metrics = urllib.request.urlopen(f"http://127.0.0.1:{decode.api}/metrics", timeout=10).read()
    assert re.search(rb"vllm:generation_tokens_total\{[^}]*\} 12(\.0)?$", prefill_metrics, re.M)
    assert re.search(rb"vllm:generation_tokens_total\{[^}]*\} 60(\.0)?$", decode_metrics, re.M)


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ('{"kv_connector":"NixlConnector","kv_role":"kv_both"}', "RuntimeError: NIXL is not available"),
        (
            '{"kv_connector":"P2pNcclConnector","kv_role":"kv_both"}',
            "Unsupported connector type: P2pNcclConnector",
        ),
        ('{"kv_connector":"NixlConnector","kv_role":"kv_sender"}', "Unsupported kv_role: kv_sender"),
    ],
)
def test_a_connector_the_host_or_vllm_lacks_fails_like_vllm(sim_host, config, error):
    host = sim_host("H200", 1, transfer_backends=["mooncake"])
    result = host.run(["vllm", "serve", MODEL, "--port", str(free_port()), "--kv-transfer-config", config])
    assert result.returncode != 0
    assert error in result.stdout + result.stderr


@pytest.mark.timeout(120)
def test_a_decode_worker_that_cannot_reach_its_prefill_fails_the_request(sim_host):
    host = sim_host("H200", 1, time_scale=50.0, startup_scale=1000.0)
    layout = Disaggregation(transfer_backend="nixl")
    worker = _worker(host, layout, "decode", WorkerPorts(free_port(), free_port()), 0)
    worker.wait_for(READY)
    unreachable = free_port()
    body = {
        "model": MODEL,
        "prompt": "hello",
        "max_tokens": 4,
        "kv_transfer_params": {
            "do_remote_prefill": True,
            "do_remote_decode": False,
            "remote_engine_id": "e",
            "remote_request_id": "cmpl-7",
            "remote_host": "127.0.0.1",
            "remote_port": unreachable,
            "remote_block_ids": [[0]],
        },
    }
    assert post_status(worker_port(worker), "/v1/completions", body) == 500
    worker.wait_for(rf"NIXL transfer failure: handshake_failed .*'remote_port': {unreachable}")


def worker_port(worker) -> int:
    """The API port a simulated vLLM worker announced."""
    return int(worker.wait_for(r"Uvicorn running on http://[\d.]+:(\d+)").group(1))
