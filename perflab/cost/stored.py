"""Cost and energy figures of stored results, read from the database and hosts.yaml.

:func:`price_book` reads the team's prices (an unreadable hosts.yaml prices nothing: figures then say
"no price", the pages report the file's problems elsewhere); :func:`samples_by_run` reads the power and
energy samples of some runs in one query; :func:`cost_scorer` gives a study the figures its cost and
energy objectives score; :class:`CostContext` holds prices and samples for pages and reports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session, select

from db.models import ProfileResult, Run, RunSample
from perflab.cost.figures import CostFigures, cost_figures
from perflab.cost.prices import PriceBook
from perflab.inventory import InventoryError, load_inventory

POWER_SOURCES = ("accelerator", "rapl")
# Objective name → the figure of :class:`CostFigures` it scores.
OBJECTIVE_FIGURES = {"cost_per_mtok": "cost_per_mtok_total", "tokens_per_joule": "output_tokens_per_joule"}


def price_book() -> PriceBook:
    """The prices of the configured hosts.yaml (none when it cannot be loaded)."""
    try:
        return PriceBook.from_inventory(load_inventory())
    except InventoryError:
        return PriceBook()


def samples_by_run(session: Session, run_ids: Iterable[int]) -> dict[int, list[RunSample]]:
    """The accelerator and RAPL samples of these runs, by run, in time order."""
    wanted = list(run_ids)
    grouped: dict[int, list[RunSample]] = {run_id: [] for run_id in wanted}
    if not wanted:
        return grouped
    query = (
        select(RunSample)
        .where(RunSample.run_id.in_(wanted), RunSample.source.in_(POWER_SOURCES))
        .order_by(RunSample.run_id, RunSample.t_s, RunSample.id)
    )
    for sample in session.exec(query):
        grouped[sample.run_id].append(sample)
    return grouped


@dataclass(frozen=True)
class CostContext:
    """The prices and the power samples that figures of stored results are computed from."""

    prices: PriceBook = field(default_factory=PriceBook)
    samples: Mapping[int, Sequence[RunSample]] = field(default_factory=dict)

    def figures(self, run: Run, result: ProfileResult) -> CostFigures:
        """Cost and energy figures of one stored result of ``run``."""
        return cost_figures(run, result.result or {}, self.samples.get(run.id, ()), self.prices)


def load_cost_context(session: Session, runs: Iterable[Run], *, energy: bool = True) -> CostContext:
    """hosts.yaml's prices and (with ``energy``) the power samples of ``runs``."""
    samples = samples_by_run(session, [run.id for run in runs]) if energy else {}
    return CostContext(price_book(), samples)


def with_objectives(result: Mapping[str, Any], figures: CostFigures) -> dict[str, Any]:
    """The result with the cost and energy objectives' values added (None where not known)."""
    return {**result, **{name: getattr(figures, figure) for name, figure in OBJECTIVE_FIGURES.items()}}


def cost_scorer(
    session: Session, objective: str, runs: Sequence[Run]
) -> Callable[[Run, ProfileResult], Mapping[str, Any]] | None:
    """For a cost or energy objective, what a study scores each result on; None for the others."""
    if objective not in OBJECTIVE_FIGURES:
        return None
    context = load_cost_context(session, runs, energy=objective == "tokens_per_joule")
    return lambda run, result: with_objectives(result.result or {}, context.figures(run, result))
