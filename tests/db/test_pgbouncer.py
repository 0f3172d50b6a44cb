"""Connections to PostgreSQL: a pool bounded by the runs a worker executes at once, and perflab behind a
real PgBouncer in transaction mode in front of the suite's PostgreSQL: migrations (the advisory lock is
per transaction) and the queue's statements, run again and again from more client connections than
PgBouncer has server connections, so each transaction may land on another server connection, where
statements prepared by psycopg on the first would not exist."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from db import crud
from db import session as db_session
from db.models import utcnow
from db.session import DEFAULT_MAX_PARALLEL, configure_pool, create_engine_for, new_session, upgrade
from perflab.engines import EngineConfig
from perflab.runner import submit_run
from perflab.runner.profile_spec import parse_profile
from tests.fixtures.database import PG_USER, PostgresServer, _as_postgres, _wait_until_accepting
from tests.fixtures.runs import free_port_block

PGBOUNCER = Path("/usr/sbin/pgbouncer")
SERVER_CONNECTIONS = 2
CLIENT_THREADS = 6
ROUNDS = 15


@pytest.fixture(scope="module")
def bouncer_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh database reached through PgBouncer (``pool_mode = transaction``, 2 server connections)."""
    if not PGBOUNCER.exists():
        pytest.fail(f"{PGBOUNCER} not found: install Debian's pgbouncer")
    direct = make_url(postgres_server.create_database(f"perflab_bouncer_{os.getpid()}"))
    directory = Path(tempfile.mkdtemp(prefix="perflab-pgbouncer-"))
    port = free_port_block(1)
    (directory / "users.txt").write_text(f'"{PG_USER}" ""\n')
    (directory / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"{direct.database} = host={direct.host} port={direct.port} dbname={direct.database} user={PG_USER}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {directory / 'users.txt'}\n"
        f"pool_mode = transaction\ndefault_pool_size = {SERVER_CONNECTIONS}\nmax_client_conn = 100\n"
        f"logfile = {directory / 'pgbouncer.log'}\n"
    )
    if os.geteuid() == 0:
        shutil.chown(directory, user=PG_USER)
    bouncer = subprocess.Popen(_as_postgres([str(PGBOUNCER), str(directory / "pgbouncer.ini")]))
    url = direct.set(port=port).render_as_string(hide_password=False)
    try:
        _wait_until_accepting(url)
        yield url
    finally:
        bouncer.terminate()
        bouncer.wait(timeout=30)
        shutil.rmtree(directory, ignore_errors=True)
        postgres_server.drop_database(direct.render_as_string(hide_password=False))


@pytest.mark.postgres
def test_migrations_and_the_queue_work_behind_pgbouncer_in_transaction_mode(bouncer_url: str) -> None:
    engine = create_engine_for(bouncer_url)
    try:
        upgrade(engine)
        config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B")
        runs = [
            submit_run(engine, host_name="h", config=config, profiles=[parse_profile("short:n=5")])
            for _ in range(CLIENT_THREADS * ROUNDS)
        ]
        errors: list[BaseException] = []
        claimed: list[int] = []

        def client(index: int) -> None:
            try:
                for _ in range(ROUNDS):
                    with new_session(engine) as session:
                        run = crud.claim_next_run(session, worker_id=f"w{index}", host_names=["h"])
                        assert run is not None and run.id is not None
                        claimed.append(run.id)
                        assert crud.acquire_gpus(
                            session, host_name="h", gpu_ids=[index], run_id=run.id, worker_id=f"w{index}"
                        )
                        crud.recent_gpu_users(session, host_name="h", since=utcnow() - timedelta(minutes=1))
                        crud.release_gpus(session, run_id=run.id)
                        crud.set_run_status(session, run_id=run.id, status="failed")
                    time.sleep(0.01)
            except BaseException as error:  # reported below, with the thread's index
                errors.append(error)

        threads = [threading.Thread(target=client, args=(index,)) for index in range(CLIENT_THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert errors == []
        assert sorted(claimed) == sorted(run.id for run in runs)
        with engine.connect() as connection:
            prepared = connection.execute(sa.text("SELECT count(*) FROM pg_prepared_statements")).scalar_one()
        assert prepared == 0
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_workers_pool_is_bounded_by_its_parallel_runs(
    bouncer_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db_session, "POOL_TIMEOUT_S", 0.5)
    try:
        configure_pool(3)
        engine = create_engine_for(bouncer_url)
        held = [engine.connect() for _ in range(5)]  # 3 runs + the claim loop + the heartbeat
        with pytest.raises(sa.exc.TimeoutError):
            engine.connect()
        for connection in held:
            connection.close()
        engine.dispose()
        with pytest.raises(ValueError, match="at least 1"):
            configure_pool(0)
    finally:
        configure_pool(DEFAULT_MAX_PARALLEL)
