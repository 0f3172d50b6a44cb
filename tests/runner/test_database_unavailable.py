"""The database becomes unwritable mid-run (a real SQLite file made immutable with ``chattr +i``: root
ignores file modes, not that flag): ``perflab run`` ends without a traceback and says where the run's
results are kept; the requests measured so far wait in the spool file and are stored — the run
finished, nothing left in a running state — once the database takes writes again."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import get_engine, new_session, upgrade
from perflab.cli import main
from perflab.runner import spool
from perflab.worker import Worker
from tests.fixtures.runs import SimHostFactory, free_port_block, write_hosts_file

# 20 requests/s for 200 requests: about 10 s of benchmarking, so the database fails mid-run.
PROFILE = "random:in=64,out=8,n=200,rate=20"


def _chattr(flag: str, *paths: Path) -> bool:
    existing = [str(path) for path in paths if path.exists()]
    return subprocess.run(["chattr", flag, *existing], capture_output=True).returncode == 0


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Iterator[tuple[Path, Engine]]:
    path = tmp_path / "perflab.db"
    url = f"sqlite:///{path}"
    upgrade(url)
    engine = get_engine(url)
    with new_session(engine) as session:
        crud.list_runs(session)  # the WAL file exists from here on
    wal = path.with_name(path.name + "-wal")
    if not _chattr("+i", path, wal) or not _chattr("-i", path, wal):
        pytest.skip("needs chattr +i on this file system, as root")
    yield path, engine
    _chattr("-i", path, wal)


def _lock_when_benchmarking(
    engine: Engine, path: Path, locked: threading.Event, stop: threading.Event
) -> None:
    """Make the database file and its WAL immutable once the run has measured some requests."""
    while not stop.wait(0.1):
        with new_session(engine) as session:
            runs = crud.get_runs(session, run_ids=[row.id for row in crud.list_runs(session).rows])
        if any(run.status == "benchmarking" and (run.progress or {}).get("done", 0) >= 20 for run in runs):
            _chattr("+i", path, path.with_name(path.name + "-wal"))
            locked.set()
            return


def test_results_wait_in_the_spool_and_are_stored_when_the_database_is_back(
    sqlite_file: tuple[Path, Engine],
    sim_host: SimHostFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, engine = sqlite_file
    host = sim_host("unwritable", kind="local", count=1)
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [host])
    monkeypatch.setenv("PERFLAB_DATABASE_URL", f"sqlite:///{path}")
    monkeypatch.setenv("PERFLAB_HOSTS", str(hosts_file))
    monkeypatch.setenv("PERFLAB_SPOOL_DIR", str(tmp_path / "spool"))
    locked, stop = threading.Event(), threading.Event()
    locker = threading.Thread(target=_lock_when_benchmarking, args=(engine, path, locked, stop), daemon=True)
    locker.start()
    try:
        code = main(
            ["run", "--host", host.name, "--engine", "vllm", "--model", "Qwen/Qwen3-8B",
             "--port", str(free_port_block(1)), "--profile", PROFILE]
        )  # fmt: skip
    finally:
        stop.set()
        locker.join(10)
    err = capsys.readouterr().err
    assert locked.is_set()

    (run_row,) = _runs(engine)
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

    _chattr("-i", path, path.with_name(path.name + "-wal"))
    assert Worker(engine, inventory_path=hosts_file).run_once() == {}

    (run_row,) = _runs(engine)
    assert run_row.status == "failed" and run_row.failure_class == "database_unavailable"
    with new_session(engine) as session:
        (result,) = crud.list_profile_results(session, run_id=run_row.id)
        records = crud.list_request_records(session, profile_result_id=result.id)
        assert crud.gpu_locks(session) == []
    assert result.completed == measured and len(records) >= measured
    assert not spool_file.exists()
    assert json.dumps(run_row.remote_state["stopped"])  # the engine and the bench were stopped


def _runs(engine: Engine) -> list:  # type: ignore[type-arg]
    with new_session(engine) as session:
        return crud.get_runs(session, run_ids=[row.id for row in crud.list_runs(session).rows])
