"""A change in the report's comparison that no decision made (a validation case, a stage that kept
nothing) is said to be a ratio of means, with how many results each side's mean holds; a decided one,
shown with its interval, needs no such line."""

from __future__ import annotations

from perflab.report.markdown import comparison_note, render_markdown
from perflab.report.model import ComparisonRow, Figures
from perflab.report.published import PublishedGain
from tests.report.reports import bare_report

DECIDED = PublishedGain(0.12, 0.03, decided=True)


def test_a_validation_case_says_it_is_a_ratio_of_means_and_how_many_runs_each_side_holds() -> None:
    tuning = ComparisonRow(
        "Tuning", Figures(100.0, runs=(2, 2)), Figures(112.0, runs=(2, 2, 1)), published=DECIDED
    )
    report = bare_report([tuning, ComparisonRow("Long context", Figures(50.0), Figures(58.9))])
    note = comparison_note(report)
    assert note == (
        "A change without ± is the ratio of the two configurations' means, not a decision: no interval, no "
        "verdict (1 run against 1 run)."
    )
    markdown = render_markdown(report)
    assert "(+17.8%)" in markdown and "(+12.0% ± 3.0%)" in markdown
    assert markdown.index("| **Long context** |") < markdown.index(note)


def test_cases_measured_differently_are_each_counted() -> None:
    report = bare_report(
        [
            ComparisonRow("Chat", Figures(100.0, runs=(1, 1, 1)), Figures(101.0, runs=(1, 1))),
            ComparisonRow("Short", Figures(50.0), Figures(49.0)),
        ]
    )
    assert comparison_note(report) == (
        "A change without ± is the ratio of the two configurations' means, not a decision: no interval, no "
        "verdict (Chat: 3 runs on 3 launches against 2 runs on 2 launches; Short: 1 run against 1 run)."
    )


def test_only_decided_or_unmeasured_changes_need_no_line() -> None:
    decided = ComparisonRow("Tuning", Figures(100.0), Figures(112.0), published=DECIDED)
    unmeasured = ComparisonRow("Validation", Figures(100.0), None)
    assert comparison_note(bare_report([decided, unmeasured])) is None
    assert "not a decision" not in render_markdown(bare_report([decided, unmeasured]))
