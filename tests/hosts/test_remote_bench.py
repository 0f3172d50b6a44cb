"""The remote benchmark against a simulated engine: on the host, and forwarded over real SSH."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from perflab.remote import process as rp
from perflab.remote.bench import RemoteBenchFailed, run_remote_bench
from perflab.transport import Transport, open_transport
from tests.fixtures.sshd import SshServer, free_port
from tests.hosts.conftest import local_host
from tests.hosts.test_simhost import FAST, wait_for_line

MODEL = "Qwen/Qwen3-8B"
OLDEST_PYTHON = "/root/.pyenv/versions/3.9.18/bin/python3.9"  # the oldest Python the agent supports
BENCH_ARGS = ["--model", MODEL, "--input-len", "32", "--output-len", "8", "--num-prompts", "24",
              "--request-rate", "16", "--seed", "1"]  # fmt: skip


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[tuple[Transport, int]]:
    """A simulated vLLM engine serving on this machine (a local simulated host) and its port."""
    host = local_host(
        tmp_path, "sim-engine", simulate={"accelerator": "H100", "count": 2, "time_scale": FAST}
    )
    transport = open_transport(host)
    port = free_port()
    process = rp.start_detached(
        transport, ["vllm", "serve", MODEL, "--port", str(port)], run_key="bench-engine", name="engine"
    )
    try:
        wait_for_line(transport, process, "Application startup complete")
        yield transport, port
    finally:
        assert rp.stop(transport, process, grace_s=10).clean


def test_on_host_bench_streams_progress_and_fetches_the_result(engine: tuple[Transport, int]) -> None:
    transport, port = engine
    progress: list[dict[str, object]] = []
    lines: list[str] = []
    run = run_remote_bench(
        transport, BENCH_ARGS, ports=[port], run_key="bench-run", name="throughput", timeout=120,
        on_progress=progress.append, on_line=lines.append,
    )  # fmt: skip
    assert run.mode == "on-host" and run.fallback_reason is None
    assert run.result["completed"] == 24 and run.result["failed"] == 0
    assert run.result["model_id"] == MODEL
    assert progress and {"done", "total"} <= set(progress[-1]) and progress[-1]["total"] == 24
    assert not any(line.startswith("PERFLAB_PROGRESS") for line in lines)
    assert "Serving Benchmark Result" in run.text_block
    saved = Path(rp.run_dir(transport, "bench-run")) / "throughput.json"
    assert json.loads(saved.read_text())["completed"] == 24


def test_bench_failure_reports_its_last_lines(engine: tuple[Transport, int]) -> None:
    transport, _ = engine
    with pytest.raises(RemoteBenchFailed) as caught:
        run_remote_bench(transport, BENCH_ARGS, ports=[free_port()], run_key="bench-fail", timeout=120)
    assert caught.value.mode == "on-host" and caught.value.exit_status == 1
    assert "no request could be sent" in str(caught.value)


def test_host_without_python_benches_through_a_forward(
    engine: tuple[Transport, int], sshd: SshServer, tmp_path: Path
) -> None:
    _, port = engine
    host = sshd.host_config("no-python", python="perflab-no-such-python", workdir=str(tmp_path / "remote"))
    with open_transport(host) as transport:
        run = run_remote_bench(transport, BENCH_ARGS, ports=[port], run_key="forwarded", timeout=120)
    assert run.mode == "forwarded"
    assert run.fallback_reason is not None and "perflab-no-such-python" in run.fallback_reason
    assert run.result["completed"] == 24
    assert run.result["base_urls"] != [f"http://127.0.0.1:{port}"], "requests went through the forward"


def test_full_path_over_ssh_on_a_simulated_host(sshd: SshServer, tmp_path: Path) -> None:
    """Ship the agent and shims over real SSH, start the simulated engine there, bench it on the host."""
    python = OLDEST_PYTHON if os.path.exists(OLDEST_PYTHON) else "python3"
    host = sshd.host_config(
        "sim-over-ssh",
        python=python,
        workdir=str(tmp_path / "remote"),
        simulate={"accelerator": "H100", "count": 4, "time_scale": FAST},
    )
    transport = open_transport(host)
    port = free_port()
    engine = rp.start_detached(
        transport,
        ["vllm", "serve", MODEL, "--port", str(port)],
        run_key="ssh-bench",
        name="engine",
        gpu_ids=[1],
    )
    try:
        wait_for_line(transport, engine, "Application startup complete")
        progress: list[dict[str, object]] = []
        run = run_remote_bench(
            transport, BENCH_ARGS, ports=[port], run_key="ssh-bench", timeout=180, on_progress=progress.append
        )
    finally:
        assert rp.stop(transport, engine, grace_s=10).clean
    assert run.mode == "on-host" and run.result["completed"] == 24 and progress
    shipped = list((tmp_path / "remote" / "agent").glob("perflab-agent-*.pyz"))
    assert len(shipped) == 1
    assert (
        json.loads((tmp_path / "remote" / "runs" / "ssh-bench" / "bench.json").read_text())["completed"] == 24
    )
    assert rp.find_leftovers(transport) == []
