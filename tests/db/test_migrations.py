"""Alembic migrations on SQLite and PostgreSQL: up, down, up again, and in step with the models."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import threading
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlmodel import SQLModel

import db.models  # noqa: F401
from db import session as db_session
from tests.db import concurrency_workers

TABLES = {
    "host",
    "dataset",
    "engineconfig",
    "run",
    "profileresult",
    "requestrecord",
    "runsample",
    "gpulock",
    "worker",
    "study",
    "studycandidate",
}


def table_names(url: str) -> set[str]:
    return set(sa.inspect(db_session.get_engine(url)).get_table_names())


def test_schema_is_at_head_and_matches_the_models(database_url: str) -> None:
    assert db_session.current_revision(database_url) == db_session.head_revision()
    assert table_names(database_url) >= TABLES
    with db_session.get_engine(database_url).connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, SQLModel.metadata) == []


def test_upgrade_is_idempotent(database_url: str) -> None:
    db_session.upgrade(database_url)
    db_session.upgrade(database_url)
    assert db_session.current_revision(database_url) == db_session.head_revision()


def test_downgrade_to_base_and_back(database_url: str) -> None:
    db_session.downgrade(database_url, "base")
    assert table_names(database_url).isdisjoint(TABLES)
    assert db_session.current_revision(database_url) is None
    db_session.upgrade(database_url)
    assert table_names(database_url) >= TABLES
    assert db_session.current_revision(database_url) == db_session.head_revision()


def test_processes_racing_to_upgrade_a_fresh_database(
    request: pytest.FixtureRequest, tmp_path: Path, database_url: str
) -> None:
    if database_url.startswith("sqlite"):
        fresh = f"sqlite:///{tmp_path / 'race.db'}"
    else:
        fresh = request.getfixturevalue("postgres_server").create_database(f"perflab_race_{os.getpid()}")
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager, ProcessPoolExecutor(max_workers=3, mp_context=context) as pool:
        barrier = manager.Barrier(3)
        futures = [pool.submit(concurrency_workers.upgrade, fresh, barrier) for _ in range(3)]
        revisions = [future.result(timeout=120) for future in futures]
    assert revisions == [db_session.head_revision()] * 3
    assert table_names(fresh) >= TABLES
    db_session.get_engine(fresh).dispose()


def test_a_connection_waits_to_switch_a_file_another_process_is_writing_to_wal(tmp_path: Path) -> None:
    """SQLite refuses the switch to WAL at once, whatever its busy timeout, while another connection
    writes to the file in rollback mode; the new connection waits for that write instead of failing."""
    path = tmp_path / "rollback.db"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("CREATE TABLE t (x INTEGER)")
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO t VALUES (1)")
    release = threading.Timer(0.5, writer.execute, args=("COMMIT",))
    release.start()
    engine = db_session.get_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("SELECT count(*) FROM t").scalar() == 1
    finally:
        release.join()
        writer.close()
        engine.dispose()
