"""Recognise an imported file's format from its content (never its name) and parse it."""

from __future__ import annotations

import json
import logging
from typing import Any

from perflab.importers import limits
from perflab.importers.guidellm import parse_guidellm
from perflab.importers.model import ImportedResult, ImportFileError
from perflab.importers.vllm_json import parse_vllm_records
from perflab.importers.vllm_text import HEADER, parse_text

LOGGER = logging.getLogger(__name__)
EXPECTED = (
    "expected vllm bench serve JSON (--save-result), a printed 'Serving Benchmark Result' block, "
    "or a guidellm JSON report"
)


def decode(name: str, content: bytes | str) -> str:
    """The file's text (UTF-8, BOM and CR line ends removed); a clear error for binary content."""
    if isinstance(content, bytes):
        if b"\0" in content:
            raise ImportFileError(name, f"binary content; {EXPECTED}")
        try:
            content = content.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            line = content[: error.start].count(b"\n") + 1
            raise ImportFileError(name, f"not UTF-8 text (byte {error.start})", line=line) from None
    return content.lstrip("\ufeff").replace("\r\n", "\n")


def _json_lines(name: str, text: str) -> list[tuple[int, Any]]:
    records = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            records.append((number, limits.load_json(name, line, line=number)))
        except json.JSONDecodeError as error:
            raise ImportFileError(
                name, f"invalid JSON: {error.msg} (column {error.colno})", line=number
            ) from None
    return records


def _parse_json(name: str, text: str) -> list[ImportedResult]:
    try:
        data = limits.load_json(name, text, line=1)
    except json.JSONDecodeError as error:
        if error.msg != "Extra data":
            raise ImportFileError(
                name, f"invalid JSON: {error.msg} (column {error.colno})", line=error.lineno
            ) from None
        return parse_vllm_records(name, _json_lines(name, text), numbered=False)
    if isinstance(data, dict) and "benchmarks" in data:
        return parse_guidellm(name, data)
    if isinstance(data, list):
        return parse_vllm_records(name, [(1, item) for item in data], numbered=True)
    return parse_vllm_records(name, [(1, data)], numbered=False)


def parse_content(name: str, content: bytes | str) -> list[ImportedResult]:
    """Every result in one file's content, in file order, each one storable (:mod:`.limits`);
    raises :class:`ImportFileError`."""
    limits.check_size(name, len(content))
    text = decode(name, content)
    stripped = text.strip()
    if not stripped:
        raise ImportFileError(name, f"the file is empty; {EXPECTED}")
    try:
        if stripped[0] in "{[":
            results = _parse_json(name, text)
        elif HEADER.search(text):
            results = parse_text(name, text)
        else:
            raise ImportFileError(name, f"no benchmark results found; {EXPECTED}")
    except (TypeError, ValueError, OverflowError, AttributeError, KeyError, IndexError) as error:
        if isinstance(error, ImportFileError):
            raise
        # A shape no parser check foresaw: one line for the person importing, the details in the log
        # (at debug level: a command's stderr keeps the one line).
        LOGGER.debug("importing %s failed", name, exc_info=True)
        raise ImportFileError(
            name, f"unexpected content ({type(error).__name__}: {error}); {EXPECTED}"
        ) from None
    return limits.storable(name, results)
