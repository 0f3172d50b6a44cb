"""Recognise an imported file's format from its content (never its name) and parse it."""

from __future__ import annotations

import json
from typing import Any

from perflab.importers.guidellm import parse_guidellm
from perflab.importers.model import ImportedResult, ImportFileError
from perflab.importers.vllm_json import parse_vllm_records
from perflab.importers.vllm_text import HEADER, parse_text

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
            records.append((number, json.loads(line)))
        except json.JSONDecodeError as error:
            raise ImportFileError(
                name, f"invalid JSON: {error.msg} (column {error.colno})", line=number
            ) from None
    return records


def _parse_json(name: str, text: str) -> list[ImportedResult]:
    try:
        data = json.loads(text)
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
    """Every result in one file's content, in file order; raises :class:`ImportFileError`."""
    text = decode(name, content)
    stripped = text.strip()
    if not stripped:
        raise ImportFileError(name, f"the file is empty; {EXPECTED}")
    if stripped[0] in "{[":
        return _parse_json(name, text)
    if HEADER.search(text):
        return parse_text(name, text)
    raise ImportFileError(name, f"no benchmark results found; {EXPECTED}")
