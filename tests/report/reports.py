"""A minimal report for tests of how one part of it renders: only the comparison and stages given."""

from __future__ import annotations

from collections.abc import Sequence

from perflab.report.model import ComparisonRow, Report, StageSection


def bare_report(comparison: Sequence[ComparisonRow], stages: Sequence[StageSection] = ()) -> Report:
    return Report(
        title="t",
        model="m",
        objective="Total TPS",
        objective_unit="tok/s",
        recommended_command=None,
        comparison=tuple(comparison),
        stages=tuple(stages),
        summary=(),
    )
