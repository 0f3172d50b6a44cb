"""The worker end to end: parallel hosts, GPU locks, crash recovery (a real ``kill -9``, with the bench on
the host or forwarded to this machine), bad hosts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.models import Run
from db.session import describe, new_session
from perflab import settings
from perflab.engines import EngineConfig
from perflab.inventory import HostConfig, SimulateSpec, load_inventory
from perflab.remote import process as rp
from perflab.runner import RunnerOptions, submit_run
from perflab.runner.profile_spec import parse_profile
from perflab.simhost import prepare_host
from perflab.transport import open_transport
from perflab.transport.local import LocalTransport
from perflab.worker import RESTART_MESSAGE, Worker
from perflab.worker import worker as worker_module
from tests.fixtures.runs import (
    DEFAULT_TIME_SCALE,
    SimHostFactory,
    await_run_key_pid,
    benchmarking_with_progress,
    cancel,
    free_port_block,
    perflab_env,
    run_key_pids,
    stored_run,
    wait_for_run,
    write_hosts_file,
)
from tests.fixtures.sshd import SshServer

REPO_ROOT = Path(__file__).resolve().parents[2]
FAST = RunnerOptions(ready_poll_s=0.2, stop_grace_s=5.0, ready_timeout_s=60.0)
NO_PYTHON = "perflab-no-such-python"
FORWARDED_PROMPTS = 40


def _queue(engine: Engine, host_name: str, spec: str, **knobs: object) -> Run:
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", port=free_port_block(1), **knobs)
    return submit_run(engine, host_name=host_name, config=config, profiles=[parse_profile(spec)])


_made: list[Worker] = []


@pytest.fixture(autouse=True)
def _stop_workers() -> Iterator[None]:
    """Stop the workers a test made (their heartbeat threads would outlive its database)."""
    yield
    while _made:
        _made.pop().stop()


def _worker(engine: Engine, hosts_file: Path, **overrides: object) -> Worker:
    fields: dict[str, object] = {"inventory_path": hosts_file, "runner_options": FAST, "gpu_retry_s": 0.0}
    fields.update(overrides)
    worker = Worker(engine, **fields)  # type: ignore[arg-type]
    _made.append(worker)
    return worker


def test_a_run_waits_while_another_run_holds_its_gpus(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path
) -> None:
    host = sim_host("two-gpus", kind="local", count=2)
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [host])
    runs = [_queue(runs_db, host.name, "random:in=64,out=8,n=10", tp=2) for _ in range(2)]
    worker = _worker(runs_db, hosts_file, max_parallel_runs=2)

    first_round = worker.run_once()

    assert sorted(first_round.values()) == ["done", "queued"]
    waiting = next(run_id for run_id, status in first_round.items() if status == "queued")
    ran = next(run_id for run_id, status in first_round.items() if status == "done")
    assert stored_run(runs_db, waiting).launching_at is None
    assert worker.run_once() == {waiting: "done"}
    assert stored_run(runs_db, ran).finished_at < stored_run(runs_db, waiting).launching_at
    assert {run.id for run in runs} == {ran, waiting}


def test_a_worker_killed_mid_run_is_cleaned_up_by_its_restart(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path
) -> None:
    host = sim_host("crash-node")
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [host])
    # 5 requests/s for 300 requests: still benchmarking when the worker is killed.
    queued = _queue(runs_db, host.name, "random:in=64,out=8,n=300,rate=5")
    worker = _worker_process(runs_db, hosts_file, "crashing")
    try:
        run = wait_for_run(runs_db, queued.id, benchmarking_with_progress)
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
    run_key = run.remote_state["run_key"]
    left_running = {_command_line(pid) for pid in run_key_pids(run_key)}
    assert any(" bench " in command for command in left_running), "the bench should outlive the worker"
    assert any(" serve " in command for command in left_running), "the engine should outlive the worker"

    restarted = _worker(runs_db, hosts_file, worker_id="crashing")
    assert restarted.run_once() == {}

    run = stored_run(runs_db, queued.id)
    assert run.status == "failed"
    assert run.failure_class == "worker_restarted" and run.failure_message == RESTART_MESSAGE
    assert run.remote_state["stopped"] == {"bench-0-0": "term", "engine-0": "term"}
    assert "Application startup complete" in (run.log_tail or "")
    assert run_key_pids(run_key) == []
    with new_session(runs_db) as session:
        assert crud.gpu_locks(session) == []
        (result,) = crud.list_profile_results(session, run_id=queued.id)
        records = crud.list_request_records(session, profile_result_id=result.id)
    # The stopped bench wrote what it had measured; the restart stored it.
    assert result.result["partial"] is True and result.result["partial_reason"] == "received SIGTERM"
    assert 0 < result.completed == len(records) < 300


def _worker_process(engine: Engine, hosts_file: Path, worker_id: str) -> subprocess.Popen[bytes]:
    """``python -m perflab worker`` in its own process (to be killed)."""
    return subprocess.Popen(
        [sys.executable, "-m", "perflab", "worker", "--worker-id", worker_id, "--poll", "0.2"],
        cwd=REPO_ROOT,
        env={**os.environ, **perflab_env(engine, hosts_file)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _command_line(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        return handle.read().replace(b"\0", b" ").decode()


def _host_without_python(sshd: SshServer, tmp_path: Path, name: str) -> HostConfig:
    """An SSH host whose PATH has the (simulated) engines and nvidia-smi but whose ``python`` is missing,
    so its benchmarks are forwarded: the simulator's shims, installed for this machine, over the sshd."""
    tools = HostConfig(
        name=f"{name}-tools",
        transport="local",
        workdir=str(tmp_path / "tools"),
        python=sys.executable,
        simulate=SimulateSpec(accelerator="H100", count=2, time_scale=DEFAULT_TIME_SCALE),
    )
    shim_env = prepare_host(LocalTransport(tools), tools)
    return sshd.host_config(name, python=NO_PYTHON, workdir=str(tmp_path / "hosts" / name), env=shim_env)


def test_a_forwarded_bench_killed_with_its_worker_is_found_and_stopped(
    runs_db: Engine, sshd: SshServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app_workdir = tmp_path / "app"
    monkeypatch.setenv(settings.APP_WORKDIR_ENV, str(app_workdir))
    host = _host_without_python(sshd, tmp_path, "old-python")
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [host])
    # Prompt lengths come from the engine's /tokenize through the forward, a round trip per prompt: few
    # prompts, sent slowly, so the bench is mid-run when the worker is killed.
    queued = _queue(runs_db, host.name, f"random:in=64,out=8,n={FORWARDED_PROMPTS},rate=2")
    worker = _worker_process(runs_db, hosts_file, "crashing")
    try:
        run = wait_for_run(runs_db, queued.id, benchmarking_with_progress)
        run_key = run.remote_state["run_key"]
        # The bench runs on this machine, not on the host, and carries the run's marker and pid file.
        benches = [pid for pid in run_key_pids(run_key) if " bench " in _command_line(pid)]
        assert len(benches) == 1 and "--base-url" in _command_line(benches[0])
        pid_file = app_workdir / "runs" / run_key / "bench-0-0.pid"
        assert int(pid_file.read_text().split()[0]) == benches[0]
        assert not (Path(host.workdir) / "runs" / run_key / "bench-0-0.pid").exists()
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)

    assert _worker(runs_db, hosts_file, worker_id="crashing").run_once() == {}

    run = stored_run(runs_db, queued.id)
    assert (run.status, run.failure_class, run.failure_message) == (
        "failed",
        "worker_restarted",
        RESTART_MESSAGE,
    )
    # Its forward died with the worker, so the bench may have stopped itself before recovery looked.
    assert run.remote_state["stopped"] in ({"engine-0": "term"}, {"bench-0-0": "term", "engine-0": "term"})
    assert run_key_pids(run_key) == []
    with new_session(runs_db) as session:
        assert crud.gpu_locks(session) == []
        (result,) = crud.list_profile_results(session, run_id=queued.id)
        records = crud.list_request_records(session, profile_result_id=result.id)
    # What the bench measured before it stopped was kept, from its run dir on this machine.
    assert result.bench_mode == "forwarded" and result.result["partial"] is True
    assert result.completed > 0 and len(records) == result.completed + result.failed < FORWARDED_PROMPTS
    assert "Partial result:" in (result.text_block or "")


def test_runs_of_a_worker_with_a_stale_heartbeat_are_stopped_and_failed(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path
) -> None:
    host = sim_host("stale-node", kind="local")
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [host])
    run = _queue(runs_db, host.name, "short:n=5")
    with new_session(runs_db) as session:
        crud.register_worker(session, worker_id="gone", hostname="elsewhere", pid=1)
        crud.claim_next_run(session, worker_id="gone")
        assert crud.acquire_gpus(session, host_name=host.name, gpu_ids=[0], run_id=run.id, worker_id="gone")
    with open_transport(host) as transport:
        sleeper = rp.start_detached(transport, ["sleep", "60"], run_key="run-stale", name="engine-0")
        state = {"host": host.name, "run_key": "run-stale", "processes": [{"name": "engine-0"}]}
    with new_session(runs_db) as session:
        crud.update_run(session, run_id=run.id, remote_state=state)
    assert await_run_key_pid("run-stale", sleeper.pid)
    time.sleep(0.3)

    assert _worker(runs_db, hosts_file, worker_id="alive", stale_after_s=0.2).run_once() == {}

    stored = stored_run(runs_db, run.id)
    assert (stored.status, stored.failure_class) == ("failed", "worker_restarted")
    assert stored.remote_state["stopped"] == {"engine-0": "term"}
    assert run_key_pids("run-stale") == []
    with new_session(runs_db) as session:
        assert crud.gpu_locks(session) == []
        states = {worker.id: worker.state for worker in crud.list_workers(session)}
    assert states["gone"] == "stopped"


def test_bad_hosts_fail_runs_with_a_named_reason(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path
) -> None:
    closed_port = free_port_block(1)
    unreachable = sim_host("nowhere", port=closed_port)
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [unreachable])
    unknown = _queue(runs_db, "not-in-file", "short:n=5")
    refused = _queue(runs_db, "nowhere", "short:n=5")

    finished = _worker(runs_db, hosts_file).run_once()

    assert finished == {unknown.id: "failed", refused.id: "failed"}
    assert stored_run(runs_db, unknown.id).failure_class == "host_unknown"
    assert "no host named 'not-in-file'" in stored_run(runs_db, unknown.id).failure_message
    failed = stored_run(runs_db, refused.id)
    assert failed.failure_class == "host_unreachable" and "nowhere" in failed.failure_message


def test_a_run_claimed_again_before_its_first_thread_ends_keeps_running(
    runs_db: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run handed back to the queue can be claimed again before the thread that handed it back has
    ended; that thread's end must not end (or unregister) the new execution. The two executions are
    held by events: no real run can be timed into that window."""
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [])
    run = _queue(runs_db, "a", "short:n=5")
    releases = [threading.Event(), threading.Event()]
    endings = iter(["queued", "done"])

    def held_execution(run_id: int, **_: object) -> str:
        ending = next(endings)
        releases[0 if ending == "queued" else 1].wait(30)
        return ending

    monkeypatch.setattr(worker_module, "execute_run", held_execution)
    worker = _worker(runs_db, hosts_file)
    inventory = load_inventory(hosts_file)
    handed_back = worker._start_run(run.id, "a", inventory)
    claimed_again = worker._start_run(run.id, "a", inventory)

    releases[0].set()
    assert handed_back.wait(30) and handed_back.status == "queued"
    worker._reap()
    assert worker.active_runs() == [run.id] and not claimed_again.done.is_set()
    releases[1].set()
    assert claimed_again.wait(30) and claimed_again.status == "done"


def test_a_broken_hosts_file_leaves_runs_queued(runs_db: Engine, tmp_path: Path) -> None:
    hosts_file = tmp_path / "hosts.yaml"
    hosts_file.write_text("hosts:\n  - name: a\n    port: many\n")
    queued = _queue(runs_db, "a", "short:n=5")

    worker = _worker(runs_db, hosts_file)

    assert worker.run_once() == {}
    assert stored_run(runs_db, queued.id).status == "queued"
    assert worker.last_inventory_error is not None and "hosts.yaml:3" in worker.last_inventory_error


def test_a_cancelled_queued_run_is_never_claimed(runs_db: Engine, tmp_path: Path) -> None:
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [])
    queued = _queue(runs_db, "a", "short:n=5")
    cancel(runs_db, queued.id)

    assert _worker(runs_db, hosts_file).run_once() == {}
    assert stored_run(runs_db, queued.id).status == "cancelled"


def _worker_command(engine: Engine, hosts_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "perflab", "worker", *args],
        cwd=REPO_ROOT,
        env={**os.environ, **perflab_env(engine, hosts_file)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_worker_command_once_reports_what_it_ran(runs_db: Engine, tmp_path: Path) -> None:
    good = _worker_command(
        runs_db, write_hosts_file(tmp_path / "hosts.yaml", []), "--once", "--worker-id", "w1"
    )
    broken = tmp_path / "broken.yaml"
    broken.write_text("hosts: [oops\n")
    bad = _worker_command(runs_db, broken, "--once")

    assert good.returncode == 0, good.stderr
    assert good.stdout.startswith(f"perflab worker w1: database {describe(runs_db.url)}")
    assert bad.returncode == 2
    assert "error: broken.yaml:2: not valid YAML" in bad.stderr
    with new_session(runs_db) as session:
        assert {worker.id: worker.state for worker in crud.list_workers(session)}["w1"] == "stopped"


@pytest.mark.parametrize("setting", ["0", "1"])
def test_the_app_starts_one_worker_unless_disabled(
    runs_db: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    from perflab.worker import app

    monkeypatch.setenv("PERFLAB_APP_WORKER", setting)
    monkeypatch.setenv("PERFLAB_HOSTS", str(write_hosts_file(tmp_path / "hosts.yaml", [])))
    monkeypatch.setattr(app, "_worker", None)
    first = app.start_app_worker(runs_db)
    try:
        if setting == "0":
            assert first is None
            return
        assert first is not None and first.running
        assert app.start_app_worker(runs_db) is first
        with new_session(runs_db) as session:
            assert [worker.id for worker in crud.list_workers(session)] == [first.worker_id]
    finally:
        if first is not None:
            first.stop()
