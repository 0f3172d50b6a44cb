"""Column types and vocabularies shared by every table.

Timestamps are stored timezone-aware and always read back as UTC ``datetime`` objects, on SQLite
(which keeps no zone) as on PostgreSQL. The status vocabularies live here so crud, the worker and
the UI agree on them.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(timezone.utc)


class UTCDateTime(sa.TypeDecorator[datetime]):
    """``DateTime(timezone=True)`` that accepts aware datetimes and returns them in UTC.

    A naive datetime is taken to be UTC already.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    @staticmethod
    def _as_utc(value: datetime | None) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return self._as_utc(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        return self._as_utc(value)


RUN_STATUSES: tuple[str, ...] = (
    "queued",
    "launching",
    "ready",
    "benchmarking",
    "done",
    "failed",
    "cancelled",
)
FINISHED_RUN_STATUSES: frozenset[str] = frozenset({"done", "failed", "cancelled"})
IN_FLIGHT_RUN_STATUSES: frozenset[str] = frozenset({"launching", "ready", "benchmarking"})

RUN_SOURCES: tuple[str, ...] = ("perflab", "imported")
BENCH_MODES: tuple[str, ...] = ("on-host", "forwarded")
SAMPLE_SOURCES: tuple[str, ...] = ("engine", "accelerator", "bench", "rapl")
DATASET_FORMATS: tuple[str, ...] = ("jsonl", "csv", "sharegpt", "text", "agentic-jsonl", "agentic-json")

STUDY_STATUSES: tuple[str, ...] = (
    "queued",
    "running",
    "paused",
    "done",
    "failed",
    "cancelled",
    "incomplete",
)
CANDIDATE_ROLES: tuple[str, ...] = ("candidate", "baseline", "validation")
CANDIDATE_DECISIONS: tuple[str, ...] = (
    "winner",
    "kept",
    "not_better",
    "failed",
    "disqualified",
    "reused",
    "unmeasured",
    "within_noise",
    "noise_unknown",
    "too_short",
    "infeasible",
)
