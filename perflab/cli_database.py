"""The database of a ``python -m perflab`` command: ``--url`` or the configured one, migrated first."""

from __future__ import annotations

import argparse

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from db import session as db_session
from perflab.cli import CommandError

URL_HELP = "database URL (default: $PERFLAB_DATABASE_URL or var/perflab.db)"


class DatabaseUnavailable(CommandError):
    """The database cannot be opened or migrated; the message names it (password masked)."""


def add_url_option(parser: argparse.ArgumentParser) -> None:
    """The ``--url`` option of a command that reads or writes the database."""
    parser.add_argument("--url", help=URL_HELP)


def command_url(url: str | None) -> str:
    """The database a command uses: ``--url`` when given, else ``PERFLAB_DATABASE_URL`` or var/perflab.db."""
    return db_session.normalize_url(url) if url else db_session.database_url()


def database_problem(url: str, error: BaseException) -> str:
    """``database <url, password masked>: <the first line of what the driver said>``."""
    reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
    return f"database {db_session.describe(url)}: {reason}"


def command_engine(url: str | None) -> Engine:
    """The engine for ``url`` (default: ``PERFLAB_DATABASE_URL`` or var/perflab.db), schema upgraded;
    :class:`DatabaseUnavailable` (exit status 1) when it cannot be."""
    target = command_url(url)
    try:
        db_session.upgrade(target)
    except (sa.exc.SQLAlchemyError, ImportError) as error:
        # ImportError: the URL names a driver that is not installed.
        raise DatabaseUnavailable(database_problem(target, error)) from None
    return db_session.get_engine(target)
