"""The database becomes unwritable mid-run — a real SQLite file made immutable with ``chattr +i`` (root
ignores file modes, not that flag), or a real PostgreSQL database switched to read-only with its
sessions ended (a superuser cannot write there either) — and ``perflab run`` ends without a traceback,
saying where the run's results are kept; the requests measured so far wait in the spool file and are
stored — the run finished, nothing left in a running state — once the database takes writes again."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine, make_url

from db import crud
from db.models import Run
from db.session import get_engine, new_session, upgrade
from perflab.cli import main
from perflab.runner import spool
from perflab.worker import Worker
from tests.fixtures.database import PostgresServer
from tests.fixtures.runs import SimHostFactory, free_port_block, write_hosts_file

# 20 requests/s for 200 requests: about 10 s of benchmarking, so the database fails mid-run.
PROFILE = "random:in=64,out=8,n=200,rate=20"


@dataclass
class BreakableDatabase:
    """A real database, and the means to stop it taking writes and to give them back."""

    url: str
    engine: Engine
    refuse_writes: Callable[[], None]
    take_writes: Callable[[], None]


def _chattr(flag: str, *paths: Path) -> bool:
    existing = [str(path) for path in paths if path.exists()]
    return subprocess.run(["chattr", flag, *existing], capture_output=True).returncode == 0


def _sqlite(tmp_path: Path) -> Iterator[BreakableDatabase]:
    path = tmp_path / "perflab.db"
    url = f"sqlite:///{path}"
    upgrade(url)
    engine = get_engine(url)
    with new_session(engine) as session:
        crud.list_runs(session)  # the WAL file exists from here on
    files = (path, path.with_name(path.name + "-wal"))
    if not _chattr("+i", *files) or not _chattr("-i", *files):
        pytest.skip("needs chattr +i on this file system, as root")
    yield BreakableDatabase(url, engine, lambda: _chattr("+i", *files), lambda: _chattr("-i", *files))
    _chattr("-i", *files)


def _postgresql(server: PostgresServer) -> Iterator[BreakableDatabase]:
    url = server.create_database("perflab_unwritable")
    upgrade(url)
    name = make_url(url).database

    def read_only(flag: str) -> Callable[[], None]:
        # A new setting applies to new sessions: end the open ones (the app's pool reconnects).
        return lambda: server._admin(
            f'ALTER DATABASE "{name}" SET default_transaction_read_only = {flag}',
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'",
        )

    yield BreakableDatabase(url, get_engine(url), read_only("on"), read_only("off"))
    get_engine(url).dispose()
    server.drop_database(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BreakableDatabase]:
    if request.param == "sqlite":
        yield from _sqlite(tmp_path)
    else:
        yield from _postgresql(request.getfixturevalue("postgres_server"))


def _runs(engine: Engine) -> list[Run]:
    with new_session(engine) as session:
        return crud.get_runs(session, run_ids=[row.id for row in crud.list_runs(session).rows])


def _refuse_writes_when_benchmarking(database: BreakableDatabase, done: threading.Event) -> None:
    """Stop the database taking writes once the run has measured some requests."""
    while not done.wait(0.1):
        if any(run.status == "benchmarking" and (run.progress or {}).get("done", 0) >= 20
               for run in _runs(database.engine)):  # fmt: skip
            database.refuse_writes()
            done.set()


def test_results_wait_in_the_spool_and_are_stored_when_the_database_is_back(
    database: BreakableDatabase,
    sim_host: SimHostFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    host = sim_host("unwritable", kind="local", count=1)
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [host])
    monkeypatch.setenv("PERFLAB_DATABASE_URL", database.url)
    monkeypatch.setenv("PERFLAB_HOSTS", str(hosts_file))
    monkeypatch.setenv("PERFLAB_SPOOL_DIR", str(tmp_path / "spool"))
    refused = threading.Event()
    breaker = threading.Thread(target=_refuse_writes_when_benchmarking, args=(database, refused), daemon=True)
    breaker.start()
    try:
        code = main(
            ["run", "--host", host.name, "--engine", "vllm", "--model", "Qwen/Qwen3-8B",
             "--port", str(free_port_block(1)), "--profile", PROFILE]
        )  # fmt: skip
    finally:
        refused.set()
        breaker.join(10)
    err = capsys.readouterr().err

    (run_row,) = _runs(database.engine)
    spool_file = tmp_path / "spool" / f"run-{run_row.id}.jsonl"
    assert code == 1
    assert f"its results are kept in {spool_file}" in err and "Traceback" not in err
    # While the database refuses writes, the run still reads as benchmarking, with nothing stored.
    assert run_row.status == "benchmarking"
    spooled = spool.pending(run_row.id)
    (result_write,) = [entry for entry in spooled if entry["op"] == "add_result"]
    measured = result_write["args"]["result"]["completed"]
    assert 20 <= measured < 200 and result_write["args"]["result"]["partial"] is True
    assert spooled[-1]["op"] == "set_status" and spooled[-1]["args"]["status"] == "failed"
    assert spooled[-1]["args"]["failure_class"] == "database_unavailable"

    database.take_writes()
    worker = Worker(database.engine, inventory_path=hosts_file)
    try:
        assert worker.run_once() == {}
    finally:
        worker.stop()

    (run_row,) = _runs(database.engine)
    assert run_row.status == "failed" and run_row.failure_class == "database_unavailable"
    assert run_row.remote_state["stopped"]["engine-0"] in ("term", "kill")
    with new_session(database.engine) as session:
        (result,) = crud.list_profile_results(session, run_id=run_row.id)
        records = crud.list_request_records(session, profile_result_id=result.id)
        assert crud.gpu_locks(session) == []
    assert result.completed == measured and len(records) >= measured
    assert not spool_file.exists()
