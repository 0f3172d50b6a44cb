"""The runs page's read model: filters and sort keys as the page offers them, one page of runs from
:func:`db.crud.list_runs` (paged in SQL), and the table the page draws.

The table keeps the run id as its index; ``Run`` is a relative link to the run page, so the page's
table cells open ``run?run=ID``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
import sqlalchemy as sa
from sqlmodel import Session

from db import crud
from db.crud import RunRow
from db.models import Run
from perflab.accelerators import node_total
from perflab.cost.prices import PriceBook
from perflab.views.formatting import PARTIAL_MARK, host_label
from perflab.views.run_costs import COST_COLUMN, COST_SORT, cost_order, page_costs
from perflab.views.urlstate import MAX_ID

# Source choice shown → (run.source, run.simulated) filter values.
SOURCE_CHOICES: dict[str, tuple[str | None, bool | None]] = {
    "All sources": (None, None),
    "perflab · real hosts": ("perflab", False),
    "perflab · simulated hosts": ("perflab", True),
    "imported": ("imported", None),
}
SORT_CHOICES: dict[str, str] = {
    "Created": "created_at",
    "Finished": "finished_at",
    "Run id": "id",
    "Status": "status",
    "Host": "host_name",
    "Accelerator": "accelerator",
    "Engine": "engine",
    "Model": "model",
    "Label": "label",
    "Total tok/s": "total_token_throughput",
    "Output tok/s": "output_throughput",
    "Request throughput": "request_throughput",
    "Mean TTFT": "mean_ttft_ms",
    "Mean TPOT": "mean_tpot_ms",
    "Mean ITL": "mean_itl_ms",
    "Mean E2EL": "mean_e2el_ms",
    "P99 TTFT": "p99_ttft_ms",
    "P99 TPOT": "p99_tpot_ms",
    "Success rate": "success_rate",
    "Duration": "duration",
    "Cost per 1M tok": COST_SORT,
}
PAGE_SIZES: tuple[int, ...] = (25, 50, 100, 200)
# The engine's prefix-cache hit rate over the first result (%), read from its JSON for the page's runs.
CACHE_HIT_COLUMN = "Prefix-cache hit (%)"
# What tells runs apart comes first (the engine, its knobs and the profile, before the model, which
# runs of one study share), then how fast they were, then where they ran and their bookkeeping.
TABLE_COLUMNS: tuple[str, ...] = (
    "Run",
    "Status",
    "Engine",
    "Knobs",
    "Profile",
    "Model",
    "Total tok/s",
    "Total tok/s per accelerator",
    "Accelerators",
    "Output tok/s",
    "Mean TTFT (ms)",
    "Mean TPOT (ms)",
    CACHE_HIT_COLUMN,
    COST_COLUMN,
    "Replicas",
    "Host",
    "Accelerator",
    "Label",
    "Source",
    "Created",
)
# The column sets the page offers: the compact one (the default) fits beside the sidebar at 1024 px; it
# adds the prefix-cache hit rate when a run on the page has one (sessions, shared prefixes).
COLUMN_SETS: dict[str, tuple[str, ...]] = {"compact": TABLE_COLUMNS[:8], "all": TABLE_COLUMNS}
DEFAULT_COLUMN_SET = "compact"
FIGURE_COLUMNS: tuple[str, ...] = (
    "Total tok/s",
    "Output tok/s",
    "Mean TTFT (ms)",
    "Mean TPOT (ms)",
    CACHE_HIT_COLUMN,
    COST_COLUMN,
    "Total tok/s per accelerator",
)
# Query parameters of the runs page (shareable filters) → widget keys; multi-valued ones are
# comma-separated.
QUERY_KEYS: dict[str, str] = {
    "status": "runs_status",
    "host": "runs_host",
    "accelerator": "runs_accelerator",
    "engine": "runs_engine",
    "model": "runs_model",
    "source": "runs_source",
    "sort": "runs_sort",
    "order": "runs_order",
    "size": "runs_page_size",
    "page": "runs_page",
    "columns": "runs_columns",
}
MULTI_VALUED = ("status", "host", "accelerator", "engine")
ORDERS = ("descending", "ascending")
DEFAULT_PAGE_SIZE = PAGE_SIZES[1]
# How many accepted values a "not understood" sentence lists.
MAX_LISTED = 8


@dataclass(frozen=True)
class RunFilters:
    """What the runs page filters by; empty tuples and texts mean "any"."""

    status: tuple[str, ...] = ()
    host: tuple[str, ...] = ()
    accelerator: tuple[str, ...] = ()
    engine: tuple[str, ...] = ()
    model_text: str = ""
    source: str = "All sources"

    @property
    def active(self) -> bool:
        """Whether any filter narrows the list."""
        narrowing = (self.status, self.host, self.accelerator, self.engine, self.model_text.strip())
        return any(narrowing) or self.source != "All sources"


@dataclass(frozen=True)
class RunListPage:
    """One page of the runs table and where it sits among all matching runs."""

    table: pd.DataFrame
    total: int
    page: int
    pages: int
    page_size: int
    run_ids: list[int] = field(default_factory=list)

    def position_text(self) -> str:
        """``Runs 51–100 of 10000 · page 2 of 200`` (or ``No runs match.``)."""
        if self.total == 0:
            return "No runs match."
        first = (self.page - 1) * self.page_size + 1
        return (
            f"Runs {first}–{first + len(self.run_ids) - 1} of {self.total} · page {self.page} of {self.pages}"
        )


def page_count(total: int, page_size: int) -> int:
    """How many pages ``total`` runs fill (at least one)."""
    return max(1, -(-total // page_size))


def _optional(values: tuple[str, ...]) -> list[str] | None:
    return list(values) if values else None


def run_link(run_id: int) -> str:
    """The relative address of a run page."""
    return f"run?run={run_id}"


def _per_accelerator(row: RunRow) -> float | None:
    """Total tok/s per accelerator: the node total (an imported block measured one replica) ÷ the
    accelerators the run used."""
    total = node_total(row.figures, replicas=row.replicas, imported=row.source == "imported")
    return total / row.accelerators if total is not None and row.accelerators else None


def _profile_text(row: RunRow, planned: str | None) -> str | None:
    """The first result's profile (marked when partial), else the first profile the run plans."""
    if row.profile_name:
        return row.profile_name + (f" {PARTIAL_MARK}" if row.partial else "")
    return planned


def _table_row(row: RunRow, planned: str | None = None) -> dict[str, object]:
    """One row of the table; a value the run does not have is None (the page shows ``—``)."""
    figures = row.figures
    return {
        "Run": run_link(row.id),
        "Status": row.status
        + (" (cancel requested)" if row.cancel_requested and row.status != "cancelled" else ""),
        "Host": host_label(row.host_name, row.simulated) if row.host_name or row.simulated else None,
        "Accelerator": row.accelerator or None,
        "Engine": row.engine or None,
        "Model": row.model or None,
        "Knobs": row.knobs_summary or None,
        "Profile": _profile_text(row, planned),
        "Total tok/s": figures.get("total_token_throughput"),
        "Replicas": row.replicas,
        "Accelerators": row.accelerators,
        "Total tok/s per accelerator": _per_accelerator(row),
        "Output tok/s": figures.get("output_throughput"),
        "Mean TTFT (ms)": figures.get("mean_ttft_ms"),
        "Mean TPOT (ms)": figures.get("mean_tpot_ms"),
        "Label": row.label or None,
        "Source": row.source + (" · simulated" if row.simulated else ""),
        "Created": row.created_at,
    }


def runs_table(
    rows: list[RunRow],
    costs: dict[int, float | None] | None = None,
    planned: dict[int, str] | None = None,
    cache_hits: dict[int, float] | None = None,
) -> pd.DataFrame:
    """The runs table of one page, indexed by run id, columns as in :data:`TABLE_COLUMNS` (``costs``:
    each run's cost per 1M tokens, in the currency of hosts.yaml; ``planned``: the first profile of
    runs without a result yet; ``cache_hits``: the engine's prefix-cache hit rate over the first
    result, %)."""
    costs, planned, cache_hits = costs or {}, planned or {}, cache_hits or {}
    table_rows = [
        {
            **_table_row(row, planned.get(row.id)),
            COST_COLUMN: costs.get(row.id),
            CACHE_HIT_COLUMN: cache_hits.get(row.id),
        }
        for row in rows
    ]
    frame = pd.DataFrame(table_rows, columns=list(TABLE_COLUMNS))
    frame.index = pd.Index([row.id for row in rows], name="id")
    for column in FIGURE_COLUMNS:
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    return frame


def load_run_page(
    session: Session,
    filters: RunFilters,
    *,
    sort_label: str = "Created",
    descending: bool = True,
    page: int = 1,
    page_size: int = DEFAULT_PAGE_SIZE,
    prices: PriceBook | None = None,
) -> RunListPage:
    """The runs matching ``filters`` on page ``page`` (clamped to the last page; never past
    ``MAX_ID`` runs, so the offset always fits the database's integers); ``prices`` price the cost
    column and sort (none: no costs)."""
    page = min(max(page, 1), MAX_ID // page_size + 1)
    book = prices or PriceBook()
    source, simulated = SOURCE_CHOICES.get(filters.source, (None, None))
    matching = {
        "status": _optional(filters.status),
        "host": _optional(filters.host),
        "accelerator": _optional(filters.accelerator),
        "engine": _optional(filters.engine),
        "model_text": filters.model_text or None,
        "source": source,
        "simulated": simulated,
    }
    sort = SORT_CHOICES.get(sort_label, "created_at")
    if sort == COST_SORT:
        ordered = cost_order(session, book, descending=descending, **matching)
        pages = page_count(len(ordered), page_size)
        page = min(max(page, 1), pages)
        shown = ordered[(page - 1) * page_size : page * page_size]
        result = crud.RunPage(rows=crud.rows_by_ids(session, shown), total=len(ordered))
    else:
        query = {**matching, "sort": sort, "descending": descending, "limit": page_size}
        result = crud.list_runs(session, offset=(max(page, 1) - 1) * page_size, **query)
        pages = page_count(result.total, page_size)
        if page > pages:
            page = pages
            result = crud.list_runs(session, offset=(page - 1) * page_size, **query)
    shown_ids = [row.id for row in result.rows]
    return RunListPage(
        table=runs_table(
            result.rows,
            page_costs(session, book, shown_ids),
            planned_profiles(session, [row.id for row in result.rows if not row.profile_name]),
            crud.first_result_figures(session, shown_ids, "prefix_cache_hit_rate"),
        ),
        total=result.total,
        page=max(page, 1),
        pages=pages,
        page_size=page_size,
        run_ids=[row.id for row in result.rows],
    )


def shown_columns(column_set: str, table: pd.DataFrame) -> tuple[str, ...]:
    """The columns of ``column_set``, with the prefix-cache hit rate after the compact ones when a run
    of the page has one."""
    columns = COLUMN_SETS[column_set]
    if CACHE_HIT_COLUMN in columns or table[CACHE_HIT_COLUMN].isna().all():
        return columns
    return (*columns, CACHE_HIT_COLUMN)


def planned_profiles(session: Session, run_ids: list[int]) -> dict[int, str]:
    """The name of the first profile each of ``run_ids`` plans (runs without a result yet)."""
    if not run_ids:
        return {}
    planned = {}
    for run_id, profiles in session.execute(sa.select(Run.id, Run.profiles).where(Run.id.in_(run_ids))):
        first = profiles[0] if isinstance(profiles, list) and profiles else None
        if isinstance(first, dict) and isinstance(first.get("name"), str):
            planned[run_id] = first["name"]
    return planned


def filter_choices(session: Session) -> dict[str, list[str]]:
    """The values each filter widget offers (the distinct values of stored runs)."""
    return crud.run_filter_choices(session)


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


@dataclass(frozen=True)
class QueryReading:
    """The widget values a runs-page address sets, and a sentence per value in it that was not understood."""

    state: dict[str, object]
    problems: list[str]


def _known(options: list[str]) -> str:
    """``known: a, b, c`` (the first few), or that no run has any."""
    if not options:
        return "no run has one"
    more = ", …" if len(options) > MAX_LISTED else ""
    return "known: " + ", ".join(options[:MAX_LISTED]) + more


def _not_understood(name: str, value: str, expected: str) -> str:
    """``'bogus' in ?sort= was not understood (known: Created, …); it is ignored.``"""
    shown = value.encode("unicode_escape").decode("ascii")
    return f"'{shown}' in ?{name}= was not understood ({expected}); it is ignored."


def read_query(params: dict[str, str], choices: dict[str, list[str]]) -> QueryReading:
    """Widget values for the page's filters from its query parameters; a value no widget can show (an
    unknown engine, a page that is not a number) is left out, with a sentence saying so."""
    state: dict[str, object] = {}
    problems: list[str] = []
    for name in MULTI_VALUED:
        if name in params:
            known = choices.get(name, [])
            values = _split(params[name])
            state[QUERY_KEYS[name]] = [value for value in values if value in known]
            problems += [
                _not_understood(name, value, _known(known)) for value in values if value not in known
            ]
    if "model" in params:
        state[QUERY_KEYS["model"]] = params["model"]
    pickers = {
        "source": list(SOURCE_CHOICES),
        "sort": list(SORT_CHOICES),
        "order": list(ORDERS),
        "columns": list(COLUMN_SETS),
    }
    for name, options in pickers.items():
        if name not in params:
            continue
        if params[name] in options:
            state[QUERY_KEYS[name]] = params[name]
        else:
            problems.append(_not_understood(name, params[name], _known(options)))
    size = params.get("size")
    if size is not None:
        if _bounded_int(size, max(PAGE_SIZES)) in PAGE_SIZES:
            state[QUERY_KEYS["size"]] = int(size)
        else:
            problems.append(_not_understood("size", size, _known([str(option) for option in PAGE_SIZES])))
    page = params.get("page")
    if page is not None:
        number = _bounded_int(page, MAX_ID)
        if number is not None:
            state[QUERY_KEYS["page"]] = number
        else:
            problems.append(_not_understood("page", page, "pages are numbered from 1"))
    return QueryReading(state, problems)


def _bounded_int(text: str, highest: int) -> int | None:
    """``text`` as a whole number in ``[1, highest]``, else None (read only when short enough to be one)."""
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(highest)):
        return None
    value = int(text)
    return value if 1 <= value <= highest else None


def query_from_view(
    filters: RunFilters,
    *,
    sort_label: str,
    descending: bool,
    page_size: int,
    page: int,
    columns: str = DEFAULT_COLUMN_SET,
) -> dict[str, str]:
    """The query parameters that reopen this view; defaults are left out."""
    params: dict[str, str] = {}
    for name in MULTI_VALUED:
        values = getattr(filters, name)
        if values:
            params[name] = ",".join(values)
    if filters.model_text.strip():
        params["model"] = filters.model_text.strip()
    if filters.source != "All sources":
        params["source"] = filters.source
    if sort_label != "Created":
        params["sort"] = sort_label
    if not descending:
        params["order"] = "ascending"
    if page_size != DEFAULT_PAGE_SIZE:
        params["size"] = str(page_size)
    if page != 1:
        params["page"] = str(page)
    if columns != DEFAULT_COLUMN_SET:
        params["columns"] = columns
    return params


def selection_order(previous: list[int], selected: list[int]) -> list[int]:
    """The selected runs in the order they were picked: those picked before keep their place, newly
    picked ones follow (in table order when several arrive at once)."""
    kept = [run_id for run_id in previous if run_id in selected]
    return kept + [run_id for run_id in selected if run_id not in kept]
