"""A configuration's cost on a case is priced at its published throughput — each launch the mean of its
runs, the configuration the mean of its launches, on its accelerators at their price — and its energy is
averaged over the launches whose window measured it, saying how many, and why none did when none did.
The cost change follows from the case's published throughput gain."""

from __future__ import annotations

import pytest

from perflab.cost.energy import Energy, NotMeasured
from perflab.cost.figures import CostFigures, cost_per_mtok
from perflab.cost.prices import Price
from perflab.report.costs import cost_cell, cost_change_text, cost_side, cost_text
from perflab.report.model import CostRow
from perflab.report.published import PublishedGain, measured_gain

PRICE = Price(2.5, "USD", "host a")
SHORT = NotMeasured("window 0.1 s, shorter than the minimum")


def _figures(total_tps: float, tokens_per_joule: float | None, accelerators: int = 4) -> CostFigures:
    energy = Energy(1000.0, 10.0, 1, ("power samples",)) if tokens_per_joule is not None else SHORT
    cost = cost_per_mtok(total_tps, accelerators, PRICE)
    return CostFigures(
        PRICE, accelerators, cost, cost, energy, total_tps=total_tps, output_tokens_per_joule=tokens_per_joule
    )


def test_cost_is_priced_at_the_mean_throughput_and_energy_is_a_mean_of_launch_means() -> None:
    # launch 1: two runs (60,000 and 70,000 tok/s, 2 and 4 tok/J); launch 2: one run, its window too short
    side = cost_side([[_figures(60_000.0, 2.0), _figures(70_000.0, 4.0)], [_figures(64_360.0, None)]])
    assert side.total_tps == pytest.approx(64_680.0)  # (mean of 60,000 and 70,000) and 64,360
    # 4 accelerators at 2.50 an hour over 64,680 tok/s: $0.0429 per 1M tokens, not the mean of the
    # launches' own costs
    assert side.cost_per_mtok == pytest.approx(4 * 2.5 / (64_680.0 * 3600) * 1e6)
    assert round(side.cost_per_mtok, 4) == 0.0429
    per_launch = [cost_per_mtok(65_000.0, 4, PRICE), cost_per_mtok(64_360.0, 4, PRICE)]
    assert side.cost_per_mtok != pytest.approx(sum(per_launch) / 2, rel=1e-9)
    assert side.tokens_per_joule == pytest.approx(3.0)  # launch 1 only
    assert (side.launches, side.energy_launches, side.energy_not_measured) == (2, 1, None)
    assert cost_text(side) == (
        "$0.043 per 1M tokens; 3 output tokens per joule "
        "(mean of the 1 of 2 launches whose energy was measured)"
    )
    both = cost_side([[_figures(60_000.0, 2.0)], [_figures(70_000.0, 4.0)]])
    assert cost_text(both) == "$0.043 per 1M tokens; 3 output tokens per joule (mean of 2 launches)"


def test_no_energy_figure_from_windows_too_short_and_why() -> None:
    side = cost_side([[_figures(1000.0, None, 1)], [_figures(3000.0, None, 1)]])
    assert side.tokens_per_joule is None and side.energy_launches == 0
    assert cost_cell(side) == f"$0.35 per 1M tokens<br>energy not measured: {SHORT.reason}"
    assert cost_side([[], []]) is None


def test_the_cost_change_follows_the_published_throughput_gain_with_its_interval() -> None:
    baseline = cost_side([[_figures(66_130.0, None)]])
    optimized = cost_side([[_figures(64_680.0, None)]])
    # a −2.2 % throughput change at the same accelerators and price is a +2.2 % cost change, not +3.9 %
    measured = CostRow("ShareGPT", baseline, optimized)
    assert measured.change is not None and measured.change.low is None
    assert measured.change.change == pytest.approx(66_130.0 / 64_680.0 - 1)
    assert measured.change.change == pytest.approx(optimized.cost_per_mtok / baseline.cost_per_mtok - 1)
    assert cost_change_text(measured, 1) == "+2.2% $ per 1M tokens"
    assert measured_gain(64_680.0, 66_130.0).text() == "-2.2%"
    # a published gain of +10.0 % ± 5.0 % at the same spend: 1 / 1.1 − 1, from 1 / 1.15 − 1 to 1 / 1.05 − 1
    published = CostRow("ShareGPT", baseline, optimized, published=PublishedGain(0.10, 0.05, decided=True))
    assert published.change.change == pytest.approx(1 / 1.1 - 1)
    assert (published.change.low, published.change.high) == pytest.approx((1 / 1.15 - 1, 1 / 1.05 - 1))
    assert cost_change_text(published, 1) == "-9.1% $ per 1M tokens, -13.0% to -4.8%"
    # twice the accelerators for the same gain: twice the spend per token over 1.1
    doubled = CostRow(
        "ShareGPT", baseline, cost_side([[_figures(64_680.0, None, 8)]]), published=PublishedGain(0.10)
    )
    assert doubled.change.change == pytest.approx(2 / 1.1 - 1)
