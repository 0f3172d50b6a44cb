"""A run deleted while the worker that holds it is paused: once the worker resumes, it stops what the
run left on the host and logs one line, never a ``NotFound`` traceback. (The run ended first: a
second worker took the paused one for dead and recovered it, and then a user deleted it.)"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.engines import EngineConfig
from perflab.runner import submit_run
from perflab.runner.profile_spec import parse_profile
from perflab.worker import Worker
from tests.fixtures.polling import wait_for_text
from tests.fixtures.runs import (
    SimHostFactory,
    benchmarking_with_progress,
    free_port_block,
    run_key_pids,
    stored_run,
    wait_for_run,
    write_hosts_file,
)
from tests.hardening.conftest import FAST, worker_process


def _pause_outside_a_write(worker: subprocess.Popen[bytes], engine: Engine) -> None:
    """Stop ``worker`` at a moment it holds no write lock on the SQLite file (a worker stopped inside a
    write keeps every other writer out, the rescuer too): resumed and stopped again until a write can
    begin."""
    for _ in range(50):
        worker.send_signal(signal.SIGSTOP)
        if engine.url.get_backend_name() != "sqlite":
            return
        connection = sqlite3.connect(str(engine.url.database), timeout=0.5)
        try:
            connection.execute("BEGIN IMMEDIATE")
            connection.rollback()
            return
        except sqlite3.OperationalError:
            worker.send_signal(signal.SIGCONT)
            time.sleep(0.1)
        finally:
            connection.close()
    raise AssertionError("the worker held a write lock at every pause")


def test_a_run_deleted_under_a_paused_worker_ends_without_a_traceback(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path
) -> None:
    host = sim_host("paused-node", kind="local")
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [host])
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", port=free_port_block(1))
    profiles = [parse_profile("random:in=64,out=8,n=300,rate=5")]
    queued = submit_run(runs_db, host_name=host.name, config=config, profiles=profiles)
    log = tmp_path / "worker.log"
    with log.open("wb") as output:
        worker = worker_process(runs_db, hosts_file, "paused", output)
    try:
        run = wait_for_run(runs_db, queued.id, benchmarking_with_progress)
        _pause_outside_a_write(worker, runs_db)
        time.sleep(1.5)  # its heartbeat goes stale for a worker that waits 1 s
        rescuer = Worker(runs_db, inventory_path=hosts_file, worker_id="rescuer", stale_after_s=1.0,
                         runner_options=FAST)  # fmt: skip
        try:
            assert rescuer.run_once() == {}
        finally:
            rescuer.stop()
        assert stored_run(runs_db, queued.id).failure_class == "worker_restarted"
        with new_session(runs_db) as session:
            assert crud.delete_run(session, run_id=queued.id)
        worker.send_signal(signal.SIGCONT)
        content = wait_for_text(log.read_text, f"run {queued.id} was deleted while in flight", 60)
    finally:
        worker.send_signal(signal.SIGCONT)
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
    assert "Traceback" not in content and "NotFound" not in content, content
    assert run_key_pids(run.remote_state["run_key"]) == []
