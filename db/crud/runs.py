"""Runs: creation, lookup, the status lifecycle with its timestamps, cancellation and deletion.

Lifecycle: ``queued → launching → ready → benchmarking → done``; any unfinished state may go to
``failed`` or ``cancelled``; ``launching → queued`` hands a claimed run back to the queue. The
finished states (``done``, ``failed``, ``cancelled``) are final.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlmodel import Session, select

from db.crud.engine_configs import upsert_engine_config
from db.crud.errors import IllegalTransition, NotFound, RunInUse
from db.crud.fields import check_choice, check_columns
from db.crud.studies import wake_study_statement
from db.crud.writes import execute_write, lock_row
from db.models import (
    BENCH_MODES,
    FINISHED_RUN_STATUSES,
    RUN_SOURCES,
    RUN_STATUSES,
    Run,
    Study,
    StudyCandidate,
    utcnow,
)
from db.session import begin_write

if TYPE_CHECKING:
    from perflab.engines.config import EngineConfig

ALLOWED_TRANSITIONS: dict[str, frozenset[str]] = {
    "queued": frozenset({"launching", "failed", "cancelled"}),
    "launching": frozenset({"queued", "ready", "failed", "cancelled"}),
    "ready": frozenset({"benchmarking", "failed", "cancelled"}),
    "benchmarking": frozenset({"ready", "done", "failed", "cancelled"}),
    "done": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}
# The timestamp column set when a run enters each status.
STATUS_TIMESTAMPS: dict[str, str] = {
    "launching": "launching_at",
    "ready": "ready_at",
    "benchmarking": "benchmarking_at",
    "done": "finished_at",
    "failed": "finished_at",
    "cancelled": "finished_at",
}
# Columns owned by the lifecycle functions, not settable through ``fields``.
LIFECYCLE_COLUMNS: frozenset[str] = frozenset({"id", "status", "created_at"})


def _knob_text(name: str, value: Any) -> str:
    if value is True:
        return name
    if value is False:
        return f"no {name}"
    if isinstance(value, (dict, list)):
        return f"{name}={json.dumps(value, separators=(',', ':'), sort_keys=True)}"
    return f"{name}={value}"


def summarize_knobs(config: EngineConfig) -> str:
    """A short text of the knobs that differ from the engine default, then ``×N`` for N replicas, e.g.
    ``tp=4 · kv_cache_dtype=fp8 ×2`` (the one place a run's replica count is written into it); a run
    from an image names it first (``image vllm/vllm-openai:v0.11.0 · tp=4``)."""
    parts = [f"image {config.image}"] if config.image is not None else []
    parts += [_knob_text(name, value) for name, value in config.knob_values().items()]
    if config.extra_args:
        parts.append(" ".join(config.extra_args))
    summary = " · ".join(parts) if parts else "defaults"
    return f"{summary} ×{config.replicas}" if config.replicas > 1 else summary


def create_run(session: Session, *, config: EngineConfig | None = None, **fields: Any) -> Run:
    """Store a new run (``queued`` unless ``status`` says otherwise) and return it.

    With ``config``, the engine, model, replicas, fingerprint, config JSON, the ``engineconfig`` row
    and a default ``knobs_summary`` come from it; any other column is given in ``fields``.
    """
    check_columns(Run, fields, forbidden=("id",))
    status = fields.setdefault("status", "queued")
    check_choice("status", status, RUN_STATUSES)
    check_choice("source", fields.setdefault("source", "perflab"), RUN_SOURCES)
    if fields.get("bench_mode") is not None:
        check_choice("bench_mode", fields["bench_mode"], BENCH_MODES)
    begin_write(session)
    if config is not None:
        row = upsert_engine_config(session, config=config)
        fields.setdefault("engine", config.engine)
        fields.setdefault("model", config.model)
        fields.setdefault("replicas", config.replicas)
        fields.setdefault("accelerators", config.gpus_needed)
        fields.setdefault("knobs_summary", summarize_knobs(config))
        fields["config"] = config.model_dump(mode="json")
        fields["config_fingerprint"] = row.fingerprint
        fields["engine_config_id"] = row.id
    now = utcnow()
    fields.setdefault("created_at", now)
    timestamp_column = STATUS_TIMESTAMPS.get(status)
    if timestamp_column:
        fields.setdefault(timestamp_column, now)
    run = Run(**fields)
    session.add(run)
    session.commit()
    return run


def get_run(session: Session, *, run_id: int) -> Run | None:
    """The run with id ``run_id``, or None."""
    return session.get(Run, run_id)


def require_run(session: Session, *, run_id: int) -> Run:
    """The run with id ``run_id``; raises :class:`NotFound`."""
    run = session.get(Run, run_id)
    if run is None:
        raise NotFound("run", run_id)
    return run


def get_runs(session: Session, *, run_ids: Iterable[int]) -> list[Run]:
    """The runs with these ids that exist, in the order the ids were given."""
    wanted = list(dict.fromkeys(run_ids))
    if not wanted:
        return []
    found = {run.id: run for run in session.exec(select(Run).where(Run.id.in_(wanted)))}
    return [found[run_id] for run_id in wanted if run_id in found]


def _apply(run: Run, fields: Mapping[str, Any]) -> None:
    for name, value in fields.items():
        setattr(run, name, value)


def set_run_status(session: Session, *, run_id: int, status: str, **fields: Any) -> Run:
    """Move a run to ``status`` (stamping its timestamp) and set ``fields`` in the same transaction.

    Raises :class:`IllegalTransition` for a change the lifecycle forbids (the run is unchanged) and
    :class:`NotFound` for an unknown run. Setting the status it already has only applies ``fields``.
    """
    check_choice("status", status, RUN_STATUSES)
    check_columns(Run, fields, forbidden=LIFECYCLE_COLUMNS)
    run = lock_row(session, Run, run_id, "run")
    if status != run.status:
        if status not in ALLOWED_TRANSITIONS[run.status]:
            current = run.status
            session.rollback()
            raise IllegalTransition("run", run_id, current, status)
        now = utcnow()
        if status == "queued":
            run.worker_id = None
            run.launching_at = None
            run.heartbeat_at = None
        else:
            setattr(run, STATUS_TIMESTAMPS[status], now)
            run.heartbeat_at = now
        run.status = status
        if status in FINISHED_RUN_STATUSES and run.study_id is not None:
            session.execute(wake_study_statement(run.study_id))
    _apply(run, fields)
    session.commit()
    return run


def update_run(session: Session, *, run_id: int, **fields: Any) -> Run:
    """Set non-lifecycle columns of a run (progress, remote_state, log_tail, …)."""
    check_columns(Run, fields, forbidden=LIFECYCLE_COLUMNS)
    run = lock_row(session, Run, run_id, "run")
    _apply(run, fields)
    session.commit()
    return run


def heartbeat_run(session: Session, *, run_id: int, progress: dict[str, Any] | None = None) -> None:
    """Record that the run's worker is alive (and its latest progress, when given)."""
    values: dict[str, Any] = {"heartbeat_at": utcnow()}
    if progress is not None:
        values["progress"] = progress
    execute_write(session, sa.update(Run).where(Run.id == run_id).values(**values))


def request_cancel(session: Session, *, run_id: int) -> Run:
    """Cancel a run: a queued one at once, an in-flight one by flagging it for its worker.

    A finished run is returned unchanged.
    """
    run = lock_row(session, Run, run_id, "run")
    if run.status == "queued":
        run.status = "cancelled"
        run.finished_at = utcnow()
        run.cancel_requested = True
        if run.study_id is not None:
            session.execute(wake_study_statement(run.study_id))
    elif run.status not in FINISHED_RUN_STATUSES:
        run.cancel_requested = True
    session.commit()
    return run


def studies_using_run(session: Session, *, run_id: int) -> list[tuple[int, str]]:
    """``(id, name)`` of the studies that use the run: the study that queued it (each of its launches,
    repeats and validations) and any study that records it as a candidate's measurement."""
    queued_by = sa.select(Run.study_id).where(Run.id == run_id, Run.study_id.is_not(None))
    measured = sa.select(StudyCandidate.study_id).where(StudyCandidate.run_id == run_id)
    query = (
        sa.select(Study.id, Study.name)
        .where(sa.or_(Study.id.in_(queued_by), Study.id.in_(measured)))
        .order_by(Study.id)
    )
    return [(int(study_id), str(name)) for study_id, name in session.execute(query).all()]


def run_in_use_message(run_id: int, studies: list[tuple[int, str]]) -> str:
    """Why a run the ``studies`` use cannot be deleted."""
    named = ", ".join(f"#{study_id} ({name})" for study_id, name in studies)
    noun = "study" if len(studies) == 1 else "studies"
    return f"Run {run_id} is a measurement of {noun} {named}: its decisions and report rest on it."


def delete_run(session: Session, *, run_id: int) -> bool:
    """Delete a run with its results, request records, samples and GPU locks; False if absent. A run a
    study uses raises :class:`RunInUse` (nothing deleted) while that study exists."""
    studies = studies_using_run(session, run_id=run_id)
    if studies:
        session.rollback()
        raise RunInUse(run_in_use_message(run_id, studies))
    return bool(execute_write(session, sa.delete(Run).where(Run.id == run_id)))
