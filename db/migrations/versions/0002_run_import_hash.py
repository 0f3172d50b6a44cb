"""Runs remember the content hash of the file they were imported from, so a re-import is recognised.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("run") as batch:
        batch.add_column(sa.Column("import_hash", sa.String(), nullable=True))
        batch.create_index("ix_run_import_hash", ["import_hash"])


def downgrade() -> None:
    with op.batch_alter_table("run") as batch:
        batch.drop_index("ix_run_import_hash")
        batch.drop_column("import_hash")
