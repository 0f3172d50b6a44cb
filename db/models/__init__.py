"""All perflab tables. Importing this package registers every table on ``SQLModel.metadata``,
which is what the Alembic migrations are checked against."""

from db.models.base import (
    BENCH_MODES,
    CANDIDATE_DECISIONS,
    CANDIDATE_ROLES,
    DATASET_FORMATS,
    FINISHED_RUN_STATUSES,
    IN_FLIGHT_RUN_STATUSES,
    RUN_SOURCES,
    RUN_STATUSES,
    SAMPLE_SOURCES,
    STUDY_STATUSES,
    UTCDateTime,
    utcnow,
)
from db.models.dataset import Dataset
from db.models.engineconfig import EngineConfigRow
from db.models.host import Host
from db.models.queue import GpuLock, Worker
from db.models.run import (
    HEADLINE_COLUMNS,
    HEADLINE_LATENCY_COLUMNS,
    ProfileResult,
    RequestRecord,
    Run,
    RunSample,
)
from db.models.study import Study, StudyCandidate

__all__ = [
    "BENCH_MODES",
    "CANDIDATE_DECISIONS",
    "CANDIDATE_ROLES",
    "DATASET_FORMATS",
    "FINISHED_RUN_STATUSES",
    "HEADLINE_COLUMNS",
    "HEADLINE_LATENCY_COLUMNS",
    "IN_FLIGHT_RUN_STATUSES",
    "RUN_SOURCES",
    "RUN_STATUSES",
    "SAMPLE_SOURCES",
    "STUDY_STATUSES",
    "Dataset",
    "EngineConfigRow",
    "GpuLock",
    "Host",
    "ProfileResult",
    "RequestRecord",
    "Run",
    "RunSample",
    "Study",
    "StudyCandidate",
    "UTCDateTime",
    "Worker",
    "utcnow",
]
