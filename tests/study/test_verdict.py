"""Verdicts with confidence: the sequential look, its repeated interval, futility, noise unknown, no
interval from too few degrees of freedom, Holm's shares, the published figure before and after its
confirmation, the stored form; and the study's spread with a reused one pooled only where today's
launches show it is not quieter."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from perflab.study.noise import REUSE_MARGIN, REUSE_TEST_ALPHA, ReusedSpread, estimate_spread, study_spread
from perflab.study.sequential import futility_z, information_levels, keep_boundaries, t_boundary
from perflab.study.verdict import MIN_DF, Verdict, detectable_gain_pct, holm_shares, judge, pooled_cv

KNOWN = {"higher_is_better": True, "min_gain_pct": 1.0, "cv_pct": 2.0, "df": 8.0, "first": 1, "most": 4}


def test_gain_and_interval_follow_the_looks_boundary_on_the_spread() -> None:
    candidate, reference = [104.0, 106.0], [100.0, 99.0, 101.0]
    verdict = judge(candidate, reference, **KNOWN)
    ratio = 105.0 / 100.0
    levels = information_levels(1, 4, lead=1)  # the reference one launch ahead of the candidate
    bound = t_boundary(keep_boundaries(levels, 0.025)[1], 8.0)  # the second look
    half_width = bound * 2.0 * ratio * math.sqrt(1 / 2 + 1 / 3)
    assert verdict.gain_pct == pytest.approx(5.0)
    assert verdict.half_width_pct == pytest.approx(half_width)
    assert (verdict.look, verdict.looks) == (2, 4)
    assert verdict.outcome == ("better" if 5.0 - half_width > 1.0 else "undecided")
    assert verdict.text() == f"+5.0 % ± {half_width:.1f} %, 95 %, 2 vs 3"


def test_a_clear_gain_is_kept_and_published_adjusted_until_fresh_launches_confirm_it() -> None:
    verdict = judge([112.0, 111.0, 113.0], [100.0, 101.0, 99.0], **KNOWN)
    assert verdict.outcome == "better"
    assert verdict.adjusted_gain_pct is not None and 1.0 < verdict.adjusted_gain_pct < verdict.gain_pct
    assert verdict.published_gain_pct == verdict.adjusted_gain_pct
    assert verdict.published_half_width_pct == verdict.half_width_pct
    assert verdict.published_text() == (
        f"{verdict.adjusted_gain_pct:+.1f} % adjusted for selection, to be confirmed on fresh launches "
        f"(measured {verdict.text()})"
    )
    confirmed = verdict.with_confirmation(9.5, 4.2, (1, 1))
    assert (confirmed.outcome, confirmed.gain_pct) == (verdict.outcome, verdict.gain_pct)  # it stands
    assert (confirmed.published_gain_pct, confirmed.published_half_width_pct) == (9.5, 4.2)
    assert (
        confirmed.published_text() == f"+9.5 % ± 4.2 % on fresh launches (1 vs 1), kept at {verdict.text()}"
    )


def test_lower_is_better_counts_a_drop_as_a_gain() -> None:
    verdict = judge([90.0, 91.0], [100.0, 101.0], **{**KNOWN, "higher_is_better": False})
    assert verdict.gain_pct == pytest.approx((1 - 90.5 / 100.5) * 100)
    assert verdict.outcome == "better"


def test_without_a_spread_it_measures_again_and_at_the_last_look_says_noise_unknown() -> None:
    unknown = {**KNOWN, "cv_pct": None, "df": 0.0}
    first = judge([103.0], [100.0], **unknown)
    assert first.outcome == "undecided" and math.isinf(first.half_width_pct)
    last = judge([103.0], [100.0], **unknown, final=True)
    assert last.outcome == "noise_unknown" and last.adjusted_gain_pct is None
    assert last.text() == "+3.0 %, one measurement, noise unknown"
    assert last.outcome_text() == "one measurement, noise unknown"


def test_an_estimate_too_weak_to_reach_the_bar_stops_for_futility() -> None:
    se = 2.0 * math.sqrt(2)
    value = 100.0 * (1 + (1.0 + (futility_z(0) - 0.3) * se) / 100)  # z just under the first look's bound
    verdict = judge([value], [100.0], **{**KNOWN, "cv_pct": 2.0 * 100 / value})
    assert verdict.outcome == "within_noise" and verdict.futility
    assert verdict.outcome_text().startswith("within noise (stopped at look 1 of 4")


def test_a_close_call_goes_on_until_the_last_look() -> None:
    assert judge([104.5], [100.0], **KNOWN).outcome == "undecided"
    assert judge([104.5] * 4, [100.0] * 4, **KNOWN).outcome in ("within_noise", "better")
    last = judge([102.0] * 4, [100.0] * 4, **KNOWN)
    assert last.outcome == "within_noise" and not last.futility


def test_clearly_worse_is_not_better() -> None:
    assert judge([90.0, 90.5], [100.0, 100.5], **KNOWN).outcome == "not_better"


def test_holm_shares_grow_as_candidates_are_kept() -> None:
    assert holm_shares(0, 3) == pytest.approx(1 / 3)
    assert holm_shares(1, 3) == pytest.approx(1 / 2)
    assert holm_shares(0, 0) == 1.0
    # a smaller share needs more evidence: a wider interval at the same look
    full = judge([104.0], [100.0, 100.0], **KNOWN)
    third = judge([104.0], [100.0, 100.0], **KNOWN, alpha_share=1 / 3)
    assert third.half_width_pct > full.half_width_pct


def test_no_interval_is_given_from_a_spread_on_too_few_degrees_of_freedom() -> None:
    thin = {**KNOWN, "df": MIN_DF - 1.0, "spread_launches": 3}
    early = judge([112.0], [100.0, 101.0], **thin)
    assert early.outcome == "undecided" and math.isinf(early.half_width_pct)
    assert early.text() == "+11.4 %, no verdict yet: the spread rests on 3 launches"
    assert (
        "±" not in early.text() and early.outcome_text() == "no verdict yet: the spread rests on 3 launches"
    )
    last = judge([112.0], [100.0, 101.0], **thin, final=True)
    assert last.outcome == "noise_unknown" and last.adjusted_gain_pct is None  # nothing kept on it
    assert judge([112.0], [100.0], **{**thin, "spread_launches": 1}).text().endswith("rests on 1 launch")
    assert judge([112.0], [100.0, 101.0], **{**KNOWN, "df": float(MIN_DF)}).half_width_pct < math.inf


def test_the_stored_form_reads_back() -> None:
    for verdict in (
        judge([103.0], [100.0], **{**KNOWN, "cv_pct": None, "df": 0.0}),
        judge([112.0, 111.0, 113.0], [100.0, 101.0, 99.0], **KNOWN),
        judge([112.0, 111.0, 113.0], [100.0, 101.0, 99.0], **KNOWN).with_confirmation(10.0, 5.0, (1, 1)),
        judge([112.0], [100.0], **{**KNOWN, "df": 1.0, "spread_launches": 2}),
    ):
        stored = verdict.to_dict()
        assert stored["text"] == verdict.text()
        assert Verdict.from_dict(stored) == verdict


@pytest.mark.parametrize("values", [[], [0.0], [float("nan")]])
def test_bad_values_are_refused_with_a_reason(values: list[float]) -> None:
    with pytest.raises(ValueError, match="candidate"):
        judge(values, [1.0], **KNOWN)


def test_the_detectable_gain_grows_with_the_spread() -> None:
    quiet = detectable_gain_pct(min_gain_pct=1.0, cv_pct=2.0, df=8.0)
    loud = detectable_gain_pct(min_gain_pct=1.0, cv_pct=6.0, df=8.0)
    assert 1.0 < quiet < loud
    assert detectable_gain_pct(min_gain_pct=1.0, cv_pct=None, df=0.0) is None
    assert detectable_gain_pct(min_gain_pct=1.0, cv_pct=0.0, df=8.0) == 1.0  # a host without noise


@pytest.mark.parametrize("lower_is_better", [False, True])
def test_the_detectable_gain_of_a_noisy_host_is_kept_with_the_stated_power(lower_is_better: bool) -> None:
    # one look at 4 launches against 5 on a known 8 % spread: a gain's error grows with the ratio of the
    # means (1 + G for throughput, 1 − G for an objective that falls), so the stated gain must allow
    # for it, or a noisy host keeps it well under (or over) 4 times in 5
    design = {"min_gain_pct": 1.0, "cv_pct": 8.0, "df": math.inf, "first": 4, "most": 4}
    stated = detectable_gain_pct(**design, lower_is_better=lower_is_better)
    assert stated is not None
    sign = -1.0 if lower_is_better else 1.0
    first_order = 1.0 + (stated - 1.0) / (1.0 + sign * stated / 100.0)  # the gain at the ratio 1
    rng = np.random.default_rng(7)

    def keep_rate(gain_pct: float, studies: int = 4000) -> float:
        kept = 0
        for _ in range(studies):
            reference = 100.0 * (1.0 + 0.08 * rng.standard_normal(5))
            candidate = 100.0 * (1.0 + sign * gain_pct / 100.0) * (1.0 + 0.08 * rng.standard_normal(4))
            verdict = judge(candidate, reference, higher_is_better=not lower_is_better, **design)
            kept += verdict.outcome == "better"
        return kept / studies

    assert keep_rate(stated) == pytest.approx(0.8, abs=0.025)
    missed = keep_rate(first_order)
    assert missed < 0.75 if not lower_is_better else missed > 0.85


def test_the_study_spread_pools_every_configuration_measured_twice() -> None:
    groups = [[100.0, 102.0], [110.0, 108.0, 109.0], [95.0]]
    spread = study_spread(groups)
    cv, df = pooled_cv(groups)
    assert (spread.cv_pct, spread.df, spread.configurations) == (pytest.approx(cv * 100), 3, 2)
    assert spread.reuse == "not offered" and spread.known
    assert not study_spread([[100.0], [101.0]]).known


def test_a_reused_spread_that_today_agrees_with_is_pooled_by_degrees_of_freedom() -> None:
    today = [[100.0, 102.0, 101.0, 99.0], [110.0, 108.0, 109.5, 111.0], [95.0, 96.0, 94.5, 95.5]]
    measured, df = pooled_cv(today)
    reused = ReusedSpread(cv_pct=measured * 120, df=20, study_id=4, measured_at="2026-11-01T10:00:00+00:00")
    spread = study_spread(today, reused)
    assert spread.reuse == "pooled" and spread.df == df + 20
    assert spread.cv_pct == pytest.approx(
        math.sqrt((df * (measured * 100) ** 2 + 20 * (measured * 120) ** 2) / (df + 20))
    )
    assert "reused" in spread.text() and "study 4, measured 2026-11-01" in spread.text()


def test_a_reused_spread_is_refused_until_todays_launches_can_show_it_is_not_quieter() -> None:
    # one degree of freedom cannot bound today's spread: even an identical reused one is refused
    one = [[100.0, 102.0]]
    same = ReusedSpread(cv_pct=pooled_cv(one)[0] * 100, df=20, study_id=2)
    assert study_spread(one, same).reuse == "refused"
    # the refusal is the F distribution's: today's CV over the reused one, upper 90 % bound above 1.5
    today = [[100.0, 106.0], [110.0, 103.0], [95.0, 101.0]]
    measured, df = pooled_cv(today)
    quieter = ReusedSpread(cv_pct=measured * 100 / 3, df=20, study_id=2)
    spread = study_spread(today, quieter)
    bound = math.sqrt(9.0 / stats.f.ppf(REUSE_TEST_ALPHA, df, 20))
    assert bound > REUSE_MARGIN
    assert spread.reuse == "refused" and spread.cv_pct == pytest.approx(measured * 100)
    assert spread.reuse_reason == (
        f"today's launches cannot show they vary less than 1.5× its CV (today {measured * 100:.1f} % on "
        f"{df} df; upper 90 % bound {bound:.2f}×)"
    )


def test_a_reused_spread_is_not_used_without_todays_launches_to_check_it() -> None:
    spread = study_spread([[100.0]], ReusedSpread(cv_pct=2.0, df=10, study_id=2))
    assert spread.reuse == "refused" and not spread.known


def test_run_and_launch_variation_are_split_for_the_baseline() -> None:
    # two launches, two runs each: within-launch deviations ±1 around 99 and 101 (grand mean 100)
    spread = estimate_spread([[98.0, 100.0], [100.0, 102.0]])
    assert spread is not None
    within = ((1 / 100) ** 2 * 4) / 2  # four deviations of 1 % over 2 degrees of freedom
    between = 2 * ((0.99 - 1) ** 2 + (1.01 - 1) ** 2) / 1
    assert spread.run_cv_pct == pytest.approx(math.sqrt(within) * 100)
    assert spread.launch_cv_pct == pytest.approx(math.sqrt((between - within) / 2) * 100)
    assert estimate_spread([[5.0]]) is None


def test_a_verdict_on_a_spread_stated_as_known_is_stored_as_strict_json() -> None:
    # a search stating noise_cv_pct gives a spread on infinite degrees of freedom; PostgreSQL's JSON
    # takes no Infinity, so the stored verdict carries None and reads back with the same text
    found = Verdict("better", 12.0, math.inf, 0.95, 2, 2, df=math.inf, spread_launches=None)
    stored = json.loads(json.dumps(found.to_dict(), allow_nan=False))
    assert stored["df"] is None and stored["half_width_pct"] is None
    assert Verdict.from_dict(stored).text() == found.text()
