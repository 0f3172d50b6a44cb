"""A small YAML subset reader for TensorRT-LLM's ``--extra_llm_api_options`` files.

The agent zipapp carries no YAML library, and these files only use block mappings, block lists of
scalars, flow lists/maps of scalars, comments and plain, quoted, numeric, boolean and null scalars.
Anything else raises ``ValueError`` naming the line.
"""

from __future__ import annotations

import json
import re
from typing import Any, List, Tuple

_INT_RE = re.compile(r"^[-+]?\d+$")
_FLOAT_RE = re.compile(r"^[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$")


def scalar(text: str) -> Any:
    text = text.strip()
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if text[0] in "'\"":
        if len(text) < 2 or text[-1] != text[0]:
            raise ValueError(f"unterminated string {text}")
        return json.loads(text) if text[0] == '"' else text[1:-1].replace("''", "'")
    if text[0] in "[{":
        return _flow(text)
    if _INT_RE.match(text):
        return int(text)
    if _FLOAT_RE.match(text):
        return float(text)
    return text


def _split_flow(body: str) -> List[str]:
    parts, depth, current, quote = [], 0, "", ""
    for char in body:
        if quote:
            current += char
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
            current += char
        elif char in "[{":
            depth += 1
            current += char
        elif char in "]}":
            depth -= 1
            current += char
        elif char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return parts


def _flow(text: str) -> Any:
    closing = {"[": "]", "{": "}"}[text[0]]
    if text[-1] != closing:
        raise ValueError(f"unterminated flow collection {text}")
    items = _split_flow(text[1:-1])
    if text[0] == "[":
        return [scalar(item) for item in items]
    mapping = {}
    for item in items:
        key, sep, value = item.partition(":")
        if not sep:
            raise ValueError(f"expected key: value in {text}")
        mapping[key.strip().strip("'\"")] = scalar(value)
    return mapping


def _strip_comment(line: str) -> str:
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1] in " \t"):
            return line[:index].rstrip()
    return line.rstrip()


def loads(text: str) -> Any:
    """Parse the supported YAML subset; an empty document is ``{}``."""
    lines: List[Tuple[int, int, str]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise ValueError(f"line {number}: tabs are not allowed for indentation")
        line = _strip_comment(raw)
        if line.strip() and line.strip() != "---":
            lines.append((number, len(line) - len(line.lstrip()), line.strip()))
    if not lines:
        return {}
    value, position = _block(lines, 0, lines[0][1])
    if position != len(lines):
        raise ValueError(f"line {lines[position][0]}: unexpected indentation")
    return value


def _block(lines: List[Tuple[int, int, str]], position: int, indent: int) -> Tuple[Any, int]:
    number, _, content = lines[position]
    if content.startswith("- ") or content == "-":
        items = []
        while position < len(lines) and lines[position][1] == indent and lines[position][2].startswith("-"):
            number, _, content = lines[position]
            item = content[1:].strip()
            position += 1
            if not item:
                if position >= len(lines) or lines[position][1] <= indent:
                    raise ValueError(f"line {number}: empty list item")
                child, position = _block(lines, position, lines[position][1])
                items.append(child)
            else:
                items.append(scalar(item))
        return items, position
    mapping = {}
    while position < len(lines) and lines[position][1] == indent:
        number, _, content = lines[position]
        key, sep, rest = content.partition(":")
        if not sep or (rest and not rest.startswith(" ")):
            raise ValueError(f"line {number}: expected 'key: value'")
        key = key.strip().strip("'\"")
        position += 1
        if rest.strip():
            mapping[key] = scalar(rest)
        elif position < len(lines) and lines[position][1] > indent:
            mapping[key], position = _block(lines, position, lines[position][1])
        elif position < len(lines) and lines[position][1] == indent and lines[position][2].startswith("-"):
            mapping[key], position = _block(lines, position, indent)  # PyYAML's "key:\n- item" style
        else:
            mapping[key] = None
    return mapping, position
