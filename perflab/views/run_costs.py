"""Cost per 1M tokens on the runs page: a column, and a sort.

The cost is derived from hosts.yaml's prices, which the database does not hold, so it cannot be an
indexed column. Sorting by it reads the pricing facts of every matching run in one narrow query
(:func:`db.crud.pricing_rows`: ids, host, accelerator, locked GPUs, tp/dp, first-result throughput),
computes each cost with the same functions as every other page (:mod:`perflab.cost`), orders the ids
(runs without a cost last either way, ties by id like the other sorts) and then loads only the page's
rows. Prices change without the runs changing, so nothing of it is stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlmodel import Session

from db import crud
from db.crud import PricingRow
from perflab.accelerators import accelerators_of
from perflab.cost.figures import cost_per_mtok
from perflab.cost.prices import PriceBook

COST_SORT = "cost_per_mtok"
COST_COLUMN = "Cost / 1M tok"


def row_cost(row: PricingRow, prices: PriceBook) -> float | None:
    """Money per 1M total tokens of a run's first result (None: no price, no throughput)."""
    return cost_per_mtok(row.total_token_throughput, accelerators_of(row.run), prices.price_of(row.run))


def cost_order(session: Session, prices: PriceBook, *, descending: bool, **filters: Any) -> list[int]:
    """Ids of every run matching ``filters`` (those of :func:`db.crud.list_runs`), by cost."""
    costs = [(row.run.id, row_cost(row, prices)) for row in crud.pricing_rows(session, **filters)]
    priced = sorted(
        ((run_id, cost) for run_id, cost in costs if cost is not None),
        key=lambda item: (item[1], item[0]),
        reverse=descending,
    )
    unpriced = sorted((run_id for run_id, cost in costs if cost is None), reverse=descending)
    return [run_id for run_id, _ in priced] + unpriced


def page_costs(session: Session, prices: PriceBook, run_ids: Sequence[int]) -> dict[int, float | None]:
    """The cost of each of these runs (one page)."""
    if not run_ids:
        return {}
    return {row.run.id: row_cost(row, prices) for row in crud.pricing_rows(session, run_ids=run_ids)}
