"""A configuration's cost and energy on a case are averaged over its launches as its throughput is: each
launch the mean of its runs, the configuration the mean of its launches; energy only over the launches
whose window measured it, saying how many, and why none did when none did."""

from __future__ import annotations

import pytest

from perflab.cost.energy import Energy, NotMeasured
from perflab.cost.figures import CostFigures
from perflab.cost.prices import Price
from perflab.report.costs import cost_cell, cost_side, cost_text

PRICE = Price(2.0, "USD", "host a")
SHORT = NotMeasured("window 0.1 s, shorter than the minimum")


def _figures(cost: float, tokens_per_joule: float | None) -> CostFigures:
    energy = Energy(1000.0, 10.0, 1, ("power samples",)) if tokens_per_joule is not None else SHORT
    return CostFigures(PRICE, 1, cost * 2, cost, energy, output_tokens_per_joule=tokens_per_joule)


def test_cost_and_energy_are_means_of_launch_means() -> None:
    # launch 1: two runs (cost 1.0 and 3.0, 2 and 4 tok/J); launch 2: one run, its window too short
    side = cost_side([[_figures(1.0, 2.0), _figures(3.0, 4.0)], [_figures(4.0, None)]])
    assert side.cost_per_mtok == pytest.approx((2.0 + 4.0) / 2)  # (mean of 1 and 3) and 4
    assert side.tokens_per_joule == pytest.approx(3.0)  # launch 1 only
    assert (side.launches, side.energy_launches, side.energy_not_measured) == (2, 1, None)
    assert cost_text(side) == (
        "$3.00 per 1M tokens; 3 output tokens per joule "
        "(mean of the 1 of 2 launches whose energy was measured)"
    )
    both = cost_side([[_figures(1.0, 2.0)], [_figures(3.0, 4.0)]])
    assert cost_text(both) == "$2.00 per 1M tokens; 3 output tokens per joule (mean of 2 launches)"


def test_no_energy_figure_from_windows_too_short_and_why() -> None:
    side = cost_side([[_figures(1.0, None)], [_figures(2.0, None)]])
    assert side.tokens_per_joule is None and side.energy_launches == 0
    assert cost_cell(side) == f"$1.50 per 1M tokens<br>energy not measured: {SHORT.reason}"
    assert cost_side([[], []]) is None
