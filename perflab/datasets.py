"""Uploaded prompt sets for the Datasets page: validation, token-length statistics and storage.

An upload is read with the benchmark's own dataset readers (:mod:`perflab.bench.datasets`), so a file
accepted here is one the bench can send: JSON lines with a ``prompt`` field, CSV with a ``prompt``
column, plain text (one prompt per line), or a ShareGPT JSON array (the first human turn of each
conversation with at least two turns). Problems raise :class:`DatasetUploadError` naming the file,
line and field, like ``prompts.jsonl:3: field 'prompt': missing``.

Prompt lengths are counted with a tokenizer when one is given (a ``tokenizer.json`` or model
directory on the app machine), else estimated at four characters per token, and stored with the
dataset (deduplicated by the sha256 of its content). A stored dataset is used by a benchmark profile
through :func:`profile_dataset`: ``custom`` (or ``sharegpt``) with the content hash as reference.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePath

from sqlmodel import Session

from db import crud
from db.models import Dataset
from perflab.bench.datasets.custom import read_csv, read_jsonl, read_lines
from perflab.bench.datasets.jsonscan import read_text
from perflab.bench.datasets.sharegpt import CHARS_PER_TOKEN, read_pairs
from perflab.bench.errors import BenchError, DatasetError
from perflab.bench.tokenizer import Tokenizer, load_local_tokenizer
from perflab.views.formatting import format_bytes

MAX_UPLOAD_BYTES = 32 * 1024 * 1024
# File suffix → stored dataset format.
FORMATS_BY_SUFFIX: dict[str, str] = {".jsonl": "jsonl", ".csv": "csv", ".txt": "text", ".json": "sharegpt"}
SUFFIX_BY_FORMAT: dict[str, str] = {fmt: suffix for suffix, fmt in FORMATS_BY_SUFFIX.items()}
_ROW_READERS = {"jsonl": read_jsonl, "csv": read_csv, "text": read_lines}


class DatasetUploadError(ValueError):
    """An upload that cannot be used; the message names the file (and line and field when known)."""


@dataclass(frozen=True)
class ParsedDataset:
    """The prompts of a valid upload and their lengths in tokens."""

    name: str
    format: str
    prompts: list[str]
    output_lens: list[int | None]
    token_lengths: list[int]
    lengths_source: str

    @property
    def num_prompts(self) -> int:
        return len(self.prompts)


def dataset_format(filename: str) -> str:
    """The format of an upload from its file name; raises for a suffix no reader handles."""
    suffix = PurePath(filename).suffix.lower()
    if suffix not in FORMATS_BY_SUFFIX:
        raise DatasetUploadError(
            f"{filename}: unsupported file type {suffix or '(none)'}; "
            "upload .jsonl, .csv, .json (ShareGPT) or .txt"
        )
    return FORMATS_BY_SUFFIX[suffix]


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


def parse_upload(
    filename: str,
    content: bytes,
    *,
    tokenizer: Tokenizer | None = None,
    max_bytes: int = MAX_UPLOAD_BYTES,
) -> ParsedDataset:
    """Validate an uploaded file and count its prompts' tokens; raises :class:`DatasetUploadError`."""
    name = PurePath(filename).name or "upload"
    fmt = dataset_format(name)
    if len(content) > max_bytes:
        raise DatasetUploadError(
            f"{name}: the file is {format_bytes(len(content))}; "
            f"datasets are limited to {format_bytes(max_bytes)}"
        )
    with tempfile.TemporaryDirectory(prefix="perflab-upload-") as folder:
        path = Path(folder) / f"upload{SUFFIX_BY_FORMAT[fmt]}"
        path.write_bytes(content)
        try:
            rows = _rows(path, fmt)
        except DatasetError as error:
            raise DatasetUploadError(name + str(error)[len(error.path) :]) from None
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
    kind = "sharegpt" if dataset.format == "sharegpt" else "custom"
    return {"dataset": kind, "dataset_ref": dataset.content_hash}
