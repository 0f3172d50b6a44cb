"""The remote benchmark against a simulated engine: on the host, and forwarded over real SSH."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from perflab import settings
from perflab.bench.cli import EXIT_STOPPED
from perflab.remote import process as rp
from perflab.remote.bench import RemoteBenchFailed, find_bench, run_remote_bench
from perflab.runner.stop import stop_recorded
from perflab.transport import Transport, open_transport
from tests.fixtures.runs import run_key_pids
from tests.fixtures.sshd import SshServer, free_port
from tests.hosts.conftest import local_host
from tests.hosts.test_simhost import FAST, wait_for_line

MODEL = "Qwen/Qwen3-8B"
OLDEST_PYTHON = "/root/.pyenv/versions/3.9.18/bin/python3.9"  # the oldest Python the agent supports
BENCH_ARGS = ["--model", MODEL, "--input-len", "32", "--output-len", "8", "--num-prompts", "24",
              "--request-rate", "16", "--seed", "1"]  # fmt: skip
# 2 requests/s for 40 prompts: still running seconds after its first request ended.
SLOW_BENCH_ARGS = ["--model", MODEL, "--input-len", "32", "--output-len", "8", "--num-prompts", "40",
                   "--request-rate", "2", "--seed", "1"]  # fmt: skip
NO_PYTHON = "perflab-no-such-python"


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


@pytest.fixture
def app_workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This machine's perflab directory, where forwarded benches keep their run dirs."""
    monkeypatch.setenv(settings.APP_WORKDIR_ENV, str(tmp_path / "app"))
    return tmp_path / "app"


def test_host_without_python_benches_through_a_forward(
    engine: tuple[Transport, int], sshd: SshServer, tmp_path: Path, app_workdir: Path
) -> None:
    _, port = engine
    host = sshd.host_config("no-python", python=NO_PYTHON, workdir=str(tmp_path / "remote"))
    with open_transport(host) as transport:
        run = run_remote_bench(transport, BENCH_ARGS, ports=[port], run_key="forwarded", timeout=120)
    assert run.mode == "forwarded"
    assert run.fallback_reason is not None and NO_PYTHON in run.fallback_reason
    assert run.result["completed"] == 24
    assert run.result["base_urls"] != [f"http://127.0.0.1:{port}"], "requests went through the forward"
    kept = app_workdir / "runs" / "forwarded"
    assert json.loads((kept / "bench.json").read_text())["completed"] == 24
    assert (kept / "bench.pid").is_file() and not (tmp_path / "remote" / "runs").exists()


def test_a_forwarded_bench_is_found_and_stopped_by_another_caller(
    engine: tuple[Transport, int], sshd: SshServer, app_workdir: Path, tmp_path: Path
) -> None:
    """What crash recovery does for a bench whose caller died: find it by its pid file and stop it."""
    _, port = engine
    host = sshd.host_config("no-python", python=NO_PYTHON, workdir=str(tmp_path / "remote"))
    started = threading.Event()
    failures: list[RemoteBenchFailed] = []

    def on_progress(progress: dict[str, object]) -> None:
        if progress["done"]:
            started.set()

    def bench(transport: Transport) -> None:
        try:
            run_remote_bench(
                transport, SLOW_BENCH_ARGS, ports=[port], run_key="run-7-forwarded", name="bench-0-0",
                timeout=120, on_progress=on_progress,
            )  # fmt: skip
        except RemoteBenchFailed as failure:
            failures.append(failure)

    with open_transport(host) as transport:
        caller = threading.Thread(target=bench, args=(transport,))
        caller.start()
        try:
            assert started.wait(60), "the bench sent no request"
            found = find_bench(transport, "run-7-forwarded", "bench-0-0")
            assert found is not None and found.mode == "forwarded"
            assert found.process.pid in run_key_pids("run-7-forwarded")
            state = {"run_key": "run-7-forwarded", "processes": [], "bench": {"name": "bench-0-0"}}
            stopped = stop_recorded(transport, state, grace_s=10)
        finally:
            caller.join(60)

    assert stopped == {"bench-0-0": "term"}
    assert [failure.exit_status for failure in failures] == [EXIT_STOPPED]
    partial = json.loads((app_workdir / "runs" / "run-7-forwarded" / "bench-0-0.json").read_text())
    assert partial["partial"] is True and partial["partial_reason"] == "received SIGTERM"
    assert run_key_pids("run-7-forwarded") == []


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
