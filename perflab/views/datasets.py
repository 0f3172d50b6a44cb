"""The Datasets page's read model: the stored datasets as a table, a preview of one, the
prompt-length table its histogram is drawn from, how many prompts carry their own output length (for
Launch's custom profile), and what the hub cache holds."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from sqlmodel import Session

from db import crud
from db.models import Dataset
from perflab.datasets import DatasetUploadError, dataset_file_name, parse_upload
from perflab.hub.catalog import STAND_INS
from perflab.hub.client import HubFile, cached
from perflab.hub.sample import SAMPLE_CONVERSATIONS
from perflab.views.formatting import format_bytes, format_time, shorten

PREVIEW_ROWS = 20
PREVIEW_CHARS = 300


def datasets_table(datasets: list[Dataset]) -> pd.DataFrame:
    """One row per dataset (content not needed), indexed by dataset id."""
    rows = [
        {
            "Name": dataset.name,
            "Format": dataset.format,
            "Prompts": dataset.num_prompts,
            "Size": format_bytes(dataset.size_bytes),
            "Uploaded": format_time(dataset.created_at),
            "By": dataset.created_by or "",
            "Note": dataset.owner_note or "",
            "Content hash": dataset.content_hash[:12],
        }
        for dataset in datasets
    ]
    columns = ["Name", "Format", "Prompts", "Size", "Uploaded", "By", "Note", "Content hash"]
    frame = pd.DataFrame(rows, columns=columns)
    frame.index = pd.Index([dataset.id for dataset in datasets], name="id")
    return frame


def dataset_choice_label(dataset: Dataset) -> str:
    """``#3 · support-prompts (jsonl, 1200 prompts)``."""
    count = f", {dataset.num_prompts} prompts" if dataset.num_prompts is not None else ""
    return f"#{dataset.id} · {dataset.name} ({dataset.format}{count})"


def preview_frame(dataset: Dataset, limit: int = PREVIEW_ROWS) -> pd.DataFrame:
    """The first prompts of a stored dataset with their output lengths and token counts."""
    try:
        parsed = parse_upload(dataset_file_name(dataset.name, dataset.format), dataset.content)
    except DatasetUploadError as error:
        return pd.DataFrame({"Problem": [str(error)]})
    lengths = dataset.prompt_token_lengths or parsed.token_lengths
    rows = [
        {
            "Prompt": shorten(prompt, PREVIEW_CHARS),
            "Output len": output_len,
            "Prompt tokens": lengths[position] if position < len(lengths) else None,
        }
        for position, (prompt, output_len) in enumerate(
            zip(parsed.prompts[:limit], parsed.output_lens, strict=False)
        )
    ]
    return pd.DataFrame(rows, columns=["Prompt", "Output len", "Prompt tokens"])


def output_length_counts(dataset: Dataset) -> tuple[int, int]:
    """How many of a stored dataset's prompts carry their own output length, and how many it holds."""
    try:
        parsed = parse_upload(dataset_file_name(dataset.name, dataset.format), dataset.content)
    except DatasetUploadError:
        return 0, 0
    return sum(length is not None for length in parsed.output_lens), parsed.num_prompts


def load_output_length_counts(session: Session, dataset_id: int) -> tuple[int, int]:
    """:func:`output_length_counts` of a stored dataset ((0, 0) when it does not exist)."""
    dataset = crud.get_dataset(session, dataset_id=dataset_id)
    return (0, 0) if dataset is None else output_length_counts(dataset)


def load_preview(session: Session, dataset_id: int) -> pd.DataFrame | None:
    """:func:`preview_frame` of a stored dataset, or None when it does not exist."""
    dataset = crud.get_dataset(session, dataset_id=dataset_id)
    return None if dataset is None else preview_frame(dataset)


def lengths_frame(lengths: list[int] | None) -> pd.DataFrame:
    """The prompt lengths as a one-column table (``tokens``) for the histogram."""
    return pd.DataFrame({"tokens": pd.Series(lengths or [], dtype="int64")})


def length_summary(lengths: list[int] | None) -> dict[str, float]:
    """Min, median, mean, p99 and max prompt length in tokens (empty for no lengths)."""
    if not lengths:
        return {}
    series = pd.Series(lengths, dtype="float64")
    return {
        "min": float(series.min()),
        "median": float(series.median()),
        "mean": float(series.mean()),
        "p99": float(series.quantile(0.99)),
        "max": float(series.max()),
    }


def hub_status(file: HubFile, cache_dir: Path) -> str:
    """Whether the hub cache holds ``file`` (with its size, checksum and commit), in one sentence."""
    found = cached(file, cache_dir)
    if found is None:
        stand_in = STAND_INS.get(file)
        fallback = (
            f" Until it is, profiles that need it run on perflab's ShareGPT-format sample "
            f"({SAMPLE_CONVERSATIONS} generated conversations, labelled as such in results)."
            if stand_in is not None
            else ""
        )
        return f"`{file.ref}` is not fetched yet.{fallback}"
    commit = f", commit {found.commit[:12]}" if found.commit else ""
    return (
        f"`{file.ref}` is cached: {format_bytes(found.size)}, SHA-256 {found.sha256[:12]}…{commit} "
        f"(`{found.path}`)."
    )
