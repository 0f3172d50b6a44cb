"""Cost and energy figures of stored results, read from the database and hosts.yaml.

:func:`price_book` reads the team's prices (an unreadable hosts.yaml prices nothing: figures then say
"no price", the pages report the file's problems elsewhere); :func:`samples_by_run` reads the power and
energy samples of some runs in one query; :func:`cost_scorer` gives a study the figures its cost and
energy objectives score.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
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


def with_objectives(result: Mapping[str, Any], figures: CostFigures) -> dict[str, Any]:
    """The result with the cost and energy objectives' values added (None where not known)."""
    return {**result, **{name: getattr(figures, figure) for name, figure in OBJECTIVE_FIGURES.items()}}


def cost_scorer(
    session: Session, objective: str, runs: Sequence[Run], prices: PriceBook | None = None
) -> Callable[[Run, ProfileResult], Mapping[str, Any]] | None:
    """For a cost or energy objective, what a study scores each result on; None for the others."""
    if objective not in OBJECTIVE_FIGURES:
        return None
    book = prices or price_book()
    samples = samples_by_run(session, [run.id for run in runs]) if objective == "tokens_per_joule" else {}

    def scored(run: Run, result: ProfileResult) -> Mapping[str, Any]:
        figures = cost_figures(run, result.result or {}, samples.get(run.id, ()), book)
        return with_objectives(result.result or {}, figures)

    return scored
