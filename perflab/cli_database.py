"""The database of a ``python -m perflab`` command: ``--url`` or the configured one, migrated first.

A command that only reads, or changes what is already stored, never creates a database: a SQLite file
that does not exist is an error that names the file (:func:`missing_database`), so a command started
in the wrong directory says where it looked instead of reading a new, empty database there.

SQLAlchemy and the models are imported by the functions that use them, so ``--help`` of a command that
takes ``--url`` stays quick.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from perflab.cli import CommandError

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

URL_HELP = "database URL (default: $PERFLAB_DATABASE_URL or var/perflab.db)"


class DatabaseUnavailable(CommandError):
    """The database cannot be opened or migrated; the message names it (password masked)."""


def add_url_option(parser: argparse.ArgumentParser) -> None:
    """The ``--url`` option of a command that reads or writes the database."""
    parser.add_argument("--url", help=URL_HELP)


def command_url(url: str | None) -> str:
    """The database a command uses: ``--url`` when given, else ``PERFLAB_DATABASE_URL`` or var/perflab.db."""
    from db import session as db_session

    return db_session.normalize_url(url) if url else db_session.database_url()


def database_problem(url: str, error: BaseException) -> str:
    """``database <url, password masked>: <the first line of what the driver said>``."""
    from db import session as db_session

    reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
    return f"database {db_session.describe(url)}: {reason}"


def database_name(url: str | None) -> str:
    """The database a command uses as it prints it: ``SQLite /abs/var/perflab.db``, or the server's
    URL with its password masked."""
    from db import session as db_session

    return db_session.describe(command_url(url))


def missing_database(url: str) -> str | None:
    """Why ``url`` names no database yet (a SQLite file that does not exist), else None."""
    import sqlalchemy as sa
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except sa.exc.ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    path = Path(parsed.database).expanduser().resolve()
    if path.exists():
        return None
    return (
        f"database SQLite {path} does not exist (nothing is stored there yet); name the database with "
        "--url or PERFLAB_DATABASE_URL"
    )


def command_engine(url: str | None, *, create: bool = True) -> Engine:
    """The engine for ``url`` (default: ``PERFLAB_DATABASE_URL`` or var/perflab.db), schema upgraded;
    :class:`DatabaseUnavailable` (exit status 1) when it cannot be. ``create=False`` (a command that
    only reads or changes what is stored): a database that does not exist is not created but refused."""
    import sqlalchemy as sa

    from db import session as db_session

    target = command_url(url)
    problem = None if create else missing_database(target)
    if problem is not None:
        raise DatabaseUnavailable(problem)
    try:
        db_session.upgrade(target)
    except (sa.exc.SQLAlchemyError, ImportError) as error:
        # ImportError: the URL names a driver that is not installed.
        raise DatabaseUnavailable(database_problem(target, error)) from None
    return db_session.get_engine(target)
