"""Printed ``vllm bench serve`` results: the "Serving Benchmark Result" text block.

Reads every block of a file (a terminal capture, a log, or a seed-style markdown write-up), with
every label variant the seeds and vLLM versions print: "Failed requests", "Maximum request
concurrency", "Request rate configured (RPS)", goodput, peak throughput and concurrency, "Total Token
throughput" (older) and "Total token throughput" (vLLM 0.32.0), Mean/Median/Std/Pnn lines for TTFT,
TPOT, ITL and E2EL in ms, vLLM 0.32.0's client-side queueing sections, speculative-decoding lines and
RTFx, and a "Latency" section in seconds (taken as E2EL). Unknown lines are left out of the result
but kept in the stored block text.

Around each block it finds the serving command that applies (the last one printed above it, see
:mod:`perflab.importers.commands`), a ``# comment`` line right above it naming the case, and a label
built from the nearest heading and admonition. A result fence holding only ``# SomeError: …``
lines records a launch that failed.
"""

from __future__ import annotations

import re
import textwrap
from decimal import Decimal, InvalidOperation

from perflab.importers.commands import FoundCommand, apply_case_flags, complete_commands, find_commands
from perflab.importers.markdown import Document, Fence, last_before
from perflab.importers.model import ImportedResult, ImportFileError

HEADER = re.compile(r"=+[ \t]*Serving Benchmark Result[ \t]*=+")
_FOOTER = re.compile(r"={10,}")
_PAIR = re.compile(
    r"([A-Za-z][A-Za-z0-9 ()/%.]*?)[ \t]*:[ \t]*(-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?|-?inf|nan)(?![\w.])",
    re.IGNORECASE,
)
_STAT = r"(mean|median|std|p\d+(?:\.\d+)?)"
_LATENCY_MS = re.compile(
    rf"^{_STAT} (ttft|tpot|itl|e2el|client queue time|e2el incl\. client queue) ?\(ms\)$"
)
# vLLM 0.32.0's latency section names → the metric part of their result fields.
LATENCY_NAMES = {
    "client queue time": "client_queue_time",
    "e2el incl. client queue": "e2el_including_client_queue",
}
_LATENCY_S = re.compile(rf"^{_STAT} latency ?\(s\)$")
_SECTION = re.compile(r"-{3,}[^=\n]*?-{3,}|={10,}")
_NUMBERING = re.compile(r"^\d+(?:\.\d+)*\.?\s+")
_SERVING_TITLE = re.compile(r"serving (?:script|command)s?", re.IGNORECASE)
_RESULT_TITLE = re.compile(r"benchmark results?", re.IGNORECASE)
MAX_LABEL = 200

# label (lower case, single spaces) → (result field, integer?)
SCALAR_FIELDS: dict[str, tuple[str, bool]] = {
    "successful requests": ("completed", True),
    "failed requests": ("failed", True),
    "maximum request concurrency": ("max_concurrency", True),
    "request rate configured (rps)": ("request_rate", False),
    "benchmark duration (s)": ("duration", False),
    "total input tokens": ("total_input_tokens", True),
    "total generated tokens": ("total_output_tokens", True),
    "request throughput (req/s)": ("request_throughput", False),
    "request goodput (req/s)": ("request_goodput", False),
    "output token throughput (tok/s)": ("output_throughput", False),
    "peak output token throughput (tok/s)": ("max_output_tokens_per_s", False),
    "peak concurrent requests": ("max_concurrent_requests", False),
    "total token throughput (tok/s)": ("total_token_throughput", False),
    "rtfx (inverse real-time factor)": ("rtfx", False),
    "acceptance rate (%)": ("spec_decode_acceptance_rate", False),
    "acceptance length": ("spec_decode_acceptance_length", False),
    "drafts": ("spec_decode_num_drafts", True),
    "draft tokens": ("spec_decode_draft_tokens", True),
    "accepted tokens": ("spec_decode_accepted_tokens", True),
}
REQUIRED_LABELS: tuple[str, ...] = ("Successful requests", "Benchmark duration (s)")


def _field_for(label: str) -> tuple[str, bool, int] | None:
    """(result field, integer?, scale) for a block label, or None for a label we do not map."""
    key = " ".join(label.lower().split())
    if key in SCALAR_FIELDS:
        name, integer = SCALAR_FIELDS[key]
        return name, integer, 1
    match = _LATENCY_MS.match(key)
    if match:
        metric = LATENCY_NAMES.get(match.group(2), match.group(2))
        return f"{match.group(1)}_{metric}_ms", False, 1
    match = _LATENCY_S.match(key)
    if match:
        return f"{match.group(1)}_e2el_ms", False, 1000
    return None


def _number(raw: str, *, integer: bool, scale: int) -> int | float | None:
    try:
        value = Decimal(raw.replace(",", "")) * scale
    except InvalidOperation:
        return None
    if integer:
        return int(value) if value == value.to_integral_value() else None
    return float(value)


def parse_block(body: str) -> tuple[dict[str, int | float], list[str]]:
    """The result fields of one block's text, and problems found (bad or repeated values)."""
    result: dict[str, int | float] = {}
    problems = []
    for match in _PAIR.finditer(body):
        label, raw = " ".join(match.group(1).split()), match.group(2)
        mapped = _field_for(label)
        if mapped is None:
            continue
        name, integer, scale = mapped
        value = _number(raw, integer=integer, scale=scale)
        if value is None:
            problems.append(
                f"'{label}' has the value {raw!r}, expected {'a whole number' if integer else 'a number'}"
            )
        elif name in result:
            problems.append(f"'{label}' appears twice")
        else:
            result[name] = value
    for label in REQUIRED_LABELS:
        if SCALAR_FIELDS[label.lower()][0] not in result:
            problems.append(f"no '{label}' line")
    return result, problems


def _case_comment(document: Document, offset: int) -> str | None:
    tail = document.line_before(offset)
    fence_mark = tail.rfind("```")
    if fence_mark >= 0:
        tail = tail[fence_mark + 3 :].strip()
    match = re.match(r"^#[ \t]+(.+)$", tail)
    return " ".join(match.group(1).split()) if match else None


def _variant(document: Document, start: int, offset: int) -> str:
    """What distinguishes the result within its section: "vLLM FP8", "Baseline", …"""
    admonitions = document.admonitions_between(start, offset)
    serving = [marker for marker in admonitions if _SERVING_TITLE.search(marker.text)]
    if serving:
        named = _SERVING_TITLE.sub("", serving[-1].text).strip()
        if named:
            return named
        before = document.line_before(serving[-1].offset)
        if 0 < len(before) <= 60 and not before.startswith(("#", "`", "|", "!", "?", "-", "*", "<", "[")):
            return before
        return ""
    return _RESULT_TITLE.sub("", admonitions[-1].text).strip() if admonitions else ""


def _label(document: Document, offset: int, case: str | None) -> str | None:
    heading = document.heading_before(offset)
    section = _NUMBERING.sub("", heading.text) if heading else ""
    parts: list[str] = []
    for part in (section, _variant(document, heading.offset if heading else 0, offset), case or ""):
        if part and part not in parts:
            parts.append(part)
    return " · ".join(parts)[:MAX_LABEL] or None


def _block_text(document: Document, start: int, end: int) -> str:
    line_start = document.text.rfind("\n", 0, start) + 1
    prefix = document.text[line_start:start]
    text = document.text[line_start:end] if not prefix.strip() else document.text[start:end]
    return _reflow(textwrap.dedent(text).strip())


def _reflow(block: str) -> str:
    """A block that lost its line breaks, one label per line again (others unchanged)."""
    header = HEADER.match(block)
    if "\n" in block or header is None:
        return block
    rest = block[header.end() :]
    sections = list(_SECTION.finditer(rest))
    cuts = sorted(
        {match.start() for match in _PAIR.finditer(rest)}
        | {match.start() for match in sections}
        | {match.end() for match in sections}
    )
    pieces = [rest[start:end].strip() for start, end in zip([0, *cuts], [*cuts, len(rest)], strict=True)]
    return "\n".join([header.group(0), *(piece for piece in pieces if piece)])


def _failure_message(document: Document, fence: Fence, previous_end: int) -> str | None:
    """The error a result fence records instead of a block (``# RuntimeError: …``), if it is one."""
    lines = [line.strip() for line in document.fence_content(fence).splitlines() if line.strip()]
    if not lines or not all(line.startswith("#") for line in lines):
        return None
    titles = document.admonitions_between(previous_end, fence.start)
    if not titles or not _RESULT_TITLE.search(titles[-1].text):
        return None
    return " ".join(line.lstrip("#").strip() for line in lines)


def _entry(
    document: Document,
    commands: list[FoundCommand],
    *,
    offset: int,
    case: str | None,
) -> dict[str, object]:
    command = last_before(commands, offset)
    serve_command = None
    if command is not None:
        is_flag_case = bool(case and case.startswith("-"))
        serve_command = apply_case_flags(command.text, case) if is_flag_case else command.text
    return {
        "line": document.line_of(offset),
        "source_format": "vllm-text",
        "label": _label(document, offset, case),
        "serve_command": serve_command,
        "serve_args_only": bool(command and command.args_only),
        "engine": command.engine if command else None,
    }


def parse_text(name: str, text: str) -> list[ImportedResult]:
    """Every result block (and recorded launch failure) of a text file, in file order."""
    document = Document(text)
    commands = complete_commands(document, find_commands(document))
    entries: list[tuple[int, ImportedResult]] = []
    for header in HEADER.finditer(text):
        next_header = HEADER.search(text, header.end())
        footer = _FOOTER.search(text, header.end())
        if footer is None or (next_header is not None and footer.start() >= next_header.start()):
            raise ImportFileError(
                name, "result block has no closing '=====' line", line=document.line_of(header.start())
            )
        result, problems = parse_block(text[header.end() : footer.start()])
        if problems:
            raise ImportFileError(name, "; ".join(problems), line=document.line_of(header.start()))
        case = _case_comment(document, header.start())
        profile: dict[str, object] = {"name": case if case and not case.startswith("-") else "imported"}
        if "max_concurrency" in result:
            profile["max_concurrency"] = result["max_concurrency"]
        entry = _entry(document, commands, offset=header.start(), case=case)
        block_text = _block_text(document, header.start(), footer.end())
        entries.append(
            (header.start(), ImportedResult(result=result, profile=profile, text_block=block_text, **entry))
        )
    previous_end = 0
    for fence in document.fences:
        if not HEADER.search(document.fence_content(fence)):
            message = _failure_message(document, fence, previous_end)
            if message is not None:
                entry = _entry(document, commands, offset=fence.start, case=None)
                entries.append((fence.start, ImportedResult(failure_message=message, **entry)))
        previous_end = fence.end
    return [item for _, item in sorted(entries, key=lambda pair: pair[0])]
