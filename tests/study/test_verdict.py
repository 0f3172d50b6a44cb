"""Verdicts with confidence: Student t on launch means, pooled spread, the A B A B and noise outcomes."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from perflab.study.noise import estimate_spread
from perflab.study.verdict import Verdict, judge


def test_gain_and_half_width_follow_student_t_on_the_pooled_cv() -> None:
    candidate, reference = [104.0, 106.0, 105.0], [100.0, 99.0, 101.0]
    verdict = judge(candidate, reference, higher_is_better=True, min_gain_pct=1.0)
    ratio = 105.0 / 100.0
    cv = math.sqrt(
        (((104 / 105 - 1) ** 2 + (106 / 105 - 1) ** 2) + ((99 / 100 - 1) ** 2 + (101 / 100 - 1) ** 2)) / 4
    )
    expected = stats.t.ppf(0.975, 4) * cv * ratio * math.sqrt(2 / 3) * 100
    assert verdict.gain_pct == pytest.approx(5.0)
    assert verdict.half_width_pct == pytest.approx(expected)
    assert verdict.outcome == "better"
    assert verdict.text() == f"+5.0 % ± {expected:.1f} %, 95 %, 3 vs 3"


def test_lower_is_better_counts_a_drop_as_a_gain() -> None:
    verdict = judge([90.0, 91.0], [100.0, 101.0], higher_is_better=False, min_gain_pct=1.0)
    assert verdict.gain_pct == pytest.approx((1 - 90.5 / 100.5) * 100)
    assert verdict.outcome == "better"


def test_one_launch_each_without_a_spread_is_undecided_then_within_noise() -> None:
    first = judge([103.0], [100.0], higher_is_better=True, min_gain_pct=1.0)
    assert first.outcome == "undecided" and math.isinf(first.half_width_pct)
    assert first.text() == "+3.0 % ± ? (no spread yet), 95 %, 1 vs 1"
    assert judge([103.0], [100.0], higher_is_better=True, min_gain_pct=1.0, max_n=1).outcome == "within_noise"


def test_a_known_spread_gives_a_first_launch_an_interval() -> None:
    verdict = judge([110.0], [100.0], higher_is_better=True, min_gain_pct=1.0, prior_cv_pct=2.0)
    assert verdict.half_width_pct == pytest.approx(stats.norm.ppf(0.975) * 0.02 * 1.1 * math.sqrt(2) * 100)
    assert verdict.outcome == "better"


def test_straddling_calls_are_measured_again_until_max_n() -> None:
    kwargs = dict(higher_is_better=True, min_gain_pct=1.0, prior_cv_pct=2.0, max_n=3)
    assert judge([102.5], [100.0], **kwargs).outcome == "undecided"
    assert judge([102.5, 102.5, 102.5], [100.0, 100.0, 100.0], **kwargs).outcome == "within_noise"
    # an estimate at or below the threshold is not worth measuring again
    below = judge([100.5], [100.0], **kwargs)
    assert (
        below.outcome == "within_noise"
        and below.outcome_text() == f"within noise (±{below.half_width_pct:.1f} %)"
    )


def test_clearly_worse_is_not_better() -> None:
    verdict = judge([90.0, 90.5], [100.0, 100.5], higher_is_better=True, min_gain_pct=1.0)
    assert verdict.outcome == "not_better"


def test_prior_df_pools_the_earlier_spread_with_the_sample() -> None:
    verdict = judge(
        [105.0, 105.0], [100.0, 100.0], higher_is_better=True, min_gain_pct=1.0, prior_cv_pct=2.0, prior_df=8
    )
    pooled = math.sqrt(8 * 0.02**2 / 10)
    expected = stats.t.ppf(0.975, 10) * pooled * 1.05 * math.sqrt(1.0) * 100
    assert verdict.half_width_pct == pytest.approx(expected)


def test_the_stored_form_reads_back() -> None:
    verdict = judge([103.0], [100.0], higher_is_better=True, min_gain_pct=1.0)
    stored = verdict.to_dict()
    assert stored["half_width_pct"] is None and stored["text"] == verdict.text()
    assert Verdict.from_dict(stored) == verdict


@pytest.mark.parametrize("values", [[], [0.0], [float("nan")]])
def test_bad_values_are_refused_with_a_reason(values: list[float]) -> None:
    with pytest.raises(ValueError, match="candidate"):
        judge(values, [1.0], higher_is_better=True, min_gain_pct=1.0)


def test_spread_splits_run_and_launch_variation() -> None:
    # two launches, two runs each: within-launch deviations ±1 around 99 and 101 (grand mean 100)
    spread = estimate_spread([[98.0, 100.0], [100.0, 102.0]])
    assert spread is not None
    within = ((1 / 100) ** 2 * 4) / 2  # four deviations of 1 % over 2 degrees of freedom
    between = 2 * ((0.99 - 1) ** 2 + (1.01 - 1) ** 2) / 1
    assert spread.run_cv_pct == pytest.approx(math.sqrt(within) * 100)
    assert spread.launch_cv_pct == pytest.approx(math.sqrt((between - within) / 2) * 100)
    assert spread.per_launch_cv_pct(2) == pytest.approx(
        math.sqrt(spread.launch_cv_pct**2 + spread.run_cv_pct**2 / 2)
    )
    assert (
        spread.text()
        == f"run CV {spread.run_cv_pct:.1f} %, launch CV {spread.launch_cv_pct:.1f} % (2 launches, 4 runs)"
    )
    assert estimate_spread([[5.0]]) is None
