"""``perflab run`` stopped by SIGTERM (a service manager, ``kill``) stops what it started on the host —
the benchmark, then the engine — keeps what was measured, and records why: the run ends ``failed``
(``worker_stopped``) with "perflab run received SIGTERM", and the command exits 143."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from sqlalchemy.engine import Engine

from db import crud
from db.models import Run
from db.session import new_session
from tests.fixtures.runs import SimHostFactory, perflab_env, run_key_pids, write_hosts_file
from tests.hardening.conftest import perflab_run_process


def _only_run(engine: Engine) -> Run | None:
    with new_session(engine) as session:
        rows = crud.list_runs(session).rows
        return crud.require_run(session, run_id=rows[0].id) if rows else None


def test_sigterm_stops_the_benchmark_and_the_engine_and_says_why(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path
) -> None:
    host = sim_host("term-node", kind="local")
    env = {**os.environ, **perflab_env(runs_db, write_hosts_file(tmp_path / "hosts.yaml", [host]))}
    # 5 requests/s for 300 requests: a minute of benchmark, well past the signal
    process = perflab_run_process(env, host.name, "random:in=64,out=8,n=300,rate=5")
    try:
        deadline = time.monotonic() + 120
        run = None
        while time.monotonic() < deadline:
            run = _only_run(runs_db)
            if run is not None and run.status == "benchmarking" and (run.progress or {}).get("done", 0) > 0:
                break
            time.sleep(0.2)
        assert run is not None and run.status == "benchmarking"
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()

    text = err.decode()
    assert process.returncode == 128 + signal.SIGTERM, text
    assert "perflab run received SIGTERM: stopping the benchmark and the engines" in text
    assert "Traceback" not in text
    stopped = _only_run(runs_db)
    assert stopped is not None
    assert (stopped.status, stopped.failure_class) == ("failed", "worker_stopped")
    assert stopped.failure_message == "perflab run received SIGTERM while the run was in flight"
    # the benchmark is stopped as its output stream closes, or by its record if it outlived that
    assert stopped.remote_state["stopped"]["engine-0"] == "term"
    assert run_key_pids(stopped.remote_state["run_key"]) == []
    with new_session(runs_db) as session:
        (result,) = crud.list_profile_results(session, run_id=stopped.id)
        assert crud.gpu_locks(session) == []
    assert result.result["partial"] is True and 0 < result.completed < 300
    assert out.decode().startswith(f"run {stopped.id} failed")
