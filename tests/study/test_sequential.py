"""Group-sequential boundaries against published values, their error rate at any number of looks and at
unequal information (a reference launched once more than its candidate), a look not taken, the
selection-adjusted estimate and the power behind the detectable gain, each against known truth."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from perflab.study.sequential import (
    adjusted_z,
    futility_z,
    gain_at_power,
    gain_keep_probability,
    information_levels,
    keep_boundaries,
    keep_probability,
    kept_effect_mean,
    obrien_fleming_spent,
    t_boundary,
)

PAIRED = information_levels(1, 4, lead=1)  # the staged plan's design: k launches against k + 1


def test_boundaries_match_the_published_lan_demets_obrien_fleming_values() -> None:
    # five equally spaced looks, one-sided α = 0.025: gsDesign's sfLDOF upper bounds
    published = (4.8769, 3.3569, 2.6803, 2.2898, 2.0310)
    assert keep_boundaries((1.0, 2.0, 3.0, 4.0, 5.0), 0.025) == pytest.approx(published, abs=5e-4)


def test_the_information_of_a_comparison_is_that_of_its_difference_of_means() -> None:
    assert information_levels(1, 3) == pytest.approx((0.5, 1.0, 1.5))  # k against k
    assert information_levels(1, 4, lead=1) == pytest.approx(
        tuple(1 / (1 / k + 1 / (k + 1)) for k in range(1, 5))
    )


@pytest.mark.parametrize(("first", "most", "lead"), [(1, 1, 0), (1, 4, 0), (1, 4, 1), (2, 4, 1), (1, 10, 1)])
def test_a_threshold_candidate_is_kept_at_most_alpha_however_many_looks(
    first: int, most: int, lead: int
) -> None:
    levels = information_levels(first, most, lead)
    bounds = keep_boundaries(levels, 0.025)
    assert keep_probability(levels, bounds, 0.0, futility=False) == pytest.approx(0.025, abs=2e-4)
    assert keep_probability(levels, bounds, 0.0) <= 0.025  # the futility stop only lowers it


def _paths(levels: tuple[float, ...], effect: float, count: int, seed: int) -> np.ndarray:
    """Simulated scores S at each look: independent increments N(effect·ΔI, ΔI)."""
    steps = np.diff((0.0, *levels))
    rng = np.random.default_rng(seed)
    return rng.normal(effect * steps, np.sqrt(steps), size=(count, len(levels))).cumsum(axis=1)


def _outcomes(
    levels: tuple[float, ...], bounds: tuple[float, ...], scores: np.ndarray
) -> list[tuple[int, float]]:
    """(look, z) of every simulated candidate the design keeps, with the futility stop."""
    kept = []
    for path in scores:
        for look, (info, bound) in enumerate(zip(levels, bounds, strict=True)):
            z = path[look] / math.sqrt(info)
            if z > bound:
                kept.append((look, z))
                break
            if look < len(bounds) - 1 and z <= futility_z(look):
                break
    return kept


def test_the_keep_probability_agrees_with_a_seeded_simulation_of_the_looks() -> None:
    bounds = keep_boundaries(PAIRED, 0.025)
    kept = _outcomes(PAIRED, bounds, _paths(PAIRED, 1.7, 60_000, seed=7))
    assert keep_probability(PAIRED, bounds, 1.7) == pytest.approx(len(kept) / 60_000, abs=0.006)


def test_a_look_not_taken_leaves_its_alpha_to_the_later_ones() -> None:
    all_looks = keep_boundaries(PAIRED, 0.025)
    later = keep_boundaries(PAIRED[1:], 0.025, PAIRED[-1])  # the first look skipped: too few df
    assert later[0] < all_looks[1]  # what the first look would have spent is spent later
    assert keep_probability(PAIRED[1:], later, 0.0, futility=False) == pytest.approx(0.025, abs=2e-4)


def test_spending_reaches_alpha_at_the_last_look_and_nothing_before_the_first() -> None:
    assert obrien_fleming_spent(1.0, 0.025) == pytest.approx(0.025)
    assert obrien_fleming_spent(0.0, 0.025) == 0.0
    assert obrien_fleming_spent(0.25, 0.025) < obrien_fleming_spent(0.5, 0.025) < 0.025


def test_a_t_boundary_keeps_the_normal_tail() -> None:
    assert t_boundary(1.96, math.inf) == 1.96
    assert stats.t.sf(t_boundary(1.96, 4), 4) == pytest.approx(stats.norm.sf(1.96))


@pytest.mark.parametrize("effect", [0.8, 2.0])
def test_the_mean_estimate_of_a_kept_candidate_agrees_with_a_seeded_simulation(effect: float) -> None:
    bounds = keep_boundaries(PAIRED, 0.025)
    kept = _outcomes(PAIRED, bounds, _paths(PAIRED, effect, 40_000, seed=5))
    simulated = np.mean([z / math.sqrt(PAIRED[look]) for look, z in kept])
    assert kept_effect_mean(PAIRED, bounds, effect) == pytest.approx(simulated, abs=0.015)


@pytest.mark.parametrize("effect", [0.8, 1.5, 3.0])
def test_the_adjusted_estimate_removes_much_of_the_winners_curse(effect: float) -> None:
    bounds = keep_boundaries(PAIRED, 0.025)
    kept = _outcomes(PAIRED, bounds, _paths(PAIRED, effect, 3000, seed=3))
    naive = np.mean([z / math.sqrt(PAIRED[look]) for look, z in kept]) - effect
    adjusted = (
        np.mean([adjusted_z(PAIRED, bounds, look, z) / math.sqrt(PAIRED[look]) for look, z in kept]) - effect
    )
    assert naive > 0.1  # kept because it came out high
    assert abs(adjusted) < 0.6 * naive


def _ratio_keep_rate(
    bounds: tuple[float, ...], gain_pct: float, cv_pct: float, lower_is_better: bool, count: int, seed: int
) -> float:
    """How often the staged design keeps a candidate of true ``gain_pct`` when every launch's value is
    drawn with ``cv_pct`` and each look's z is a verdict's: (Ĝ − 1 %) / (cv · r̂ · √(1/k + 1/(k+1)))."""
    rng = np.random.default_rng(seed)
    sign = -1.0 if lower_is_better else 1.0
    looks = len(bounds)
    candidate = (1.0 + sign * gain_pct / 100.0) * (1.0 + cv_pct / 100.0 * rng.standard_normal((count, looks)))
    reference = 1.0 + cv_pct / 100.0 * rng.standard_normal((count, looks + 1))
    alive = np.ones(count, dtype=bool)
    kept = np.zeros(count, dtype=bool)
    for look, bound in enumerate(bounds):
        k = look + 1
        ratio = candidate[:, :k].mean(axis=1) / reference[:, : k + 1].mean(axis=1)
        gain = sign * (ratio - 1.0) * 100.0
        z = (gain - 1.0) / (cv_pct * ratio * math.sqrt(1.0 / k + 1.0 / (k + 1)))
        keep = alive & (z > bound)
        kept |= keep
        alive &= ~keep
        if look < looks - 1:
            alive &= z > futility_z(look)
    return float(kept.mean())


@pytest.mark.parametrize(("cv_pct", "lower_is_better"), [(2.24, False), (8.06, False), (8.06, True)])
def test_the_detectable_gain_is_kept_with_the_stated_power(cv_pct: float, lower_is_better: bool) -> None:
    # the gain's error grows with the ratio of the means (1 + G, or 1 − G for a fall): on a noisy host
    # the effect scaled by the spread alone (1 % + effect · cv) would be kept 69 % of the time (a fall 89 %)
    bounds = keep_boundaries(PAIRED, 0.025)
    gain = gain_at_power(PAIRED, bounds, 1.0, cv_pct, lower_is_better)
    assert gain is not None
    stated = gain_keep_probability(
        PAIRED, bounds, gain_pct=gain, min_gain_pct=1.0, cv_pct=cv_pct, lower_is_better=lower_is_better
    )
    assert stated == pytest.approx(0.8, abs=1e-4)
    simulated = _ratio_keep_rate(bounds, gain, cv_pct, lower_is_better, 40_000, seed=11)
    assert simulated == pytest.approx(0.8, abs=0.012)
    effect = optimize.brentq(lambda e: keep_probability(PAIRED, bounds, e) - 0.8, 0.0, 10.0)
    effect_only = 1.0 + effect * cv_pct  # the gain that ignores the ratio
    if cv_pct > 5:
        missed = _ratio_keep_rate(bounds, effect_only, cv_pct, lower_is_better, 40_000, seed=11)
        assert (missed > 0.85) if lower_is_better else (missed < 0.75)


@pytest.mark.parametrize(("first", "most", "lead"), [(0, 3, 0), (3, 2, 0), (1, 3, -1)])
def test_an_impossible_design_is_refused(first: int, most: int, lead: int) -> None:
    with pytest.raises(ValueError):
        information_levels(first, most, lead)
    with pytest.raises(ValueError):
        keep_boundaries((1.0, 2.0), 0.0)
