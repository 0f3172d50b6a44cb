"""Engine configurations: one ``engineconfig`` row per distinct fingerprint."""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlmodel import Session, select

from db.models import EngineConfigRow

if TYPE_CHECKING:
    from perflab.engines.config import EngineConfig


def upsert_engine_config(session: Session, *, config: EngineConfig) -> EngineConfigRow:
    """The row for ``config``'s fingerprint, inserted (and flushed, not committed) if new."""
    fingerprint = config.fingerprint()
    query = select(EngineConfigRow).where(EngineConfigRow.fingerprint == fingerprint)
    row = session.exec(query).first()
    if row is not None:
        return row
    row = EngineConfigRow(
        fingerprint=fingerprint,
        engine=config.engine,
        model=config.model,
        config=config.model_dump(mode="json"),
    )
    try:
        with session.begin_nested():
            session.add(row)
    except sa.exc.IntegrityError:
        # Another process stored the same fingerprint first.
        return session.exec(query).one()
    return row


def get_engine_config(session: Session, *, fingerprint: str) -> EngineConfigRow | None:
    """The stored configuration with this fingerprint, or None."""
    return session.exec(select(EngineConfigRow).where(EngineConfigRow.fingerprint == fingerprint)).first()
