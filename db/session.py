"""Engines, sessions and schema upgrades.

``database_url()`` picks the database: ``PERFLAB_DATABASE_URL`` (any SQLAlchemy URL) or the SQLite
file ``var/perflab.db`` of the repository. ``get_engine()`` builds one engine per URL and keeps it.

PostgreSQL connections come from a bounded pool per process: :func:`pool_size` connections (derived
from the runs a worker executes at once, :func:`configure_pool`), never more, and no server-side
prepared statements (psycopg's ``prepare_threshold=None``), so perflab also works behind PgBouncer in
transaction mode. README.md has the table of connections per worker and app process.

SQLite is set up for several processes sharing one file: WAL journal, ``busy_timeout`` of 30 s,
foreign keys on, and transactions started explicitly (``BEGIN``, or ``BEGIN IMMEDIATE`` for writes
that read first, see :func:`begin_write`) so a writer waits for the lock instead of failing with
"database is locked" halfway through a transaction.

``upgrade()`` applies the Alembic migrations of ``db/migrations`` programmatically; two processes
starting at once serialize on a lock (the SQLite write lock, a PostgreSQL advisory lock) and the
second finds the schema current.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePath
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.pool import StaticPool
from sqlmodel import Session

from db.home import REPO_ROOT
from db.pool_sizes import DEFAULT_MAX_PARALLEL, POOL_FIXED_CONNECTIONS

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
ALEMBIC_INI = Path(__file__).resolve().parent / "alembic.ini"
ENV_VAR = "PERFLAB_DATABASE_URL"
SQLITE_BUSY_TIMEOUT_MS = 30_000
# Execution option that makes the next SQLite transaction start with BEGIN IMMEDIATE.
IMMEDIATE_OPTION = "perflab_begin_immediate"
# Key of the PostgreSQL advisory lock held while migrating ("perflab" in ASCII).
MIGRATION_LOCK_KEY = 0x7065726E6C6162

# Seconds a thread waits for a pooled connection before the pool gives up.
POOL_TIMEOUT_S = 60.0

_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()
_max_parallel = DEFAULT_MAX_PARALLEL


def pool_size(max_parallel: int | None = None) -> int:
    """PostgreSQL connections one process keeps at most: ``max_parallel`` (default: as configured)
    runs + :data:`POOL_FIXED_CONNECTIONS`."""
    return (max_parallel if max_parallel is not None else _max_parallel) + POOL_FIXED_CONNECTIONS


def configure_pool(max_parallel: int) -> None:
    """Size the pools of engines built from now on for a worker executing ``max_parallel`` runs at once
    (call before :func:`get_engine`; the app process keeps the default of 4)."""
    global _max_parallel
    if max_parallel < 1:
        raise ValueError("max_parallel must be at least 1")
    _max_parallel = max_parallel


def default_database_url() -> str:
    """The SQLite file ``var/perflab.db`` under :data:`REPO_ROOT` (``var/`` is made by the first engine
    that opens it, :func:`create_engine_for`)."""
    return f"sqlite:///{REPO_ROOT / 'var' / 'perflab.db'}"


def normalize_url(url: str | URL) -> str:
    """``url`` as a string, with a bare ``postgresql://``/``postgres://`` mapped to psycopg 3."""
    text = url.render_as_string(hide_password=False) if isinstance(url, URL) else str(url).strip()
    for prefix in ("postgres://", "postgresql://"):
        if text.startswith(prefix):
            return "postgresql+psycopg://" + text[len(prefix) :]
    return text


def database_url() -> str:
    """The configured database URL: ``PERFLAB_DATABASE_URL`` or the default SQLite file."""
    configured = os.environ.get(ENV_VAR, "").strip()
    return normalize_url(configured) if configured else default_database_url()


def describe(url: str | URL | None = None) -> str:
    """A display string for ``url`` (default: the configured one) with any password masked."""
    text = normalize_url(url) if url is not None else database_url()
    try:
        parsed = make_url(text)
    except sa.exc.ArgumentError:
        return "<invalid database URL>"
    if parsed.get_backend_name() == "sqlite":
        return f"SQLite {parsed.database or ':memory:'}"
    return parsed.render_as_string(hide_password=True)


# Backend names as SQLAlchemy spells them → as people do.
BACKEND_NAMES: dict[str, str] = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}


def public_name(url: str | URL | None = None) -> str:
    """The database kind and name only (``SQLite · perflab.db``, ``PostgreSQL · perflab``): what
    every viewer of the app may see, with no server path, host, user or password."""
    text = normalize_url(url) if url is not None else database_url()
    try:
        parsed = make_url(text)
    except sa.exc.ArgumentError:
        return "invalid database URL"
    backend = parsed.get_backend_name()
    kind = BACKEND_NAMES.get(backend, backend)
    if backend == "sqlite" and parsed.database in (None, "", ":memory:"):
        return f"{kind} · in memory"
    name = PurePath(parsed.database).name if backend == "sqlite" and parsed.database else parsed.database
    return f"{kind} · {name}" if name else kind


def is_sqlite(bind: Engine | Connection | Session) -> bool:
    """Whether ``bind`` talks to SQLite."""
    dialect = bind.get_bind().dialect if isinstance(bind, Session) else bind.dialect
    return dialect.name == "sqlite"


def _switch_to_wal(cursor: Any) -> None:
    """Put the SQLite file in WAL mode.

    The switch needs the file's exclusive lock. While another connection writes to a file still in
    rollback mode (processes racing to create a fresh database), SQLite answers "database is locked"
    at once instead of waiting for ``busy_timeout``, so the switch is asked again, with a growing
    pause, until that timeout has passed.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    pause_s = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() + pause_s > deadline:
                raise
        time.sleep(pause_s)
        pause_s = min(pause_s * 2, 0.25)


def _configure_sqlite(engine: Engine, *, in_memory: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event issue BEGIN itself (pysqlite would defer it).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if not in_memory:
            _switch_to_wal(cursor)
            cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        immediate = connection.get_execution_options().get(IMMEDIATE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def create_engine_for(url: str) -> Engine:
    """A new engine for ``url`` with perflab's connection settings (use :func:`get_engine`)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        in_memory = parsed.database in (None, "", ":memory:")
        if not in_memory:
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(
            parsed,
            connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
            poolclass=StaticPool if in_memory else None,
        )
        _configure_sqlite(engine, in_memory=in_memory)
        return engine
    return sa.create_engine(
        parsed,
        pool_pre_ping=True,
        pool_size=pool_size(),
        max_overflow=0,
        pool_timeout=POOL_TIMEOUT_S,
        # PgBouncer in transaction mode hands each transaction any server connection, where statements
        # another connection prepared do not exist: psycopg must not prepare any.
        connect_args={"prepare_threshold": None} if parsed.get_driver_name() == "psycopg" else {},
    )


def get_engine(url: str | None = None) -> Engine:
    """The engine for ``url`` (default: :func:`database_url`), built once per URL and cached."""
    key = normalize_url(url) if url is not None else database_url()
    with _engines_lock:
        engine = _engines.get(key)
        if engine is None:
            engine = create_engine_for(key)
            _engines[key] = engine
        return engine


def dispose_engines() -> None:
    """Close every cached engine's connections and forget them (tests; after a fork)."""
    with _engines_lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()


def new_session(engine: Engine | None = None) -> Session:
    """A session on ``engine`` (default: the configured database); objects stay usable after commit."""
    return Session(engine if engine is not None else get_engine(), expire_on_commit=False)


@contextmanager
def session_scope(engine: Engine | None = None) -> Iterator[Session]:
    """A session that commits when the block ends normally and rolls back on an exception."""
    session = new_session(engine)
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def begin_write(session: Session) -> None:
    """Start a fresh write transaction on ``session`` (committing whatever it had pending).

    On SQLite the transaction starts with ``BEGIN IMMEDIATE``: it takes the write lock at once
    (waiting up to ``busy_timeout``), so reading and then writing inside it can never fail with
    "database is locked". Elsewhere it is an ordinary transaction; use row locks
    (``with_for_update``) where needed.
    """
    if session.in_transaction():
        session.commit()
    session.connection(execution_options={IMMEDIATE_OPTION: True})


def _alembic_config(connection: Connection | None = None) -> Any:
    """Alembic's config of ``db/migrations`` (running on ``connection`` when given)."""
    from alembic.config import Config

    config = Config(str(ALEMBIC_INI))
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def _engine_of(url_or_engine: str | Engine | None) -> Engine:
    return url_or_engine if isinstance(url_or_engine, Engine) else get_engine(url_or_engine)


def _run_alembic(url_or_engine: str | Engine | None, action: str, revision: str) -> None:
    from alembic import command

    with _engine_of(url_or_engine).connect() as connection:
        connection = connection.execution_options(**{IMMEDIATE_OPTION: True})
        with connection.begin():
            if connection.dialect.name == "postgresql":
                connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
            getattr(command, action)(_alembic_config(connection), revision)


def upgrade(url_or_engine: str | Engine | None = None, revision: str = "head") -> None:
    """Apply the migrations up to ``revision`` (idempotent; safe when processes race)."""
    _run_alembic(url_or_engine, "upgrade", revision)


def downgrade(url_or_engine: str | Engine | None = None, revision: str = "base") -> None:
    """Revert the migrations down to ``revision`` (``base`` drops every table)."""
    _run_alembic(url_or_engine, "downgrade", revision)


def current_revision(url_or_engine: str | Engine | None = None) -> str | None:
    """The revision the database is at, or None for an empty database."""
    from alembic.runtime.migration import MigrationContext

    with _engine_of(url_or_engine).connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str:
    """The newest revision of ``db/migrations``."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations found in {MIGRATIONS_DIR}")
    return head
