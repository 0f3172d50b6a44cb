"""PostgreSQL stops accepting connections while a run is being placed — a read (which runs earlier
runs left processes on the host) meets it, not a write — and the run ends ``database_unavailable``
with the spool path, its end stored once the database is back, never ``internal_error``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from db import crud
from db.session import get_engine, new_session, upgrade
from perflab.cli import main
from perflab.runner import execute, spool
from perflab.worker import Worker
from tests.fixtures.database import PostgresServer
from tests.fixtures.runs import SimHostFactory, free_port_block, write_hosts_file


def test_a_database_lost_while_placing_is_database_unavailable(
    postgres_server: PostgresServer,
    sim_host: SimHostFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = postgres_server.create_database("perflab_lost_placing")
    upgrade(url)
    name = make_url(url).database
    host = sim_host("placing", kind="local", count=1)
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [host])
    monkeypatch.setenv("PERFLAB_DATABASE_URL", url)
    monkeypatch.setenv("PERFLAB_HOSTS", str(hosts_file))
    monkeypatch.setenv("PERFLAB_SPOOL_DIR", str(tmp_path / "spool"))
    real_stop_orphans = execute.stop_orphans

    def database_goes_away_first(*args: Any, **kwargs: Any) -> dict[str, str]:
        postgres_server._admin(
            f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false',
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'",
        )
        return real_stop_orphans(*args, **kwargs)

    monkeypatch.setattr(execute, "stop_orphans", database_goes_away_first)
    try:
        code = main(
            ["run", "--host", host.name, "--engine", "vllm", "--model", "Qwen/Qwen3-8B",
             "--port", str(free_port_block(1)), "--profile", "random:in=16,out=4,n=4"]
        )  # fmt: skip
        err = capsys.readouterr().err
        assert code == 1 and "Traceback" not in err and "OperationalError" not in err.split("(")[0]
        (entry,) = [line for line in err.splitlines() if "its results are kept in" in line]
        spool_files = list((tmp_path / "spool").glob("run-*.jsonl"))
        assert len(spool_files) == 1 and str(spool_files[0]) in entry
        run_id = int(spool_files[0].stem.split("-")[1])
        spooled = spool.pending(run_id)
        assert spooled[-1]["op"] == "set_status" and spooled[-1]["args"]["status"] == "failed"
        assert spooled[-1]["args"]["failure_class"] == "database_unavailable"
    finally:
        postgres_server._admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')

    engine = get_engine(url)
    worker = Worker(engine, inventory_path=hosts_file)
    try:
        worker.run_once()
    finally:
        worker.stop()
    with new_session(engine) as session:
        run = crud.require_run(session, run_id=run_id)
        assert (run.status, run.failure_class) == ("failed", "database_unavailable")
        assert crud.gpu_locks(session) == []
    assert not spool_files[0].exists()
    engine.dispose()
    postgres_server.drop_database(url)
