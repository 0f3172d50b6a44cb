"""Cost and energy where people decide: the run page's cost cards and what they are priced at, and the
compare page's results with their cost and energy figures added as metrics (so the comparison table,
its CSV and markdown show them with % change, green where cheaper)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sqlmodel import Session

from db import crud
from perflab.cost.figures import CostFigures
from perflab.cost.prices import PriceBook, money
from perflab.cost.stored import CostContext
from perflab.views.cards import Card
from perflab.views.formatting import NOT_MEASURED, counted
from perflab.views.metrics import FIXED_METRICS, metric_heading
from perflab.views.run_detail import ProfileView

# Under the compare table when it has cost or energy rows.
COMPARE_NOTE = (
    "Costs in {currency} at each result's measured throughput, from hosts.yaml's prices; energy from the "
    "power sampled over each benchmark window (rows absent where no run measured it)."
)


def run_costs(session: Session, run_id: int, context: CostContext) -> dict[int, CostFigures]:
    """Cost and energy figures of each stored result of run ``run_id``, by result id."""
    run = crud.get_run(session, run_id=run_id)
    if run is None:
        return {}
    stored = crud.list_profile_results(session, run_id=run_id)
    return {result.id: context.figures(run, result) for result in stored}


def priced_views(views: Sequence[ProfileView], figures: dict[int, CostFigures]) -> list[ProfileView]:
    """``views`` with their cost and energy figures among their result's fields."""
    return [
        replace(view, result={**view.result, **figures[view.id].metrics()}) if view.id in figures else view
        for view in views
    ]


def price_lines(book: PriceBook) -> list[str]:
    """The team's prices as the Hosts page lists them (hosts.yaml is where they are set)."""
    hosts = [
        f"host {name}: {money(amount, book.currency)} per accelerator-hour" + (f" ({label})" if label else "")
        for name, (amount, label) in book.by_host.items()
    ]
    models = [
        f"accelerator {model}: {money(amount, book.currency)} per accelerator-hour"
        for model, amount in book.by_model.items()
    ]
    return hosts + models


def price_text(figures: CostFigures) -> str:
    """What the cost is priced at: ``8 accelerators × $2.50 per hour (example price; host local-sim)``."""
    price = figures.price
    if price is None:
        return "No price for this host or accelerator: set price_per_accelerator_hour or accelerator_prices."
    if figures.accelerators is None:
        return "Priced, but how many accelerators the run used is not known: no cost."
    label = f"{price.label}; " if price.label else ""
    count = figures.accelerators
    per_hour = money(price.per_accelerator_hour, price.currency)
    return f"{counted(count, 'accelerator')} × {per_hour} per hour ({label}{price.source})"


def cost_cards(figures: CostFigures) -> list[Card]:
    """The run page's cost and energy cards for one result (what is not known says so)."""
    price = figures.price

    def cost(value: float | None) -> str:
        return money(value, price.currency) if price is not None and value is not None else "no price"

    cards = [
        Card("Cost per 1M tokens", cost(figures.cost_per_mtok_total), price_text(figures)),
        Card("Cost per 1M output tokens", cost(figures.cost_per_mtok_output), price_text(figures)),
    ]
    if figures.output_tokens_per_joule is None:
        return [*cards, Card("Energy", NOT_MEASURED, figures.energy_text)]
    measured = {
        "output_tokens_per_joule": figures.output_tokens_per_joule,
        "joules_per_request": figures.joules_per_request,
        "mean_power_w_per_accelerator": figures.mean_power_w_per_accelerator,
    }
    return [*cards, *(_energy_card(key, value, figures.energy_text) for key, value in measured.items())]


def _energy_card(key: str, value: float | None, energy_text: str) -> Card:
    """An energy card labelled as the metric is everywhere (``Output tokens per joule (tok/J)``)."""
    metric = FIXED_METRICS[key]
    shown = NOT_MEASURED if value is None else f"{value:.0f}" if metric.unit == "W" else f"{value:.3g}"
    return Card(metric_heading(metric), shown, energy_text)
