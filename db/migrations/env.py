"""Alembic environment for perflab.

Runs on the connection that :mod:`db.session` hands over in ``config.attributes["connection"]``
(inside its locked transaction), or, from the ``alembic`` command line, on a connection to
``PERFLAB_DATABASE_URL``. ``render_as_batch`` lets the same migrations alter tables on SQLite.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel

import db.models  # noqa: F401  (registers every table on SQLModel.metadata)
from db.session import get_engine

target_metadata = SQLModel.metadata


def run_migrations(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def main() -> None:
    if context.is_offline_mode():
        raise SystemExit("perflab migrations run online only: use `python -m perflab db upgrade`")
    connection = context.config.attributes.get("connection")
    if connection is not None:
        run_migrations(connection)
        return
    with get_engine().connect() as own_connection:
        run_migrations(own_connection)
        own_connection.commit()


main()
