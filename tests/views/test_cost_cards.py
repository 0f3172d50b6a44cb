"""The run page's cost and energy cards: priced figures with what they are priced at, and what is not
known said so."""

from __future__ import annotations

import pytest

from db.models import Run
from perflab.cost.figures import cost_figures
from perflab.cost.prices import PriceBook
from perflab.views.cost import cost_cards, price_lines, price_text
from perflab.views.formatting import format_metric
from perflab.views.metrics import metric_for
from tests.cost.test_figures import samples as power_samples

PRICES = PriceBook("USD", {"local-sim": (2.5, "example price")})
RESULT = {
    "output_throughput": 500.0,
    "total_token_throughput": 1000.0,
    "completed": 10,
    "total_output_tokens": 5000,
    "sample_window_s": [0.0, 10.0],
}


def test_priced_run_with_power_shows_cost_and_energy() -> None:
    run = Run(id=1, host_name="local-sim", gpu_ids=[0, 1])
    figures = cost_figures(run, RESULT, power_samples({0: 250.0, 1: 250.0}, range(11)), PRICES)
    cards = {card.label: card.value for card in cost_cards(figures)}
    # 2 × 2.5 per hour over 3.6M tokens an hour
    assert cards["Cost per 1M tokens"] == "$1.39" and cards["Cost per 1M output tokens"] == "$2.78"
    # 2 × 250 W × 10 s = 5000 J for 5000 output tokens and 10 requests
    assert cards["Output tokens per joule (tok/J)"] == "1" and cards["Energy per request (J)"] == "500"
    assert cards["Mean power per accelerator (W)"] == "250"
    assert price_text(figures) == "2 accelerators × $2.50 per hour (example price; host local-sim)"


def test_unpriced_result_without_power_says_so() -> None:
    figures = cost_figures(Run(id=2, host_name="elsewhere", gpu_ids=[0]), RESULT, [], PRICES)
    cards = {card.label: card.value for card in cost_cards(figures)}
    assert cards == {
        "Cost per 1M tokens": "no price",
        "Cost per 1M output tokens": "no price",
        "Energy": "not measured",
    }
    assert price_text(figures).startswith("No price for this host or accelerator")


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [("cost_per_mtok_total", 0.0042, "0.0042"), ("joules_per_output_token", 1.5, "1.50")],
)
def test_small_costs_keep_significant_digits(key: str, value: float, shown: str) -> None:
    assert format_metric(metric_for(key), value) == shown


def test_price_lines_list_host_and_model_prices() -> None:
    book = PriceBook("EUR", {"local-sim": (2.5, "example price")}, {"H100": 2.0})
    assert price_lines(book) == [
        "host local-sim: €2.50 per accelerator-hour (example price)",
        "accelerator H100: €2.00 per accelerator-hour",
    ]
