"""The runs page's read model: filtered, sorted, paged runs with their first result's figures.

One query selects only the scalar columns a list needs (no JSON blobs) and joins each run's first
profile result (position 0); a second query counts the matches. Both use the run table's indexes. A
third reads, for the runs of the page only, whether their first result is partial.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session

from db.models import HEADLINE_COLUMNS, ProfileResult, Run

RUN_SORT_COLUMNS: tuple[str, ...] = (
    "created_at",
    "finished_at",
    "id",
    "status",
    "host_name",
    "accelerator",
    "engine",
    "model",
    "label",
)
SORT_KEYS: tuple[str, ...] = RUN_SORT_COLUMNS + HEADLINE_COLUMNS
MAX_PAGE_SIZE = 1000
FILTER_NAMES = ("status", "host", "accelerator", "engine", "model_text", "source", "simulated", "study_id")


@dataclass(frozen=True)
class RunSummary:
    """The scalar columns that say what a run is, where it ran and how it ended (the runs list's and the
    run page's common ground)."""

    id: int
    status: str
    source: str
    simulated: bool
    host_name: str | None
    accelerator: str | None
    engine: str | None
    model: str | None
    knobs_summary: str | None
    replicas: int
    accelerators: int | None
    label: str | None
    queued_by: str | None
    study_id: int | None
    imported_from: str | None
    failure_class: str | None
    cancel_requested: bool
    created_at: datetime
    finished_at: datetime | None


RUN_LIST_COLUMNS: tuple[str, ...] = tuple(column.name for column in fields(RunSummary))


@dataclass(frozen=True)
class RunRow(RunSummary):
    """One line of the runs list: the run's summary and its first result's headline figures (``partial``:
    that result covers only the requests that ended before its benchmark was stopped)."""

    profile_name: str | None = None
    figures: dict[str, float | None] = field(default_factory=dict)
    partial: bool = False


@dataclass(frozen=True)
class RunPage:
    """A page of runs and the number of runs matching the filters on all pages."""

    rows: list[RunRow]
    total: int


def _as_list(value: str | Sequence[str] | None) -> list[str] | None:
    if value is None:
        return None
    return [value] if isinstance(value, str) else list(value)


def _filters(
    *,
    status: str | Sequence[str] | None,
    host: str | Sequence[str] | None,
    accelerator: str | Sequence[str] | None,
    engine: str | Sequence[str] | None,
    model_text: str | None,
    source: str | None,
    simulated: bool | None,
    study_id: int | None,
) -> list[sa.ColumnElement[bool]]:
    conditions: list[sa.ColumnElement[bool]] = []
    for column, wanted in (
        (Run.status, _as_list(status)),
        (Run.host_name, _as_list(host)),
        (Run.accelerator, _as_list(accelerator)),
        (Run.engine, _as_list(engine)),
    ):
        if wanted is not None:
            conditions.append(column.in_(wanted))
    if model_text and model_text.strip():
        conditions.append(sa.func.lower(Run.model).contains(model_text.strip().lower(), autoescape=True))
    if source is not None:
        conditions.append(Run.source == source)
    if simulated is not None:
        conditions.append(Run.simulated == simulated)
    if study_id is not None:
        conditions.append(Run.study_id == study_id)
    return conditions


def _rows_query(first_result: Any) -> sa.Select[Any]:
    """The runs list's columns: each run's summary joined with its first result's headline figures."""
    return sa.select(
        *(getattr(Run, name) for name in RUN_LIST_COLUMNS),
        first_result.profile_name,
        *(getattr(first_result, name) for name in HEADLINE_COLUMNS),
    ).outerjoin(first_result, sa.and_(first_result.run_id == Run.id, first_result.position == 0))


def list_runs(
    session: Session,
    *,
    status: str | Sequence[str] | None = None,
    host: str | Sequence[str] | None = None,
    accelerator: str | Sequence[str] | None = None,
    engine: str | Sequence[str] | None = None,
    model_text: str | None = None,
    source: str | None = None,
    simulated: bool | None = None,
    study_id: int | None = None,
    sort: str = "created_at",
    descending: bool = True,
    offset: int = 0,
    limit: int = 50,
) -> RunPage:
    """Runs matching every given filter, sorted by ``sort`` (a run column or a headline figure of
    the first result; runs without a value sort last), ``limit`` of them from ``offset``.

    ``model_text`` matches any part of the model name, ignoring case; ``simulated`` keeps only runs on
    simulated (True) or real (False) hosts; the other filters take one value or a list of accepted
    values.
    """
    if sort not in SORT_KEYS:
        raise ValueError(f"cannot sort runs by {sort!r}; choose one of {', '.join(SORT_KEYS)}")
    if offset < 0 or not 0 < limit <= MAX_PAGE_SIZE:
        raise ValueError(f"need offset >= 0 and 0 < limit <= {MAX_PAGE_SIZE}")
    conditions = _filters(
        status=status,
        host=host,
        accelerator=accelerator,
        engine=engine,
        model_text=model_text,
        source=source,
        simulated=simulated,
        study_id=study_id,
    )
    first_result = sa.orm.aliased(ProfileResult)
    sort_column = getattr(Run, sort) if sort in RUN_SORT_COLUMNS else getattr(first_result, sort)
    order = sort_column.desc() if descending else sort_column.asc()
    if sort_column.nullable:
        # Runs without a value sort last either way (NOT NULL columns keep their index order).
        order = order.nulls_last()
    tie_break = Run.id.desc() if descending else Run.id.asc()
    query = (
        _rows_query(first_result).where(*conditions).order_by(order, tie_break).offset(offset).limit(limit)
    )
    records = list(session.execute(query))
    partial = _partial_first_results(session, [record.id for record in records])
    rows = [_row(record, partial=record.id in partial) for record in records]
    total = session.execute(sa.select(sa.func.count()).select_from(Run).where(*conditions)).scalar_one()
    return RunPage(rows=rows, total=int(total))


@dataclass(frozen=True)
class PricingRow:
    """What a run's cost per 1M tokens is computed from: the run's facts that
    :func:`perflab.accelerators.accelerators_of` and the price book read (as a transient ``Run``), and
    its first result's throughputs."""

    run: Run
    total_token_throughput: float | None
    output_throughput: float | None


def pricing_rows(
    session: Session, *, run_ids: Sequence[int] | None = None, **filters: Any
) -> list[PricingRow]:
    """The pricing facts of the runs ``run_ids``, or of every run matching ``filters`` (those of
    :func:`list_runs`), in one narrow query: no JSON blob but the locked GPU ids and the config's tp/dp."""
    unknown = sorted(set(filters) - set(FILTER_NAMES))
    if unknown:
        raise TypeError(f"pricing_rows() got unknown filters: {', '.join(unknown)}")
    conditions = _filters(**{name: filters.get(name) for name in FILTER_NAMES})
    if run_ids is not None:
        conditions.append(Run.id.in_(list(run_ids)))
    first_result = sa.orm.aliased(ProfileResult)
    query = (
        sa.select(
            Run.id,
            Run.source,
            Run.host_name,
            Run.accelerator,
            Run.replicas,
            Run.gpu_ids,
            Run.config["tp"].as_integer().label("tp"),
            Run.config["dp"].as_integer().label("dp"),
            first_result.total_token_throughput,
            first_result.output_throughput,
        )
        .outerjoin(first_result, sa.and_(first_result.run_id == Run.id, first_result.position == 0))
        .where(*conditions)
    )
    rows = []
    for record in session.execute(query):
        config = {name: value for name, value in (("tp", record.tp), ("dp", record.dp)) if value is not None}
        run = Run(
            id=record.id,
            source=record.source,
            host_name=record.host_name,
            accelerator=record.accelerator,
            replicas=record.replicas,
            gpu_ids=record.gpu_ids,
            config=config,
        )
        rows.append(PricingRow(run, record.total_token_throughput, record.output_throughput))
    return rows


def rows_by_ids(session: Session, run_ids: Sequence[int]) -> list[RunRow]:
    """The runs list's rows of ``run_ids``, in that order (ids that do not exist are left out)."""
    if not run_ids:
        return []
    first_result = sa.orm.aliased(ProfileResult)
    query = _rows_query(first_result).where(Run.id.in_(list(run_ids)))
    records = {record.id: record for record in session.execute(query)}
    partial = _partial_first_results(session, list(records))
    return [_row(records[run_id], partial=run_id in partial) for run_id in run_ids if run_id in records]


def first_result_figures(session: Session, run_ids: Sequence[int], field_name: str) -> dict[int, float]:
    """A number of these runs' first results' JSON that has no column of its own (e.g. the prefix-cache
    hit rate), read for one page of runs only; runs whose first result lacks it are left out."""
    if not run_ids:
        return {}
    query = sa.select(ProfileResult.run_id, ProfileResult.result[field_name].as_float()).where(
        ProfileResult.run_id.in_(list(run_ids)), ProfileResult.position == 0
    )
    return {run_id: value for run_id, value in session.execute(query) if value is not None}


def _partial_first_results(session: Session, run_ids: list[int]) -> set[int]:
    """Which of these runs' first results are marked partial (read for one page of runs only)."""
    if not run_ids:
        return set()
    query = sa.select(ProfileResult.run_id, ProfileResult.result["partial"].as_boolean()).where(
        ProfileResult.run_id.in_(run_ids), ProfileResult.position == 0
    )
    return {run_id for run_id, partial in session.execute(query) if partial is True}


def _row(record: sa.Row[Any], *, partial: bool) -> RunRow:
    values = record._mapping
    run_values = {name: values[name] for name in RUN_LIST_COLUMNS}
    figures = {name: values[name] for name in HEADLINE_COLUMNS}
    return RunRow(**run_values, profile_name=values["profile_name"], figures=figures, partial=partial)


def run_filter_choices(session: Session) -> dict[str, list[str]]:
    """The distinct hosts, accelerators, engines, models, statuses and sources of stored runs."""
    choices: dict[str, list[str]] = {}
    for key, column in (
        ("host", Run.host_name),
        ("accelerator", Run.accelerator),
        ("engine", Run.engine),
        ("model", Run.model),
        ("status", Run.status),
        ("source", Run.source),
    ):
        query = sa.select(column).where(column.is_not(None)).distinct().order_by(column)
        choices[key] = list(session.execute(query).scalars())
    return choices
