"""Several worker processes sharing one PostgreSQL queue: every run is executed exactly once, and no
two runs ever hold the same GPU of a host at the same time."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db import session as db_session
from db.session import new_session
from perflab.runner import wait_for_runs
from tests.fixtures.database import PostgresServer
from tests.fixtures.runs import SimHostFactory, perflab_env, run_key_pids, sized_count, write_hosts_file
from tests.team.conftest import results_of, submit

pytestmark = pytest.mark.postgres

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKERS = 3
HOSTS = 3
RUNS_PER_HOST = 2
REQUESTS = 16


@pytest.fixture
def postgres_queue(postgres_server: PostgresServer) -> Iterator[Engine]:
    """A migrated database of its own on the suite's PostgreSQL server."""
    url = postgres_server.create_database(f"perflab_shared_queue_{os.getpid()}")
    db_session.upgrade(url)
    engine = db_session.get_engine(url)
    yield engine
    engine.dispose()
    postgres_server.drop_database(url)


def _start_workers(engine: Engine, hosts_file: Path, log_dir: Path) -> list[subprocess.Popen[bytes]]:
    workers = []
    for index in range(WORKERS):
        log = (log_dir / f"worker-{index}.log").open("wb")
        workers.append(
            subprocess.Popen(
                [sys.executable, "-m", "perflab", "worker", "--worker-id", f"w{index}", "--poll", "0.2",
                 "--max-parallel", "2"],
                cwd=REPO_ROOT,
                env={**os.environ, **perflab_env(engine, hosts_file)},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )  # fmt: skip
    return workers


def test_three_workers_share_one_postgresql_queue(
    postgres_queue: Engine, sim_host: SimHostFactory, tmp_path: Path
) -> None:
    hosts = [sim_host(f"node-{index}", kind="local", count=2) for index in range(HOSTS)]
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", hosts)
    # Every run wants both GPUs of its host, so the runs of one host must take turns.
    queued = [
        submit(postgres_queue, host, f"random:in=64,out=8,n={REQUESTS}", worker_id=None, tp=2)
        for _, host in itertools.product(range(RUNS_PER_HOST), hosts)
    ]
    workers = _start_workers(postgres_queue, hosts_file, tmp_path)
    try:
        runs = wait_for_runs(postgres_queue, [run.id for run in queued], timeout_s=150.0, poll_s=0.3)
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.wait(timeout=60)

    for run in runs:
        assert run.status == "done", (run.id, run.failure_message)
        # Executed once: one engine launch, one benchmark, one result, one run directory on its host.
        assert len(run.serve_commands) == 1 and len(run.bench_commands) == 1
        [(result, records)] = results_of(postgres_queue, run.id)
        assert result.completed == sized_count(result.result, REQUESTS) == len(records)
        run_dirs = list((Path(hosts[0].workdir).parent / run.host_name / "runs").glob(f"run-{run.id}-*"))
        assert len(run_dirs) == 1, run_dirs
        assert run_key_pids(run.remote_state["run_key"]) == []
    assert len({run.worker_id for run in runs}) >= 2, "the runs were spread over the workers"
    for first, second in itertools.combinations(runs, 2):
        if first.host_name == second.host_name and set(first.gpu_ids) & set(second.gpu_ids):
            assert first.finished_at <= second.ready_at or second.finished_at <= first.ready_at, (
                f"runs {first.id} and {second.id} held GPUs of {first.host_name} at the same time"
            )
    with new_session(postgres_queue) as session:
        assert crud.gpu_locks(session) == []
