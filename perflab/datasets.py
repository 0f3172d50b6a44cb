"""Uploaded prompt sets and session files for the Datasets page: validation, token-length statistics
and storage.

An upload is read with the benchmark's own dataset readers (:mod:`perflab.bench.datasets`), so a file
accepted here is one the bench can send: JSON lines with a ``prompt`` field, CSV with a ``prompt``
column, plain text (one prompt per line), or a ShareGPT JSON array (the first human turn of each
conversation with at least two turns); or multi-turn sessions in the agentic-trace forms
(docs/workloads.md): JSON lines of one conversation each (``[turn, …]`` or ``{"turns": [...]}``, a
turn holding the messages it adds and an optional ``output_len``), or SGLang's JSON object
``{"conversations": [...]}`` — told apart from prompt sets by their first line or character. A session
file holds at most :data:`MAX_SESSION_TURNS` turns. Problems raise :class:`DatasetUploadError` naming
the file, line and field, like ``prompts.jsonl:3: field 'prompt': missing``.

Lengths (of each prompt, or each turn's new messages) are counted with a tokenizer when one is given (a
``tokenizer.json`` or model directory on the app machine), else estimated at four characters per
token, and stored with the dataset (deduplicated by the sha256 of its content). A stored dataset is
used by a benchmark profile through :func:`profile_dataset`: ``custom`` (or ``sharegpt``, or
``agentic-trace`` for sessions) with the content hash as reference.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path, PurePath
from typing import TypeVar

from sqlmodel import Session

from db import crud
from db.models import Dataset
from perflab.bench.datasets.base import DatasetSpec
from perflab.bench.datasets.base import Session as Conversation
from perflab.bench.datasets.conversations import read_agentic_sessions
from perflab.bench.datasets.custom import read_csv, read_jsonl, read_lines
from perflab.bench.datasets.jsonscan import read_text
from perflab.bench.datasets.sharegpt import CHARS_PER_TOKEN, read_pairs
from perflab.bench.errors import BenchError, DatasetError
from perflab.bench.tokenizer import Tokenizer, load_local_tokenizer
from perflab.views.formatting import format_bytes

MAX_UPLOAD_BYTES = 32 * 1024 * 1024
MAX_SESSION_TURNS = 200_000
# File suffix → stored dataset format (a session file's, when its content is one).
FORMATS_BY_SUFFIX: dict[str, str] = {".jsonl": "jsonl", ".csv": "csv", ".txt": "text", ".json": "sharegpt"}
SESSION_FORMATS_BY_SUFFIX: dict[str, str] = {".jsonl": "agentic-jsonl", ".json": "agentic-json"}
SESSION_FORMATS: frozenset[str] = frozenset(SESSION_FORMATS_BY_SUFFIX.values())
SUFFIX_BY_FORMAT: dict[str, str] = {
    fmt: suffix for table in (FORMATS_BY_SUFFIX, SESSION_FORMATS_BY_SUFFIX) for suffix, fmt in table.items()
}
T = TypeVar("T")
_ROW_READERS = {"jsonl": read_jsonl, "csv": read_csv, "text": read_lines}
# Said under an error in the first line of a JSON lines file: the two forms it may take.
JSONL_FORMS = (
    " (a prompt file has a JSON object with a 'prompt' on each line; a session file has one conversation "
    'per line, [turn, …] or {"turns": [...]}, each turn {"messages": [...]}: see docs/workloads.md)'
)
# Said under an error about the whole of a JSON file (its shape, or JSON broken on its first line).
JSON_FORMS = (
    " (a ShareGPT file is a JSON array of conversations; a session file is an object "
    '{"conversations": [conversation, …]}, each a list of turns {"messages": [...]}: see docs/workloads.md)'
)


class DatasetUploadError(ValueError):
    """An upload that cannot be used; the message names the file (and line and field when known)."""


@dataclass(frozen=True)
class ParsedDataset:
    """The prompts of a valid upload and their lengths in tokens; for a session file, every turn's new
    messages as one text (in session order) with its output length and tokens, and ``turns`` the
    number of turns of each session."""

    name: str
    format: str
    prompts: list[str]
    output_lens: list[int | None]
    token_lengths: list[int]
    lengths_source: str
    turns: tuple[int, ...] = ()

    @property
    def sessions(self) -> bool:
        return self.format in SESSION_FORMATS

    @property
    def num_prompts(self) -> int:
        """How many prompts it holds (sessions, for a session file: what a profile's count counts)."""
        return len(self.turns) if self.sessions else len(self.prompts)

    def by_session(self, items: Sequence[T]) -> list[list[T]]:
        """A session file's per-turn ``items`` (its ``prompts``, ``token_lengths``…), by session."""
        starts = [0, *accumulate(self.turns)]
        return [list(items[start:end]) for start, end in zip(starts, starts[1:], strict=False)]


def dataset_format(filename: str, content: bytes = b"") -> str:
    """The format of an upload from its file name and, for JSON, its start (a session file's first line
    is a conversation, its JSON an object); raises for a suffix no reader handles."""
    suffix = PurePath(filename).suffix.lower()
    if suffix not in FORMATS_BY_SUFFIX:
        raise DatasetUploadError(
            f"{filename}: unsupported file type {suffix or '(none)'}; "
            "upload .jsonl, .csv, .json (ShareGPT, or sessions) or .txt"
        )
    return (
        SESSION_FORMATS_BY_SUFFIX[suffix] if _holds_sessions(suffix, content) else FORMATS_BY_SUFFIX[suffix]
    )


def _holds_sessions(suffix: str, content: bytes) -> bool:
    """Whether a JSON upload is a session file: a JSON lines file whose first line is a conversation (a
    list of turns, or an object with ``turns``), a JSON file that is an object (a ShareGPT dump is an
    array)."""
    text = content.lstrip(b"\xef\xbb\xbf \t\r\n")
    if suffix == ".json":
        return text.startswith(b"{")
    if suffix != ".jsonl":
        return False
    first = text.split(b"\n", 1)[0].strip()
    if first.startswith(b"["):
        return True
    try:
        value = json.loads(first)
    except (ValueError, RecursionError):
        return False  # the prompt reader names the problem
    return isinstance(value, dict) and "turns" in value and "prompt" not in value


def estimate_tokens(text: str) -> int:
    """A prompt's length in tokens at four characters per token (at least one)."""
    return max(1, round(len(text) / CHARS_PER_TOKEN))


def token_lengths(prompts: list[str], tokenizer: Tokenizer | None) -> tuple[list[int], str]:
    """The length of each prompt in tokens and how it was counted (``tokenizer`` or ``estimate``)."""
    if tokenizer is None:
        return [estimate_tokens(prompt) for prompt in prompts], "estimate"
    return [tokenizer.count(prompt) for prompt in prompts], "tokenizer"


def load_tokenizer(path: str) -> Tokenizer:
    """A local tokenizer from a ``tokenizer.json`` or model directory; raises with a clear message."""
    try:
        tokenizer = load_local_tokenizer(path.strip())
    except BenchError as error:
        raise DatasetUploadError(str(error)) from None
    if tokenizer is None:
        raise DatasetUploadError(
            f"no tokenizer found at {path.strip()!r} (give a tokenizer.json or a model directory)"
        )
    return tokenizer


def _rows(path: Path, fmt: str) -> list[tuple[str, int | None]]:
    if fmt == "sharegpt":
        return [(prompt, None) for prompt, _reply in read_pairs(str(path))]
    return _ROW_READERS[fmt](str(path), read_text(str(path)))


def _sessions(path: Path, tokenizer: Tokenizer | None) -> list[Conversation]:
    """Every conversation of a session file, read as the bench reads an agentic trace."""
    spec = DatasetSpec(kind="agentic-trace", path=str(path), count=MAX_SESSION_TURNS + 1)
    return read_agentic_sessions(spec, tokenizer)


def _parsed_sessions(
    name: str, fmt: str, sessions: list[Conversation], tokenizer: Tokenizer | None
) -> ParsedDataset:
    """A session file's turns, each its new messages' text, output length and length in tokens."""
    turns = [turn for session in sessions for turn in session.turns]
    if len(turns) > MAX_SESSION_TURNS:
        raise DatasetUploadError(
            f"{name}: the file holds more than {MAX_SESSION_TURNS:,} turns; split it into smaller files"
        )
    texts = ["\n".join(message["content"] for message in turn.messages) for turn in turns]
    counted = [turn.prompt_tokens for turn in turns]
    if tokenizer is None or None in counted:
        lengths, source = token_lengths(texts, None)
    else:
        lengths, source = [int(count or 0) for count in counted], "tokenizer"
    return ParsedDataset(
        name=name,
        format=fmt,
        prompts=texts,
        output_lens=[turn.output_len for turn in turns],
        token_lengths=lengths,
        lengths_source=source,
        turns=tuple(len(session.turns) for session in sessions),
    )


def _forms_hint(fmt: str, error: DatasetError) -> str:
    """The forms a file of this suffix may take, said under an error that may come from reading it in the
    wrong one: on the first line of a JSON lines prompt file, or about a JSON file as a whole."""
    if fmt == "jsonl" and error.line == 1:
        return JSONL_FORMS
    if fmt in ("sharegpt", "agentic-json") and error.line == 1 and error.field is None:
        return JSON_FORMS
    return ""


def parse_upload(
    filename: str,
    content: bytes,
    *,
    tokenizer: Tokenizer | None = None,
    max_bytes: int = MAX_UPLOAD_BYTES,
) -> ParsedDataset:
    """Validate an uploaded file and count its prompts' tokens; raises :class:`DatasetUploadError`."""
    name = PurePath(filename).name or "upload"
    if len(content) > max_bytes:
        raise DatasetUploadError(
            f"{name}: the file is {format_bytes(len(content))}; "
            f"datasets are limited to {format_bytes(max_bytes)}"
        )
    fmt = dataset_format(name, content)
    with tempfile.TemporaryDirectory(prefix="perflab-upload-") as folder:
        path = Path(folder) / f"upload{SUFFIX_BY_FORMAT[fmt]}"
        path.write_bytes(content)
        try:
            if fmt in SESSION_FORMATS:
                return _parsed_sessions(name, fmt, _sessions(path, tokenizer), tokenizer)
            rows = _rows(path, fmt)
        except DatasetError as error:
            raise DatasetUploadError(name + str(error)[len(error.path) :] + _forms_hint(fmt, error)) from None
    if not rows:
        raise DatasetUploadError(f"{name}: the file holds no prompts")
    prompts = [prompt for prompt, _ in rows]
    lengths, source = token_lengths(prompts, tokenizer)
    return ParsedDataset(
        name=name,
        format=fmt,
        prompts=prompts,
        output_lens=[output_len for _, output_len in rows],
        token_lengths=lengths,
        lengths_source=source,
    )


def store_dataset(
    session: Session,
    parsed: ParsedDataset,
    content: bytes,
    *,
    name: str,
    owner_note: str | None = None,
    created_by: str | None = None,
) -> tuple[Dataset, bool]:
    """Store a validated upload once; returns the dataset and whether it is new (False: same content
    was stored before, possibly under another name).

    The name is kept as given (``my-prompts``); where the content becomes a file, the file is named
    with its format's suffix (:func:`dataset_file_name`), as the bench picks its reader by suffix.
    """
    digest = crud.content_hash(content)
    known = any(dataset.content_hash == digest for dataset in crud.list_datasets(session))
    stored_name = name.strip() or parsed.name
    dataset = crud.create_dataset(
        session,
        name=stored_name,
        content=content,
        format=parsed.format,
        owner_note=(owner_note or "").strip() or None,
        created_by=created_by,
        num_prompts=parsed.num_prompts,
        prompt_token_lengths=parsed.token_lengths,
    )
    return dataset, not known


def dataset_file_name(name: str, fmt: str) -> str:
    """A stored dataset's name as a file: ``my-prompts.jsonl`` (its format's suffix added when missing)."""
    suffix = SUFFIX_BY_FORMAT.get(fmt, "")
    return name if name.lower().endswith(suffix) else name + suffix


def profile_dataset(dataset: Dataset) -> dict[str, str]:
    """The ``dataset``/``dataset_ref`` fields of a benchmark profile that sends this dataset."""
    if dataset.format in SESSION_FORMATS:
        kind = "agentic-trace"
    else:
        kind = "sharegpt" if dataset.format == "sharegpt" else "custom"
    return {"dataset": kind, "dataset_ref": dataset.content_hash}
