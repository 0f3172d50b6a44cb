"""Reading gauges out of Prometheus text exposition (what ``GET /metrics`` returns)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

# name, optional {labels}, value, optional timestamp
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)(?:\s+\S+)?$")


def gauge_values(text: str, names: Iterable[str]) -> dict[str, list[float]]:
    """The values of each gauge in ``names``, one per label set (e.g. one per data-parallel rank).

    A gauge absent from ``text`` is absent from the result; unparsable or non-finite values are skipped.
    """
    wanted = set(names)
    found: dict[str, list[float]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None or match.group(1) not in wanted:
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        if math.isfinite(value):
            found.setdefault(match.group(1), []).append(value)
    return found
