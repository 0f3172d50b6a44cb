"""The Datasets page's read model: the stored datasets as a table, a preview of one (its first
prompts, or its first sessions with their turns' lengths), the length table its histogram is drawn
from (prompts, or turns), how many prompts carry their own output length (for Launch's custom
profile), and what the hub cache holds."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from sqlmodel import Session

from db import crud
from db.models import Dataset
from perflab.datasets import (
    SESSION_FORMATS,
    DatasetUploadError,
    ParsedDataset,
    dataset_file_name,
    parse_upload,
    profile_dataset,
)
from perflab.hub.catalog import STAND_INS
from perflab.hub.client import HubFile, cached
from perflab.hub.sample import SAMPLE_CONVERSATIONS
from perflab.views.formatting import MISSING, counted, format_bytes, format_time, shorten

PREVIEW_ROWS = 20
PREVIEW_CHARS = 300
# What a session file's preview shows per session (its column headers, with their help).
SESSION_COLUMNS: dict[str, str] = {
    "Session": "Its place in the file",
    "Turns": "Turns the session sends one after another, each after the server's reply to the last",
    "Tokens per turn": "Each turn's new messages in tokens (the history the server already has comes on top)",
    "Output tokens per turn": "Each turn's output length: its own output_len, else the profile's, else 220",
    "First turn": "The messages of its first turn",
}


def holds_sessions(dataset: Dataset) -> bool:
    """Whether a stored dataset is a session file (its count is of sessions, its lengths of turns)."""
    return dataset.format in SESSION_FORMATS


def _turns(dataset: Dataset) -> int | None:
    return len(dataset.prompt_token_lengths or []) if holds_sessions(dataset) else None


def datasets_table(datasets: list[Dataset]) -> pd.DataFrame:
    """One row per dataset (content not needed), indexed by dataset id: its prompts, or its sessions
    and their turns."""
    rows = [
        {
            "Name": dataset.name,
            "Format": dataset.format,
            "Prompts": None if holds_sessions(dataset) else dataset.num_prompts,
            "Sessions": dataset.num_prompts if holds_sessions(dataset) else None,
            "Turns": _turns(dataset),
            "Size": format_bytes(dataset.size_bytes),
            "Uploaded": format_time(dataset.created_at),
            "By": dataset.created_by or "",
            "Note": dataset.owner_note or "",
            "Content hash": dataset.content_hash[:12],
        }
        for dataset in datasets
    ]
    columns = [
        "Name",
        "Format",
        "Prompts",
        "Sessions",
        "Turns",
        "Size",
        "Uploaded",
        "By",
        "Note",
        "Content hash",
    ]
    frame = pd.DataFrame(rows, columns=columns)
    frame.index = pd.Index([dataset.id for dataset in datasets], name="id")
    return frame


def dataset_choice_label(dataset: Dataset) -> str:
    """``#3 · support-prompts (jsonl, 1200 prompts)``, ``#4 · agents (agentic-jsonl, 40 sessions, 160
    turns)``."""
    count = ""
    if dataset.num_prompts is not None:
        count = f", {counted(dataset.num_prompts, 'session' if holds_sessions(dataset) else 'prompt')}"
        if holds_sessions(dataset):
            count += f", {counted(_turns(dataset) or 0, 'turn')}"
    return f"#{dataset.id} · {dataset.name} ({dataset.format}{count})"


def _numbers(values: list[int | None]) -> str:
    return ", ".join(MISSING if value is None else str(value) for value in values)


def sessions_frame(parsed: ParsedDataset, lengths: list[int], limit: int = PREVIEW_ROWS) -> pd.DataFrame:
    """The first sessions of a session file: turns, each turn's new tokens and output tokens, and the
    first message."""
    texts = parsed.by_session(parsed.prompts)
    outputs = parsed.by_session(parsed.output_lens)
    tokens = parsed.by_session(lengths)
    rows = [
        {
            "Session": number,
            "Turns": parsed.turns[number - 1],
            "Tokens per turn": _numbers(tokens[number - 1]),
            "Output tokens per turn": _numbers(outputs[number - 1]),
            "First turn": shorten(texts[number - 1][0], PREVIEW_CHARS),
        }
        for number in range(1, min(limit, len(parsed.turns)) + 1)
    ]
    return pd.DataFrame(rows, columns=list(SESSION_COLUMNS))


def preview_frame(dataset: Dataset, limit: int = PREVIEW_ROWS) -> pd.DataFrame:
    """The first prompts of a stored dataset with their output lengths and token counts (its first
    sessions, for a session file)."""
    try:
        parsed = parse_upload(dataset_file_name(dataset.name, dataset.format), dataset.content)
    except DatasetUploadError as error:
        return pd.DataFrame({"Problem": [str(error)]})
    lengths = dataset.prompt_token_lengths or parsed.token_lengths
    if parsed.sessions:
        return sessions_frame(parsed, lengths, limit)
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


# A stored session file used as a study profile keeps this many sessions in flight at most (as the
# agentic preset does); a prompt set is sent as a custom profile's is, all at once.
SESSIONS_IN_FLIGHT = 64


def profile_fields(dataset: Dataset) -> dict[str, Any]:
    """A stored dataset as a benchmark profile's fields (a study's tuning or validation profile): every
    prompt it holds once (every session, at most :data:`SESSIONS_IN_FLIGHT` in flight)."""
    count = max(1, dataset.num_prompts or 1)
    fields: dict[str, Any] = {
        "name": f"dataset-{dataset.id}",
        "title": dataset.name,
        **profile_dataset(dataset),
        "num_prompts": count,
        "seed": 42,
    }
    if holds_sessions(dataset):
        fields["max_concurrency"] = min(SESSIONS_IN_FLIGHT, count)
    return fields


def profile_choices(presets: Sequence[str], datasets: Sequence[Dataset]) -> dict[str, str | dict[str, Any]]:
    """The profiles a form offers by label: each preset by its name, then each stored dataset
    (``dataset #3 · agents (agentic-jsonl, 40 sessions, 160 turns)``) as its profile's fields."""
    stored = {f"dataset {dataset_choice_label(dataset)}": profile_fields(dataset) for dataset in datasets}
    return {**{name: name for name in presets}, **stored}


def sessions_summary(dataset: Dataset) -> str | None:
    """``40 sessions, 160 turns: 4.0 turns per session on average`` for a session file."""
    if not holds_sessions(dataset) or not dataset.num_prompts:
        return None
    turns = _turns(dataset) or 0
    per_session = turns / dataset.num_prompts
    held = f"{counted(dataset.num_prompts, 'session')}, {counted(turns, 'turn')}"
    return f"{held}: {per_session:.1f} turns per session on average"


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
