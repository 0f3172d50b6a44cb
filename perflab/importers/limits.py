"""What an imported file may hold before anything of it is stored: its size, how deep its JSON nests,
how many results it has, and values the database can store (whole numbers that fit 64 bits, text
without NUL characters or lone surrogates, numbers where a number is stored, per-request records
shaped like perflab's own).

Every limit is checked during parsing and raises :class:`ImportFileError` naming the file (and the
line of the result when known), so a hostile or broken file is one line of error and stores nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from db.models import HEADLINE_COLUMNS
from perflab.importers.model import ImportedResult, ImportFileError

MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_RESULTS = 1000
MAX_DEPTH = 16
MAX_TEXT_CHARS = 1024 * 1024
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
REQUEST_NUMBERS: tuple[str, ...] = ("start_s", "ttft_ms", "e2el_ms")
REQUEST_COUNTS: tuple[str, ...] = ("index", "input_tokens", "output_tokens")
REQUEST_TEXTS: tuple[str, ...] = ("output_tokens_source", "error", "base_url")
_SHOWN_CHARS = 40


def check_size(name: str, size: int) -> None:
    """Refuse a file larger than :data:`MAX_FILE_BYTES` (before it is read, where the size is known)."""
    if size > MAX_FILE_BYTES:
        raise ImportFileError(
            name,
            f"{size} bytes is larger than perflab imports ({MAX_FILE_BYTES // (1024 * 1024)} MiB at most)",
        )


def load_json(name: str, text: str, *, line: int | None = None) -> Any:
    """``json.loads`` that words nesting too deep and numbers too long to read as import errors
    (:class:`json.JSONDecodeError` is left to the caller, who knows the line)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ImportFileError(name, "the JSON nests too deeply to read", line=line) from None
    except json.JSONDecodeError:
        raise
    except ValueError as error:  # e.g. an integer of more than sys.get_int_max_str_digits() digits
        raise ImportFileError(
            name, f"the JSON holds a value perflab cannot read: {error}", line=line
        ) from None


def storable(name: str, results: list[ImportedResult]) -> list[ImportedResult]:
    """``results`` as they can be stored (an infinite or undefined number outside the headline
    figures and per-request records written ``"Infinity"``/``"-Infinity"``/``"NaN"``, as perflab
    stores an infinite request rate, since PostgreSQL's JSON has no such numbers);
    :class:`ImportFileError` for the first result that cannot be stored."""
    if len(results) > MAX_RESULTS:
        raise ImportFileError(name, f"{len(results)} results; perflab imports at most {MAX_RESULTS} per file")
    for item in results:
        problem = _result_problem(item)
        if problem is not None:
            raise ImportFileError(name, problem, line=item.line)
    return [
        replace(item, result=_stored_result(item.result), profile=_json_numbers(item.profile))
        for item in results
    ]


def _stored_result(result: dict[str, Any]) -> dict[str, Any]:
    """The result with JSON-safe numbers; its per-request records go to typed columns as they are."""
    stored = {key: _json_numbers(value) for key, value in result.items() if key != "requests"}
    if "requests" in result:
        stored["requests"] = result["requests"]
    return stored


def shown(value: Any) -> str:
    """``repr(value)``, cut short for a message."""
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else f"{text[:_SHOWN_CHARS]}… ({len(text)} characters)"


def _result_problem(item: ImportedResult) -> str | None:
    for field in HEADLINE_COLUMNS:
        value = item.result.get(field)
        if value is not None and not (_is_number(value) and math.isfinite(value)):
            return f"field {field} is {shown(value)}, expected a finite number"
    requests = item.result.get("requests")
    if requests is not None:
        problem = _requests_problem(requests)
        if problem is not None:
            return problem
    texts = {"serve command": item.serve_command, "bench command": item.bench_command}
    texts |= {"label": item.label, "failure message": item.failure_message, "text block": item.text_block}
    for what, text in texts.items():
        if text is not None:
            problem = _value_problem(what, text, depth=1)
            if problem is not None:
                return problem
    return _value_problem("field", item.result, depth=0) or _value_problem(
        "profile field", item.profile, depth=0
    )


def _requests_problem(requests: Any) -> str | None:
    if not isinstance(requests, list):
        return f"field requests is {shown(requests)}, expected a list of request records"
    for position, request in enumerate(requests):
        where = f"requests[{position}]"
        if not isinstance(request, Mapping):
            return f"{where} is {shown(request)}, expected a request record (an object)"
        for field in REQUEST_NUMBERS:
            value = request.get(field)
            if value is not None and not _is_number(value):
                return f"{where}.{field} is {shown(value)}, expected a number"
        for field in REQUEST_COUNTS:
            value = request.get(field)
            if value is not None and not _whole(value):
                return f"{where}.{field} is {shown(value)}, expected a whole number of at most 64 bits"
        for field in REQUEST_TEXTS:
            value = request.get(field)
            if value is not None and not isinstance(value, str):
                return f"{where}.{field} is {shown(value)}, expected text"
        gaps = request.get("itl_ms")
        finite = isinstance(gaps, list) and all(_is_number(gap) and math.isfinite(gap) for gap in gaps)
        if gaps is not None and not finite:
            return f"{where}.itl_ms is {shown(gaps)}, expected a list of finite numbers"
    return None


def _value_problem(where: str, value: Any, depth: int) -> str | None:
    """Why ``value`` (with everything inside it) cannot be stored, or None. The walk is explicit, so
    no nesting reaches Python's recursion limit."""
    pending: list[tuple[str, Any, int]] = [(where, value, depth)]
    while pending:
        path, current, level = pending.pop()
        if level > MAX_DEPTH:
            return f"{path[:_SHOWN_CHARS]}… nests more than {MAX_DEPTH} levels deep"
        if isinstance(current, bool) or current is None or isinstance(current, float):
            continue
        if isinstance(current, int):
            if not INT64_MIN <= current <= INT64_MAX:
                return f"{path} is {shown(current)}, out of range for a stored whole number (64 bits)"
        elif isinstance(current, str):
            problem = _text_problem(current)
            if problem is not None:
                return f"{path} {problem}"
        elif isinstance(current, Mapping):
            for key, inner in current.items():
                problem = _text_problem(str(key))
                if problem is not None:
                    return f"a key of {path} {problem}"
                pending.append((f"{path}.{key}" if level else f"{path} {key}", inner, level + 1))
        elif isinstance(current, (list, tuple)):
            pending.extend((f"{path}[{index}]", inner, level + 1) for index, inner in enumerate(current))
        else:
            return f"{path} is a {type(current).__name__}, which perflab does not store"
    return None


def _text_problem(text: str) -> str | None:
    if len(text) > MAX_TEXT_CHARS:
        return f"is {len(text)} characters long (at most {MAX_TEXT_CHARS})"
    if "\0" in text:
        return "holds a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "holds a lone surrogate (\\ud800-\\udfff), which is not text"
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _whole(value: Any) -> bool:
    """A whole number that fits a 64-bit column (``3`` or ``3.0``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, float) and not value.is_integer():
        return False
    return INT64_MIN <= value <= INT64_MAX


def _json_numbers(value: Any) -> Any:
    """``value`` with every infinite or undefined float written as JSON text can hold it (the depth
    is bounded by :func:`_value_problem`, checked first)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Mapping):
        return {key: _json_numbers(inner) for key, inner in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_numbers(inner) for inner in value]
    return value
