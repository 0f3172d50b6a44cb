"""A result that completed on the host survives the crash of whoever was reading it back: a worker
process frozen (SIGSTOP) while its benchmark finishes on the host, then killed (SIGKILL) and
restarted, stores the complete result and ends the run ``done`` without measuring it again; so does
a study whose process (``study run --wait``, as the app runs one) is killed the same way."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.engines import EngineConfig
from perflab.runner import submit_run
from perflab.runner.profile_spec import parse_profile
from perflab.study.headless import wait_for_study
from perflab.study.measure import study_runs
from perflab.worker import RESTART_MESSAGE, Worker
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

REPO_ROOT = Path(__file__).resolve().parents[2]
# at 20 requests/s: 10 s, long enough to judge (perflab.runner.evidence) and, once progress shows, to
# freeze the process in the middle of it however late a loaded machine lets the test see that progress
PROMPTS = 200


def _bench_ended(run_key: str, timeout_s: float = 60.0) -> None:
    """Wait until no process of the run's benchmark is left (it finished on the host)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        benches = []
        for pid in run_key_pids(run_key):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    if b"\0bench\0" in handle.read():
                        benches.append(pid)
            except OSError:
                continue
        if not benches:
            return
        time.sleep(0.1)
    raise AssertionError("the benchmark did not finish")


def test_a_worker_killed_after_its_benchmark_finished_stores_the_complete_result(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path
) -> None:
    host = sim_host("finished-node", kind="local")
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [host])
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", port=free_port_block(1))
    # 20 requests/s: seconds of benchmark, long enough to freeze the worker in the middle of it
    queued = submit_run(
        runs_db,
        host_name=host.name,
        config=config,
        profiles=[parse_profile(f"random:in=64,out=8,n={PROMPTS},rate=20")],
    )
    worker = worker_process(runs_db, hosts_file, "frozen")
    try:
        run = wait_for_run(runs_db, queued.id, benchmarking_with_progress)
        worker.send_signal(signal.SIGSTOP)
        run_key = run.remote_state["run_key"]
        _bench_ended(run_key)
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
    assert stored_run(runs_db, queued.id).status == "benchmarking"
    result_file = Path(host.workdir) / "runs" / run_key / "bench-0-0.json"
    assert result_file.is_file(), "the finished benchmark left its result on the host"

    restarted = Worker(runs_db, inventory_path=hosts_file, worker_id="frozen", runner_options=FAST)
    try:
        assert restarted.run_once() == {}
    finally:
        restarted.stop()

    run = stored_run(runs_db, queued.id)
    assert (run.status, run.failure_class) == ("done", None), run.failure_message
    assert run.remote_state["recovered"] == RESTART_MESSAGE
    assert run_key_pids(run_key) == []
    with new_session(runs_db) as session:
        assert crud.gpu_locks(session) == []
        (result,) = crud.list_profile_results(session, run_id=queued.id)
        records = crud.list_request_records(session, profile_result_id=result.id)
        # the run was measured once: no other run of its configuration was queued
        assert [row.id for row in crud.list_runs(session).rows] == [queued.id]
    assert not result.result.get("partial")
    assert result.completed == len(records) == PROMPTS
    assert "Serving Benchmark Result" in (result.text_block or "")


STUDY_SPEC = """
name: kept
model: Qwen/Qwen3-8B
hosts: [{host}]
baseline: {{engine: vllm}}
gpus: 1
# paced at 20 requests/s, so the baseline's benchmark lasts a few seconds: long enough to freeze in
tuning_profile:
  {{name: tune, title: Tune, dataset: random, input_len: 64, output_len: 8, num_prompts: {prompts},
    request_rate: 20}}
stages:
  - name: Batched tokens
    dimension: max_num_batched_tokens
    candidates: [4096]
"""


def test_a_study_killed_after_its_benchmark_finished_does_not_measure_it_again(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = sim_host("study-node", kind="local")
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [host])
    spec_file = tmp_path / "study.yaml"
    spec_file.write_text(STUDY_SPEC.format(host=host.name, prompts=PROMPTS))
    monkeypatch.setenv("PERFLAB_WORKER_STALE_S", "1.5")
    url = runs_db.url.render_as_string(hide_password=False)
    command = [sys.executable, "-m", "perflab", "study", "--url", url, "run", "--spec", str(spec_file)]
    command += ["--hosts", str(hosts_file), "--wait", "--poll", "0.2"]
    first = subprocess.Popen(
        command, cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, stdout=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with new_session(runs_db) as session:
                rows = crud.list_runs(session).rows
            if rows and benchmarking_with_progress(stored_run(runs_db, rows[-1].id)):
                break
            time.sleep(0.1)
        first.send_signal(signal.SIGSTOP)
        baseline = stored_run(runs_db, rows[-1].id)
        _bench_ended(baseline.remote_state["run_key"])
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
    assert stored_run(runs_db, baseline.id).status == "benchmarking"
    study_id = baseline.study_id
    assert study_id is not None

    final = wait_for_study(
        runs_db, study_id, hosts_path=hosts_file, timeout_s=180, poll_s=0.2, runner_options=FAST
    )

    assert final.status == "done", final.state
    with new_session(runs_db) as session:
        runs = study_runs(session, study_id=study_id)
        results = crud.list_profile_results(session, run_id=baseline.id)
    launches = [(run.id, run.label) for run in runs]
    # the killed launch counts: the study goes on from it, so the launch after it is the candidate's and
    # every later launch of the baseline is the reference beside a candidate's (R C R …) or its
    # confirmation, never a second measurement in its place
    assert runs[0].id == baseline.id and runs[1].config_fingerprint != baseline.config_fingerprint, (
        f"the baseline was measured again: {launches}"
    )
    (result,) = results
    assert stored_run(runs_db, baseline.id).status == "done"
    assert not result.result.get("partial") and result.completed == PROMPTS
