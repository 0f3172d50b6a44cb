"""Errors the bench reports as one clear line (exit status 2) instead of a traceback."""

from __future__ import annotations

from typing import Optional


class BenchError(Exception):
    """Bad arguments, an unreadable dataset or tokenizer: the benchmark cannot start."""


class DatasetError(BenchError):
    """A dataset file is malformed; the message names the file, the line and the field."""

    def __init__(
        self, path: str, message: str, line: Optional[int] = None, field: Optional[str] = None
    ) -> None:
        self.path = path
        self.line = line
        self.field = field
        where = f"{path}:{line}" if line is not None else path
        what = f"field '{field}': " if field else ""
        super().__init__(f"{where}: {what}{message}")
