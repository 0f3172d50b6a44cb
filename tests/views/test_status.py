"""The sidebar's status: workers alive or silent, queued and in-flight runs."""

from __future__ import annotations

from datetime import timedelta

from sqlmodel import Session

from db import crud
from db.models import utcnow
from perflab.views.status import app_status

STALE_AFTER_S = 30.0


def test_no_worker_and_no_runs(db_session: Session) -> None:
    status = app_status(db_session, database="SQLite x.db", stale_after_s=STALE_AFTER_S)
    assert (status.queued, status.in_flight, status.active_runs, status.workers) == (0, 0, [], [])
    assert not status.worker_alive
    assert status.worker_summary().startswith("No worker running: queued runs wait")


def test_workers_and_active_runs(db_session: Session) -> None:
    crud.register_worker(db_session, worker_id="w1", hostname="box", pid=1)
    crud.register_worker(db_session, worker_id="w2", hostname="box", pid=2)
    queued = crud.create_run(db_session, engine="vllm", model="m", host_name="local-sim", simulated=True)
    running = crud.create_run(db_session, engine="sglang", model="m", host_name="gpu-a", label="tuning")
    crud.set_run_status(db_session, run_id=running.id, status="launching")
    crud.create_run(db_session, status="done", source="imported")
    later = utcnow() + timedelta(seconds=STALE_AFTER_S + 5)
    status = app_status(db_session, database="db", stale_after_s=STALE_AFTER_S, now=later)
    assert not status.worker_alive and "not responding" in status.workers[0].text()
    # the same silence is within a longer PERFLAB_WORKER_STALE_S
    assert app_status(db_session, database="db", stale_after_s=60.0, now=later).worker_alive
    status = app_status(db_session, database="db", stale_after_s=STALE_AFTER_S)
    assert status.worker_alive and status.worker_summary() == "2 workers running"
    assert (status.queued, status.in_flight) == (1, 1)
    assert status.runs_text() == "Queued runs: 1 · in flight: 1 (launching 1)"
    assert [(run.id, run.status, run.host, run.title) for run in status.active_runs] == [
        (running.id, "launching", "gpu-a", "tuning"),
        (queued.id, "queued", "local-sim (simulated)", "vllm m"),
    ]


def test_a_run_not_yet_started_on_a_simulated_host_is_labelled_simulated(db_session: Session) -> None:
    """A run learns it is simulated when it launches: the hosts file says so before."""
    started = crud.create_run(db_session, engine="vllm", model="m", host_name="local-sim", simulated=True)
    crud.set_run_status(db_session, run_id=started.id, status="launching")
    queued = crud.create_run(db_session, engine="vllm", model="m", host_name="local-sim")
    real = crud.create_run(db_session, engine="vllm", model="m", host_name="gpu-a")
    status = app_status(db_session, database="db", stale_after_s=STALE_AFTER_S, simulated_hosts={"local-sim"})
    assert {run.id: run.host for run in status.active_runs} == {
        started.id: "local-sim (simulated)",
        queued.id: "local-sim (simulated)",
        real.id: "gpu-a",
    }
