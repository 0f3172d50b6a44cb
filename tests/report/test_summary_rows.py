"""The Summary of Optimization Options against the recommendation it leads to
(:func:`perflab.report.summary.summary_rows`): the last kept winner is the recommendation, so its row
shows the figure the recommendation publishes over the baseline, whether its stage kept it by a decision
on the objective or because it alone met the SLOs (no gain of its own was decided then)."""

from __future__ import annotations

import pytest

from perflab.report.model import CandidateSection, StageSection
from perflab.report.published import published_gain, recommendation_gain
from perflab.report.summary import summary_rows
from perflab.study.verdict import Verdict

BASELINE = CandidateSection("baseline", "vllm serve m", (), engine="vllm", decision="baseline", value=100.0)
# the recommendation's verdict on its fresh confirmation launches: −37.4 %, where the means differ by −37.8 %
CONFIRMED = Verdict("better", -37.8, 3.0, 0.95, 3, 3, df=4.0, spread_launches=6).with_confirmation(
    -37.4, 2.5, (2, 2)
)


def _stage(index: int, name: str, value: float, verdict: Verdict | None) -> StageSection:
    winner = CandidateSection(
        f"c{index}", "vllm serve m", (), engine="vllm", decision="winner", value=value, verdict=verdict
    )
    return StageSection(index, name, (winner,), winner=winner.label)


def test_a_winner_kept_because_it_alone_met_the_slos_shows_the_recommendations_figure() -> None:
    stages = [_stage(1, "Batching", 62.2, None)]
    recommendation = recommendation_gain(CONFIRMED, [None])
    assert recommendation == published_gain(CONFIRMED)
    [row] = summary_rows(BASELINE, stages, lower_is_better=True, recommendation=recommendation)
    # the same pair, baseline and recommendation, in both columns: one figure, not the means' −37.8 %
    assert row.versus_baseline == row.improvement == recommendation
    assert row.versus_baseline.change == pytest.approx(-0.374)


def test_after_a_decided_stage_the_last_kept_winner_shows_the_recommendations_figure() -> None:
    decided = Verdict("better", 12.0, 4.0, 0.95, 3, 3, adjusted_gain_pct=11.0, df=4.0, spread_launches=6)
    stages = [_stage(1, "Batching", 112.0, decided), _stage(2, "Chunking", 70.0, None)]
    # two kept stages: the recommendation's own verdict, not the first stage's decision
    recommendation = recommendation_gain(CONFIRMED, [decided, None])
    assert recommendation == published_gain(CONFIRMED)
    first, last = summary_rows(BASELINE, stages, recommendation=recommendation)
    assert first.improvement == first.versus_baseline == published_gain(decided)
    assert last.versus_baseline == recommendation
    # its own column stays its gain against the best before its stage (70 ÷ 112 − 1)
    assert last.improvement.change == pytest.approx(70.0 / 112.0 - 1.0)
