"""Small building blocks shared by the crud functions that write."""

from __future__ import annotations

from typing import Any, TypeVar

import sqlalchemy as sa
from sqlmodel import Session, SQLModel, select

from db.crud.errors import NotFound
from db.session import begin_write

RowT = TypeVar("RowT", bound=SQLModel)


def lock_row(session: Session, model: type[RowT], row_id: Any, kind: str) -> RowT:
    """Begin a write transaction and load row ``row_id`` of ``model``, locked against concurrent
    changes (``FOR UPDATE`` on PostgreSQL; the SQLite write lock). Raises :class:`NotFound`."""
    begin_write(session)
    row = session.exec(
        select(model).where(model.id == row_id).with_for_update().execution_options(populate_existing=True)
    ).first()
    if row is None:
        session.rollback()
        raise NotFound(kind, row_id)
    return row


def execute_write(session: Session, statement: sa.Executable) -> int:
    """Run one UPDATE/DELETE in its own write transaction; returns the number of rows it touched."""
    begin_write(session)
    count = session.execute(statement).rowcount
    session.commit()
    return int(count)
