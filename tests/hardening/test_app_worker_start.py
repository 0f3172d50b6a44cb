"""``python -m perflab app`` starts the app's worker with the server, so a queued run (or a study's,
after the app was killed and started again) goes on with no browser open; served beyond this machine
without a login, it starts no worker and says why. Each app is a real server process, never visited."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from perflab.engines import EngineConfig
from perflab.runner import submit_run
from perflab.runner.profile_spec import parse_profile
from tests.fixtures.polling import wait_for_text
from tests.fixtures.runs import SimHostFactory, perflab_env, stored_run, wait_for_run, write_hosts_file
from tests.fixtures.sshd import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def app(tmp_path: Path) -> Iterator[list[tuple[subprocess.Popen[bytes], Path]]]:
    """The app processes a test starts (``perflab app`` with its log), stopped after it."""
    started: list[tuple[subprocess.Popen[bytes], Path]] = []
    yield started
    for process, _ in started:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _serve(started: list, log: Path, env: dict[str, str], address: str) -> subprocess.Popen[bytes]:
    argv = [
        sys.executable,
        "-m",
        "perflab",
        "app",
        "--server.address",
        address,
        "--server.port",
        str(free_port()),
    ]
    argv += [
        "--server.headless",
        "true",
        "--server.fileWatcherType",
        "none",
        "--browser.gatherUsageStats",
        "false",
    ]
    with log.open("wb") as output:
        process = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)
    started.append((process, log))
    return process


def _queued(runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path) -> tuple[int, dict[str, str]]:
    host = sim_host("app-node", kind="local")
    env = {**os.environ, **perflab_env(runs_db, write_hosts_file(tmp_path / "hosts.yaml", [host]))}
    env.pop("PERFLAB_AUTH", None)
    env.pop("PERFLAB_APP_WORKER", None)
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B")
    run = submit_run(runs_db, host_name=host.name, config=config, profiles=[parse_profile("short:n=5")])
    return int(run.id), env


def test_the_app_runs_queued_work_with_no_page_open(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path, app: list
) -> None:
    run_id, env = _queued(runs_db, sim_host, tmp_path)

    _serve(app, tmp_path / "app.log", env, "127.0.0.1")

    run = wait_for_run(runs_db, run_id, lambda run: run.status == "done", timeout_s=180)
    assert run.worker_id is not None and run.worker_id.startswith("app-")


def test_served_beyond_this_machine_without_a_login_it_starts_no_worker(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path, app: list
) -> None:
    run_id, env = _queued(runs_db, sim_host, tmp_path)
    log = tmp_path / "app.log"

    _serve(app, log, env, "0.0.0.0")

    text = wait_for_text(log.read_text, "the app's worker is not started", 120)
    assert "the app's worker is not started: This perflab server listens on the address 0.0.0.0" in text
    assert stored_run(runs_db, run_id).status == "queued"
    assert "Traceback" not in text
