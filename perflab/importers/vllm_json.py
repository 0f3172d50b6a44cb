"""``vllm bench serve --save-result`` JSON (and perflab's own ``bench --save-result``).

A file holds one result object, a list of them, or one per line (JSON lines). Field names are
kept as they are. vLLM's per-request arrays (``ttfts`` and ``itls`` in seconds, ``input_lens``,
``output_lens``, ``errors``, and vLLM 0.33's ``server_queue_times`` and ``server_ttfts`` in seconds,
null for a request the server gave no timings) become the ``requests`` list of per-request records,
in milliseconds (``server_queue_ms``, ``server_ttft_ms``); ``start_times`` (the client's clock at each
send) become ``start_s``, seconds from the earliest send.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from typing import Any

from db.crud.results import PER_REQUEST_ARRAYS
from perflab.importers.limits import shown
from perflab.importers.model import ImportedResult, ImportFileError

REQUIRED_FIELDS: tuple[str, ...] = ("completed", "duration")
NUMBER_FIELDS: tuple[str, ...] = (
    "completed",
    "failed",
    "duration",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
)
PROFILE_FIELDS: tuple[str, ...] = ("num_prompts", "request_rate", "burstiness", "max_concurrency")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check(name: str, where: str, line: int, record: Any) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise ImportFileError(
            name, f"{where}is a JSON {type(record).__name__}, expected a result object", line=line
        )
    missing = [field for field in REQUIRED_FIELDS if field not in record]
    if missing:
        raise ImportFileError(
            name,
            f"{where}is not a vllm bench serve result: no {', '.join(missing)} field",
            line=line,
        )
    for field in NUMBER_FIELDS:
        if field in record and record[field] is not None and not _is_number(record[field]):
            raise ImportFileError(
                name, f"{where}field {field} is {shown(record[field])}, expected a number", line=line
            )
    for field in PER_REQUEST_ARRAYS:
        if record.get(field) is not None and not isinstance(record[field], list):
            raise ImportFileError(
                name, f"{where}field {field} is {shown(record[field])}, expected a list", line=line
            )
    return record


def _seconds_to_ms(value: Any) -> float | None:
    return float(value) * 1000 if _is_number(value) else None


def requests_from_arrays(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-request records from vLLM's detailed arrays (empty when the result has none)."""
    ttfts = record.get("ttfts") or []
    itls = record.get("itls") or []
    input_lens = record.get("input_lens") or []
    output_lens = record.get("output_lens") or []
    errors = record.get("errors") or []
    queue_times = record.get("server_queue_times") or []
    server_ttfts = record.get("server_ttfts") or []
    starts = [value if _is_number(value) else None for value in record.get("start_times") or []]
    first_start = min((value for value in starts if value is not None), default=0.0)
    arrays = (ttfts, itls, input_lens, output_lens, errors, queue_times, server_ttfts, starts)
    count = max(len(array) for array in arrays)
    requests = []
    for index in range(count):
        error = errors[index] if index < len(errors) and errors[index] else None
        gaps = itls[index] if index < len(itls) and isinstance(itls[index], list) else []
        requests.append(
            {
                "index": index,
                "start_s": starts[index] - first_start
                if index < len(starts) and starts[index] is not None
                else None,
                "ttft_ms": _seconds_to_ms(ttfts[index]) if index < len(ttfts) else None,
                "itl_ms": [gap * 1000 for gap in gaps if _is_number(gap)],
                "input_tokens": input_lens[index] if index < len(input_lens) else None,
                "output_tokens": output_lens[index] if index < len(output_lens) else None,
                "server_queue_ms": _seconds_to_ms(queue_times[index]) if index < len(queue_times) else None,
                "server_ttft_ms": _seconds_to_ms(server_ttfts[index]) if index < len(server_ttfts) else None,
                "error": error,
                "success": error is None,
            }
        )
    return requests


def _imported(line: int, record: dict[str, Any]) -> ImportedResult:
    result = {key: value for key, value in record.items() if key not in PER_REQUEST_ARRAYS}
    if "requests" not in result:
        requests = requests_from_arrays(record)
        if requests:
            result["requests"] = requests
    label = record.get("label") if isinstance(record.get("label"), str) else None
    profile: dict[str, Any] = {"name": label or "imported"}
    profile.update({field: record[field] for field in PROFILE_FIELDS if record.get(field) is not None})
    bench_args = record.get("bench_args")
    bench_command = shlex.join(str(arg) for arg in bench_args) if isinstance(bench_args, list) else None
    return ImportedResult(
        line=line,
        source_format="vllm-json",
        result=result,
        profile=profile,
        label=label,
        bench_command=bench_command,
    )


def parse_vllm_records(
    name: str, records: Iterable[tuple[int, Any]], *, numbered: bool
) -> list[ImportedResult]:
    """Results from (line, decoded JSON) pairs; ``numbered`` names list items in errors."""
    items = []
    for position, (line, record) in enumerate(records, start=1):
        where = f"item {position} " if numbered else ""
        items.append(_imported(line, _check(name, where, line, record)))
    if not items:
        raise ImportFileError(name, "the JSON holds no results")
    return items
