"""The ``dataset`` table: prompt files uploaded by users, stored in the database itself so that
workers on other machines can read them."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from db.models.base import UTCDateTime, utcnow


class Dataset(SQLModel, table=True):
    """One uploaded dataset; ``content_hash`` (sha256 of ``content``) deduplicates uploads."""

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True)
    content_hash: str = Field(unique=True, index=True)
    format: str
    owner_note: str | None = Field(default=None, sa_type=sa.Text)
    size_bytes: int
    num_prompts: int | None = None
    content: bytes = Field(sa_type=sa.LargeBinary)
    prompt_token_lengths: list[int] | None = Field(default=None, sa_type=sa.JSON)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    created_by: str | None = None
