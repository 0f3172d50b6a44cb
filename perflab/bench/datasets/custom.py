"""The ``custom`` dataset: your own prompts from JSONL, CSV or plain text.

- ``.jsonl``: one JSON object per line with a non-empty string ``prompt`` and an optional positive
  integer ``output_len`` (or ``output_tokens``, as ``vllm bench serve``'s custom dataset names it);
- ``.csv``: a header with a ``prompt`` column (and optionally ``output_len``);
- ``.txt``: one prompt per non-blank line.

Prompts are used in file order; ``--output-len`` (default 128) applies where a row gives none.
"""

from __future__ import annotations

import csv
import io
from typing import Any, List, Optional, Tuple

from perflab.bench.datasets.base import (
    DEFAULT_OUTPUT_LEN,
    Dataset,
    DatasetSpec,
    Sample,
    cycle_to,
    lengths_source,
    prompt_length,
)
from perflab.bench.datasets.jsonscan import iter_json_lines, json_object, read_text
from perflab.bench.errors import DatasetError
from perflab.bench.tokenizer import Tokenizer

Row = Tuple[str, Optional[int]]


def _prompt(path: str, line: int, value: Any) -> str:
    if value is None:
        raise DatasetError(path, "missing", line=line, field="prompt")
    if not isinstance(value, str) or not value.strip():
        raise DatasetError(path, "must be a non-empty string", line=line, field="prompt")
    return value


def _output_len(path: str, line: int, value: Any, field: str = "output_len") -> Optional[int]:
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DatasetError(path, f"must be a positive integer, not {value!r}", line=line, field=field)
    return value


def read_jsonl(path: str, text: str) -> List[Row]:
    rows: List[Row] = []
    for line, value in iter_json_lines(path, text):
        entry = json_object(path, line, value)
        field = "output_len" if "output_len" in entry else "output_tokens"
        rows.append(
            (_prompt(path, line, entry.get("prompt")), _output_len(path, line, entry.get(field), field))
        )
    return rows


def read_csv(path: str, text: str) -> List[Row]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    if not reader.fieldnames or "prompt" not in reader.fieldnames:
        raise DatasetError(path, "the header has no 'prompt' column", line=1, field="prompt")
    rows: List[Row] = []
    try:
        for entry in reader:
            line = reader.line_num
            rows.append(
                (_prompt(path, line, entry.get("prompt")), _output_len(path, line, entry.get("output_len")))
            )
    except csv.Error as exc:
        raise DatasetError(path, f"invalid CSV: {exc}", line=reader.line_num) from exc
    return rows


def read_lines(path: str, text: str) -> List[Row]:
    return [(line, None) for line in text.splitlines() if line.strip()]


READERS = {".jsonl": read_jsonl, ".csv": read_csv, ".txt": read_lines}


def custom_dataset(spec: DatasetSpec, tokenizer: Optional[Tokenizer]) -> Dataset:
    path = spec.path or ""
    extension = path[path.rfind(".") :].lower() if "." in path else ""
    reader = READERS.get(extension)
    if reader is None:
        raise DatasetError(path, "custom datasets must be .jsonl, .csv or .txt files")
    rows = reader(path, read_text(path))
    if not rows:
        raise DatasetError(path, "the file holds no prompts")
    rows = rows[: spec.count]
    default_output = spec.output_len if spec.output_len is not None else DEFAULT_OUTPUT_LEN
    samples = [
        Sample(prompt, prompt_length(tokenizer, prompt), output_len or default_output)
        for prompt, output_len in rows
    ]
    notes: List[str] = []
    return Dataset(cycle_to(samples, spec.count, path, notes), lengths_source(tokenizer, "unverified"), notes)
