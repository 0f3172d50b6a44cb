"""Request records keep the server's own queue time and time to first token (vLLM 0.33's
``server_queue_times`` / ``server_ttfts``), in milliseconds, null where the server sent none.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("requestrecord") as batch:
        batch.add_column(sa.Column("server_queue_ms", sa.Float(), nullable=True))
        batch.add_column(sa.Column("server_ttft_ms", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("requestrecord") as batch:
        batch.drop_column("server_ttft_ms")
        batch.drop_column("server_queue_ms")
