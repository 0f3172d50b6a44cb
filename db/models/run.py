"""The ``run`` table and what hangs off it: ``profileresult`` (one benchmark profile's result),
``requestrecord`` (per-request records of a result) and ``runsample`` (time series sampled while
benchmarking). Deleting a run deletes all of them (database-level ``ON DELETE CASCADE``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from db.models.base import UTCDateTime, utcnow

# Latency statistics that have their own headline columns (``{stat}_{metric}_ms``).
HEADLINE_LATENCY_COLUMNS: tuple[str, ...] = tuple(
    f"{stat}_{metric}_ms" for metric in ("ttft", "tpot", "itl", "e2el") for stat in ("mean", "median", "p99")
)
# Every headline column of ``profileresult``, each filled from the result field of the same name.
HEADLINE_COLUMNS: tuple[str, ...] = (
    "completed",
    "failed",
    "duration",
    "success_rate",
    "total_token_throughput",
    "output_throughput",
    "request_throughput",
    "request_goodput",
    *HEADLINE_LATENCY_COLUMNS,
)


class Run(SQLModel, table=True):
    """One engine config on one host plus its benchmark profiles, or one imported result."""

    __table_args__ = (sa.Index("ix_run_status_created_at", "status", "created_at"),)

    id: int | None = Field(default=None, primary_key=True)
    status: str = Field(default="queued", index=True)
    source: str = Field(default="perflab", index=True)
    simulated: bool = False
    host_name: str | None = Field(default=None, index=True)
    accelerator: str | None = Field(default=None, index=True)
    engine: str | None = Field(default=None, index=True)
    model: str | None = Field(default=None, index=True)
    engine_config_id: int | None = Field(
        default=None, foreign_key="engineconfig.id", ondelete="SET NULL", index=True
    )
    config: dict[str, Any] | None = Field(default=None, sa_type=sa.JSON)
    config_fingerprint: str | None = Field(default=None, index=True)
    knobs_summary: str | None = None
    replicas: int = 1
    accelerators: int | None = None  # tp × dp × replicas, or what an imported write-up states
    profiles: list[dict[str, Any]] = Field(default_factory=list, sa_type=sa.JSON)
    serve_commands: list[str] = Field(default_factory=list, sa_type=sa.JSON)
    bench_commands: list[str] = Field(default_factory=list, sa_type=sa.JSON)
    environment: dict[str, Any] = Field(default_factory=dict, sa_type=sa.JSON)
    log_tail: str | None = Field(default=None, sa_type=sa.Text)
    failure_class: str | None = None
    failure_message: str | None = Field(default=None, sa_type=sa.Text)
    queued_by: str | None = None
    study_id: int | None = Field(default=None, foreign_key="study.id", ondelete="SET NULL", index=True)
    label: str | None = None
    # SHA-256 of the imported file's text (imported runs only): the same file is not stored twice.
    import_hash: str | None = Field(default=None, index=True)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, index=True)
    launching_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    ready_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    benchmarking_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    cancel_requested: bool = False
    worker_id: str | None = Field(default=None, index=True)
    heartbeat_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    progress: dict[str, Any] | None = Field(default=None, sa_type=sa.JSON)
    gpu_ids: list[int] | None = Field(default=None, sa_type=sa.JSON)
    remote_state: dict[str, Any] | None = Field(default=None, sa_type=sa.JSON)
    bench_mode: str | None = None
    imported_from: str | None = None


class ProfileResult(SQLModel, table=True):
    """The result of one benchmark profile of a run: the full result JSON (without the per-request
    list, which lives in ``requestrecord``) plus headline columns for sorting and listing."""

    __table_args__ = (sa.UniqueConstraint("run_id", "position", name="uq_profileresult_run_position"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id", ondelete="CASCADE", index=True)
    position: int = 0
    profile_name: str | None = None
    profile: dict[str, Any] = Field(default_factory=dict, sa_type=sa.JSON)
    result: dict[str, Any] = Field(default_factory=dict, sa_type=sa.JSON)
    text_block: str | None = Field(default=None, sa_type=sa.Text)
    completed: int | None = None
    failed: int | None = None
    duration: float | None = None
    success_rate: float | None = None
    total_token_throughput: float | None = Field(default=None, index=True)
    output_throughput: float | None = Field(default=None, index=True)
    request_throughput: float | None = None
    request_goodput: float | None = None
    mean_ttft_ms: float | None = Field(default=None, index=True)
    median_ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    mean_tpot_ms: float | None = Field(default=None, index=True)
    median_tpot_ms: float | None = None
    p99_tpot_ms: float | None = None
    mean_itl_ms: float | None = None
    median_itl_ms: float | None = None
    p99_itl_ms: float | None = None
    mean_e2el_ms: float | None = None
    median_e2el_ms: float | None = None
    p99_e2el_ms: float | None = None
    sweep_point: dict[str, Any] | None = Field(default=None, sa_type=sa.JSON)
    bench_mode: str | None = None
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class RequestRecord(SQLModel, table=True):
    """One request of a benchmark (the bench's per-request record)."""

    id: int | None = Field(default=None, primary_key=True)
    profile_result_id: int = Field(foreign_key="profileresult.id", ondelete="CASCADE", index=True)
    index: int
    start_s: float | None = None
    ttft_ms: float | None = None
    e2el_ms: float | None = None
    itl_ms: list[float] | None = Field(default=None, sa_type=sa.JSON)
    server_queue_ms: float | None = None
    server_ttft_ms: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    output_tokens_source: str | None = None
    success: bool = True
    error: str | None = Field(default=None, sa_type=sa.Text)
    base_url: str | None = None


class RunSample(SQLModel, table=True):
    """One sample of a time series taken while a run was benchmarking."""

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id", ondelete="CASCADE", index=True)
    t_s: float
    source: str
    values: dict[str, Any] = Field(default_factory=dict, sa_type=sa.JSON)
