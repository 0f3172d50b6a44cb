"""What every parser produces, and the error it raises.

A parser turns one file's text into :class:`ImportedResult` objects, one per benchmark result (or
per recorded launch failure), in file order; their ``result`` dicts use the field names of
``vllm bench serve --save-result`` and hold only the fields the source actually reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class ImportFileError(ValueError):
    """A file that cannot be imported; the message names the file and, when known, the line."""

    def __init__(self, name: str, message: str, *, line: int | None = None) -> None:
        self.name = name
        self.line = line
        self.detail = message
        where = f"{name}:{line}" if line is not None else name
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class ImportedResult:
    """One benchmark result (or one failed launch) found in an imported file.

    ``result`` may carry a ``requests`` list of per-request records. ``serve_command`` is the serving
    command (or bare engine arguments) that applies to this result, ``engine`` the engine it names
    when known without the command, and ``failure_message`` is set instead of figures for a launch
    that failed.
    """

    line: int
    source_format: str
    result: dict[str, Any] = field(default_factory=dict)
    profile: dict[str, Any] = field(default_factory=dict)
    text_block: str | None = None
    label: str | None = None
    serve_command: str | None = None
    serve_args_only: bool = False
    engine: str | None = None
    bench_command: str | None = None
    failure_message: str | None = None
