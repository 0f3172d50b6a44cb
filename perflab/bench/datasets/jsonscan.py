"""Read JSON with the line of each value: a top-level array element by element, or JSON lines.

``json.load`` loses positions; decoding the top-level array one element at a time with
``JSONDecoder.raw_decode`` lets errors about an element name its line. ``iter_json_lines`` decodes one
value per non-blank line.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, Iterator, Tuple

from perflab.bench.errors import DatasetError
from perflab.bench.user_files import UserFileError, read_capped

_WHITESPACE = re.compile(r"[ \t\n\r]*")
# The largest dataset file read (ShareGPT_V3_unfiltered_cleaned_split.json is about 640 MiB).
MAX_DATASET_BYTES = 1024**3


def read_text(path: str) -> str:
    """The regular file's text as UTF-8 (at most :data:`MAX_DATASET_BYTES`, see
    :mod:`perflab.bench.user_files`), or a ``DatasetError`` naming the line of the first bad byte."""
    try:
        raw = read_capped(path, MAX_DATASET_BYTES)
    except UserFileError as exc:
        raise DatasetError(path, str(exc)) from None
    except OSError as exc:
        raise DatasetError(path, f"cannot read file: {exc.strerror or exc}") from exc
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise DatasetError(path, "not valid UTF-8 text", line=line) from exc


def json_value(path: str, text: str, line: int = 1) -> Any:
    """The JSON value ``text`` holds (starting on ``line``), else a ``DatasetError`` naming the line."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise DatasetError(path, f"invalid JSON: {exc}", line=line) from None
    except RecursionError:
        raise DatasetError(path, "invalid JSON: nested too deeply", line=line) from None


def iter_json_lines(path: str, text: str) -> Iterator[Tuple[int, Any]]:
    """Yield ``(line, value)`` for each non-blank line of ``text``."""
    for line, raw in enumerate(text.splitlines(), start=1):
        if raw.strip():
            yield line, json_value(path, raw, line)


def json_object(path: str, line: int, value: Any) -> Dict[str, Any]:
    """``value`` when it is a JSON object, else a ``DatasetError`` naming the line."""
    if not isinstance(value, dict):
        raise DatasetError(path, f"each line must be a JSON object, not {type(value).__name__}", line=line)
    return value


def iter_array(path: str, text: str) -> Iterator[Tuple[int, Any]]:
    """Yield ``(line, element)`` for each element of the top-level JSON array in ``text``."""
    decoder = json.JSONDecoder()
    line = 1
    counted_to = 0

    def line_at(position: int) -> int:
        nonlocal line, counted_to
        line += text.count("\n", counted_to, position)
        counted_to = position
        return line

    position = _WHITESPACE.match(text, 0).end()  # type: ignore[union-attr]
    if not text.startswith("[", position):
        raise DatasetError(path, "expected a JSON array of conversations", line=line_at(position))
    position = _WHITESPACE.match(text, position + 1).end()  # type: ignore[union-attr]
    if text.startswith("]", position):
        return
    while True:
        start_line = line_at(position)
        try:
            element, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            raise DatasetError(path, f"invalid JSON: {exc.msg}", line=exc.lineno) from exc
        except RecursionError:
            raise DatasetError(path, "invalid JSON: nested too deeply", line=start_line) from None
        yield start_line, element
        position = _WHITESPACE.match(text, position).end()  # type: ignore[union-attr]
        if text.startswith(",", position):
            position = _WHITESPACE.match(text, position + 1).end()  # type: ignore[union-attr]
        elif text.startswith("]", position):
            return
        else:
            raise DatasetError(
                path, "invalid JSON: expected ',' or ']' after an element", line=line_at(position)
            )
