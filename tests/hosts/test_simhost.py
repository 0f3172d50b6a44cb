"""Simulated hosts: the shims answer the real code paths (probe, detached engine start, readiness, stop)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest

from perflab import simhost
from perflab.inventory import HostConfig
from perflab.probe import probe_host
from perflab.probe.status import host_status
from perflab.remote import process as rp
from perflab.transport import Transport, open_transport
from tests.fixtures.polling import wait_until
from tests.fixtures.sshd import free_port
from tests.hosts.conftest import HostFactory

FAST = 200.0  # simulated start-up and step times divided by this


def simulated(
    make_host: HostFactory, accelerator: str = "H100", count: int = 8, name: str = "sim"
) -> HostConfig:
    """A host of the parametrized transport kind simulating ``count`` accelerators, with fast engines."""
    return make_host(name, simulate={"accelerator": accelerator, "count": count, "time_scale": FAST})


def wait_for_line(transport: Transport, process: rp.RemoteProcess, text: str, timeout: float = 60.0) -> str:
    """Follow the process's log until ``text`` appears; fail early if the process exits."""
    log, offset = "", 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        chunk = rp.read_log(transport, process, offset)
        log, offset = log + chunk.text, chunk.next_offset
        if text in log:
            return log
        if rp.process_state(transport, process).exit_status is not None:
            raise AssertionError(f"the engine exited before '{text}':\n{log}")
        time.sleep(0.2)
    raise AssertionError(f"'{text}' not in the log after {timeout} s:\n{log}")


def test_simulated_h100_host_is_probed_like_a_real_one(make_host: HostFactory) -> None:
    host = simulated(make_host)
    with open_transport(host) as transport:
        result = probe_host(transport)
    assert result.simulated
    assert [gpu.name for gpu in result.accelerators] == ["NVIDIA H100 80GB HBM3"] * 8
    assert {gpu.compute_cap for gpu in result.accelerators} == {"9.0"}
    assert set(result.engines) == {"vllm", "sglang", "trtllm"}
    assert result.problems == []
    status = host_status(host)
    assert status.simulated and status.display_name == "sim (simulated)"


def test_simulated_ascend_host(make_host: HostFactory) -> None:
    with open_transport(simulated(make_host, "910B", 8, "sim-npu")) as transport:
        result = probe_host(transport)
    assert len(result.accelerators) == 8 and {npu.vendor for npu in result.accelerators} == {"ascend"}
    assert {"vllm-ascend", "mindie"} <= set(result.engines)


def test_shims_are_written_once_per_content(make_host: HostFactory) -> None:
    host = simulated(make_host)
    transport = open_transport(host)
    stamp = Path(transport.workdir) / simhost.SIM_DIR / simhost.STAMP_FILE
    first = stamp.stat().st_mtime_ns
    simhost._prepared.clear()
    open_transport(host)
    assert stamp.stat().st_mtime_ns == first
    changed = simulated(make_host, count=4)
    simhost._prepared.clear()
    open_transport(changed)
    assert stamp.stat().st_mtime_ns != first


def test_engine_start_ready_serve_and_stop_leave_nothing(make_host: HostFactory) -> None:
    transport = open_transport(simulated(make_host))
    port = free_port()
    engine = rp.start_detached(
        transport,
        ["vllm", "serve", "Qwen/Qwen3-8B", "--port", str(port), "--max-model-len", "4096"],
        run_key="sim-run",
        name="engine",
        gpu_ids=[2],
    )
    try:
        wait_for_line(transport, engine, "Application startup complete")
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()
        assert [model["id"] for model in models["data"]] == ["Qwen/Qwen3-8B"]
        busy = probe_host(transport).accelerators
        assert busy[2].memory_used_mib and busy[2].memory_used_mib > 1000, "the engine holds GPU 2's memory"
        assert busy[0].memory_used_mib == 0
    finally:
        outcome = rp.stop(transport, engine, grace_s=10)
    assert outcome.clean and outcome.outcome in ("term", "kill")
    assert rp.find_leftovers(transport) == []
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5)
    assert probe_host(transport).accelerators[2].memory_used_mib == 0


def test_engine_failing_on_a_flag_leaves_nothing(make_host: HostFactory) -> None:
    transport = open_transport(simulated(make_host))
    engine = rp.start_detached(
        transport,
        ["vllm", "serve", "Qwen/Qwen3-8B", "--port", str(free_port()), "--no-such-flag"],
        run_key="bad-flag",
        name="engine",
    )
    state = wait_until(
        lambda: (found := rp.process_state(transport, engine)).exit_status is not None and found,
        60,
        interval_s=0.2,
        failure="the engine never exited",
    )
    assert state.exit_status != 0
    assert "--no-such-flag" in rp.tail_log(transport, engine)
    assert rp.stop(transport, engine, grace_s=2).clean
    assert rp.find_leftovers(transport) == []


def test_simulated_env_reaches_every_command(make_host: HostFactory) -> None:
    with open_transport(simulated(make_host)) as transport:
        which = transport.run(
            ["sh", "-c", "command -v nvidia-smi; command -v vllm"], timeout=30
        ).stdout.split()
        path = transport.run(["sh", "-c", 'printf %s "$PATH"'], timeout=30).stdout
    sim_bin = os.path.join(transport.workdir, simhost.SIM_DIR, "bin")
    assert which == [f"{sim_bin}/nvidia-smi", f"{sim_bin}/vllm"]
    assert path.startswith(sim_bin + ":") and "/usr/bin" in path
