"""Studies say when a worker should advance them next (``study.wake_at``): set to now when something
about the study changed (a run of it ended or stored a result, its status was changed), pushed a while
ahead when a worker takes it, so one worker advances a study per change instead of every worker on
every poll.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("study") as batch:
        batch.add_column(sa.Column("wake_at", sa.DateTime(timezone=True), nullable=True))
        batch.create_index("ix_study_wake_at", ["wake_at"])
    # Studies not finished are due at once, as they were on every poll before.
    op.execute(
        "UPDATE study SET wake_at = updated_at "
        "WHERE status NOT IN ('done', 'failed', 'cancelled', 'incomplete')"
    )


def downgrade() -> None:
    with op.batch_alter_table("study") as batch:
        batch.drop_index("ix_study_wake_at")
        batch.drop_column("wake_at")
