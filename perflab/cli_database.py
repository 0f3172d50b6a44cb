"""The database of a ``python -m perflab`` command: ``--url`` or the configured one, migrated first."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from db import session as db_session


class DatabaseUnavailable(RuntimeError):
    """The database cannot be opened or migrated; the message names it (password masked)."""


def command_engine(url: str | None) -> Engine:
    """The engine for ``url`` (default: ``PERFLAB_DATABASE_URL`` or var/perflab.db), schema upgraded."""
    target = db_session.normalize_url(url) if url else db_session.database_url()
    try:
        db_session.upgrade(target)
    except sa.exc.SQLAlchemyError as error:
        reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        raise DatabaseUnavailable(f"database {db_session.describe(target)}: {reason}") from None
    return db_session.get_engine(target)
