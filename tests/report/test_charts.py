"""The report's value axes: every point and bar lies below the top tick, and the top tick is labelled."""

from __future__ import annotations

import pytest

from perflab.report import charts
from perflab.report.model import CandidateSection, ComparisonRow, Figures, Report, StageSection
from tests.report.reports import bare_report


def _report(values: list[float]) -> Report:
    candidates = tuple(
        CandidateSection(label=f"c{index}", serve_command=None, blocks=(), decision="winner", value=value)
        for index, value in enumerate(values)
    )
    comparison = tuple(
        ComparisonRow(f"case {index}", Figures(value / 2), Figures(value))
        for index, value in enumerate(values)
    )
    return bare_report(comparison, (StageSection(1, "Parallelism", candidates),))


@pytest.mark.parametrize("values", [[34906.0, 122128.0], [0.8], [99.9, 100.0], [1_000_000.0], [7.0, 19.99]])
def test_the_top_tick_is_labelled_and_above_every_value(values: list[float]) -> None:
    report = _report(values)
    for chart in (charts.stages_chart(report), charts.comparison_chart(report)):
        y = chart.to_dict()["encoding"]["y"]
        low, high = y["scale"]["domain"]
        ticks = y["axis"]["values"]
        assert low == 0 and ticks[0] == 0 and ticks[-1] == high
        assert max(values) * 1.05 <= high, (values, high)
        assert len(ticks) <= 2 * charts.VALUE_TICKS + 1


def test_a_chart_without_positive_values_keeps_the_default_axis() -> None:
    y = charts.stages_chart(_report([0.0])).to_dict()["encoding"]["y"]
    assert "scale" not in y and y["field"] == "value"
