"""Datasets: uploaded prompt files, deduplicated by the sha256 of their content."""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from sqlalchemy.orm import defer
from sqlmodel import Session, select

from db.crud.fields import check_choice
from db.crud.writes import execute_write
from db.models import DATASET_FORMATS, Dataset
from db.session import begin_write


def content_hash(content: bytes) -> str:
    """The sha256 hex digest that identifies a dataset's content."""
    return hashlib.sha256(content).hexdigest()


def create_dataset(
    session: Session,
    *,
    name: str,
    content: bytes,
    format: str,
    owner_note: str | None = None,
    created_by: str | None = None,
    num_prompts: int | None = None,
    prompt_token_lengths: list[int] | None = None,
) -> Dataset:
    """Store a dataset, or return the stored one with the same content (its name unchanged)."""
    check_choice("dataset format", format, DATASET_FORMATS)
    if not name.strip():
        raise ValueError("dataset name must not be empty")
    digest = content_hash(content)
    begin_write(session)
    existing = session.exec(select(Dataset).where(Dataset.content_hash == digest)).first()
    if existing is not None:
        session.commit()
        return existing
    dataset = Dataset(
        name=name.strip(),
        content_hash=digest,
        format=format,
        owner_note=owner_note,
        size_bytes=len(content),
        num_prompts=num_prompts,
        content=content,
        prompt_token_lengths=prompt_token_lengths,
        created_by=created_by,
    )
    session.add(dataset)
    try:
        session.commit()
    except sa.exc.IntegrityError:
        # The same content was stored by another process meanwhile.
        session.rollback()
        return session.exec(select(Dataset).where(Dataset.content_hash == digest)).one()
    return dataset


def list_datasets(session: Session) -> list[Dataset]:
    """Every dataset, newest first, without loading the content (reading ``content`` raises)."""
    query = (
        select(Dataset).options(defer(Dataset.content, raiseload=True)).order_by(Dataset.created_at.desc())
    )
    return list(session.exec(query))


def get_dataset(session: Session, *, dataset_id: int) -> Dataset | None:
    """One dataset with its content, or None."""
    return session.get(Dataset, dataset_id)


def delete_dataset(session: Session, *, dataset_id: int) -> bool:
    """Delete a dataset; False if it did not exist."""
    return bool(execute_write(session, sa.delete(Dataset).where(Dataset.id == dataset_id)))
