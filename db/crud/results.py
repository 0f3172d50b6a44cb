"""Benchmark results of runs: profile results with their per-request records, and time-series
samples. Records and samples are inserted in bulk (one executemany per call)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import defer
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session, select

from db.crud.errors import NotFound
from db.crud.fields import check_choice
from db.crud.studies import wake_study_statement
from db.models import (
    BENCH_MODES,
    HEADLINE_COLUMNS,
    SAMPLE_SOURCES,
    ProfileResult,
    RequestRecord,
    Run,
    RunSample,
)
from db.session import begin_write

# vLLM's per-request arrays in a bench result (vLLM 0.33's `vllm bench serve --save-result`; perflab's
# bench writes them too, perflab.bench.report): an import turns them into request records, perflab's bench
# keeps them in the stored result for its download, and nothing that decides or reports reads them. The
# ITLs alone are a list per request, about 1 MB of JSON for 1,000 requests.
PER_REQUEST_ARRAYS: tuple[str, ...] = (
    "ttfts",
    "itls",
    "input_lens",
    "output_lens",
    "errors",
    "generated_texts",
    "server_queue_times",
    "server_ttfts",
    "start_times",
)
INTEGER_HEADLINES: frozenset[str] = frozenset({"completed", "failed"})
REQUEST_FIELDS: tuple[str, ...] = (
    "start_s",
    "ttft_ms",
    "e2el_ms",
    "itl_ms",
    "server_queue_ms",
    "server_ttft_ms",
    "input_tokens",
    "output_tokens",
    "output_tokens_source",
    "error",
    "base_url",
)


def _number(name: str, value: Any) -> float | int | None:
    if value is None or isinstance(value, bool):
        return None
    if not isinstance(value, (int, float)):
        raise ValueError(f"result field {name} must be a number, not {value!r}")
    return int(value) if name in INTEGER_HEADLINES else float(value)


def headline_values(result: Mapping[str, Any]) -> dict[str, float | int | None]:
    """The headline columns of a result dict (absent fields stay None).

    ``success_rate`` is ``completed / (completed + failed)`` when both counts are known.
    """
    values = {name: _number(name, result.get(name)) for name in HEADLINE_COLUMNS if name != "success_rate"}
    completed, failed = values["completed"], values["failed"]
    if completed is not None and failed is not None and completed + failed > 0:
        values["success_rate"] = completed / (completed + failed)
    else:
        values["success_rate"] = None
    return values


def _request_row(profile_result_id: int, position: int, request: Mapping[str, Any]) -> dict[str, Any]:
    row = {name: request.get(name) for name in REQUEST_FIELDS}
    row["profile_result_id"] = profile_result_id
    row["index"] = int(request.get("index", position))
    row["success"] = bool(request.get("success", not request.get("error")))
    return row


def add_profile_result(
    session: Session,
    *,
    run_id: int,
    profile: Mapping[str, Any],
    result: Mapping[str, Any],
    text_block: str | None,
    bench_mode: str | None,
    sweep_point: Mapping[str, Any] | None = None,
) -> ProfileResult:
    """Store one profile's result for a run at the next position.

    ``result`` is the bench result JSON; its ``requests`` list becomes ``requestrecord`` rows and
    the rest is kept as ``result`` with its headline figures copied into columns.
    """
    if bench_mode is not None:
        check_choice("bench_mode", bench_mode, BENCH_MODES)
    headlines = headline_values(result)
    begin_write(session)
    run = session.get(Run, run_id)
    if run is None:
        session.rollback()
        raise NotFound("run", run_id)
    last_position = session.execute(
        sa.select(sa.func.max(ProfileResult.position)).where(ProfileResult.run_id == run_id)
    ).scalar_one()
    stored_result = {key: value for key, value in result.items() if key != "requests"}
    profile_result = ProfileResult(
        run_id=run_id,
        position=0 if last_position is None else last_position + 1,
        profile_name=profile.get("name"),
        profile=dict(profile),
        result=stored_result,
        text_block=text_block,
        sweep_point=dict(sweep_point) if sweep_point is not None else None,
        bench_mode=bench_mode,
        **headlines,
    )
    session.add(profile_result)
    session.flush()
    requests = result.get("requests") or []
    if requests:
        rows = [
            _request_row(profile_result.id, position, request) for position, request in enumerate(requests)
        ]
        session.execute(sa.insert(RequestRecord), rows)
    if run.study_id is not None:  # the study may decide on this result now
        session.execute(wake_study_statement(run.study_id))
    session.commit()
    return profile_result


def list_profile_results(session: Session, *, run_id: int) -> list[ProfileResult]:
    """A run's profile results in the order they were stored."""
    query = select(ProfileResult).where(ProfileResult.run_id == run_id).order_by(ProfileResult.position)
    return list(session.exec(query))


def figures_of_runs(session: Session, *, run_ids: Iterable[int]) -> list[ProfileResult]:
    """The profile results of these runs, by run and position, each ``result`` without its
    per-request arrays (:data:`PER_REQUEST_ARRAYS`), which the database leaves out before they cross
    the wire: a study reads its results on every look. The rows are detached from ``session``, so that
    a later read of the same results in it gets them whole."""
    wanted = list(run_ids)
    if not wanted:
        return []
    dialect = session.get_bind().dialect.name
    try:
        rows = session.exec(_figures_query(wanted, _without_request_arrays(dialect))).all()
    except sa.exc.OperationalError:
        if dialect != "sqlite":
            raise
        # SQLite's JSON functions refuse the NaN and Infinity Python's JSON writes: read those whole
        rows = session.exec(_figures_query(wanted, ProfileResult.result)).all()
    found = []
    for profile_result, result in rows:
        set_committed_value(profile_result, "result", result if isinstance(result, dict) else {})
        session.expunge(profile_result)
        found.append(profile_result)
    return found


def _figures_query(run_ids: list[int], result: sa.ColumnElement[Any]) -> Any:
    """The results of ``run_ids`` in order, each with ``result`` read in place of its stored column."""
    return (
        select(ProfileResult, sa.type_coerce(result, sa.JSON))
        .options(defer(ProfileResult.result))
        .where(ProfileResult.run_id.in_(run_ids))
        .order_by(ProfileResult.run_id, ProfileResult.position)
    )


def _without_request_arrays(dialect: str) -> sa.ColumnElement[Any]:
    """``profileresult.result`` less :data:`PER_REQUEST_ARRAYS`, in this database's JSON functions."""
    if dialect == "sqlite":
        return sa.func.json_remove(ProfileResult.result, *(f"$.{key}" for key in PER_REQUEST_ARRAYS))
    if dialect == "postgresql":
        # json_each keeps the stored order of the keys, which a cast to jsonb would not
        entry = sa.func.json_each(ProfileResult.result).table_valued("key", "value").alias("entry")
        kept = sa.select(sa.func.json_object_agg(entry.c.key, entry.c.value))
        return kept.where(entry.c.key.not_in(PER_REQUEST_ARRAYS)).scalar_subquery()
    return ProfileResult.result


def first_results(session: Session, *, run_ids: Iterable[int]) -> dict[int, ProfileResult]:
    """The first profile result (position 0) of each of these runs that has one."""
    wanted = list(run_ids)
    if not wanted:
        return {}
    query = select(ProfileResult).where(ProfileResult.run_id.in_(wanted), ProfileResult.position == 0)
    return {result.run_id: result for result in session.exec(query)}


def list_request_records(session: Session, *, profile_result_id: int) -> list[RequestRecord]:
    """The per-request records of one profile result, by request index."""
    query = (
        select(RequestRecord)
        .where(RequestRecord.profile_result_id == profile_result_id)
        .order_by(RequestRecord.index)
    )
    return list(session.exec(query))


def add_samples(session: Session, *, run_id: int, samples: Iterable[Mapping[str, Any]]) -> int:
    """Store time-series samples ``{"t_s", "source", "values"}`` of a run; returns how many."""
    rows = []
    for sample in samples:
        check_choice("sample source", sample["source"], SAMPLE_SOURCES)
        rows.append(
            {
                "run_id": run_id,
                "t_s": float(sample["t_s"]),
                "source": sample["source"],
                "values": dict(sample.get("values") or {}),
            }
        )
    if not rows:
        return 0
    begin_write(session)
    session.execute(sa.insert(RunSample), rows)
    session.commit()
    return len(rows)


def count_samples(session: Session, *, run_id: int) -> int:
    """How many samples a run has stored (without loading them)."""
    query = sa.select(sa.func.count()).select_from(RunSample).where(RunSample.run_id == run_id)
    return int(session.execute(query).scalar_one())


def list_samples(session: Session, *, run_id: int, source: str | None = None) -> list[RunSample]:
    """A run's samples in time order, optionally of one source."""
    query = select(RunSample).where(RunSample.run_id == run_id)
    if source is not None:
        query = query.where(RunSample.source == source)
    return list(session.exec(query.order_by(RunSample.t_s, RunSample.id)))
