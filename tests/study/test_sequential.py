"""Group-sequential boundaries against published values, their error rate at any number of looks, the
selection-adjusted estimate and the power behind the detectable gain, each against known truth."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from perflab.study.sequential import (
    FUTILITY_Z,
    adjusted_z,
    detectable_z,
    keep_boundaries,
    keep_probability,
    kept_drift_mean,
    obrien_fleming_spent,
    t_boundary,
)


def test_boundaries_match_the_published_lan_demets_obrien_fleming_values() -> None:
    # five equally spaced looks, one-sided α = 0.025: gsDesign's sfLDOF upper bounds
    published = (4.8769, 3.3569, 2.6803, 2.2898, 2.0310)
    assert keep_boundaries(1, 5, 0.025) == pytest.approx(published, abs=5e-4)


@pytest.mark.parametrize("most", [1, 2, 4, 7, 10])
def test_a_threshold_candidate_is_kept_at_most_alpha_however_many_looks(most: int) -> None:
    bounds = keep_boundaries(1, most, 0.025)
    assert keep_probability(1, bounds, 0.0, futility=False) == pytest.approx(0.025, abs=2e-4)
    assert keep_probability(1, bounds, 0.0) <= 0.025  # the futility stop only lowers it


def test_the_keep_probability_agrees_with_a_seeded_simulation_of_the_looks() -> None:
    first, most, drift = 1, 4, 1.2
    bounds = keep_boundaries(first, most, 0.025)
    rng = np.random.default_rng(7)
    paths = rng.normal(drift, 1.0, size=(200_000, most)).cumsum(axis=1)  # score after each launch
    kept = np.zeros(len(paths), dtype=bool)
    going = np.ones(len(paths), dtype=bool)
    for look, bound in enumerate(bounds):
        launches = first + look
        z = paths[:, launches - 1] / math.sqrt(launches)
        crossed = going & (z > bound)
        kept |= crossed
        going &= ~crossed
        if look < len(bounds) - 1:
            going &= z > FUTILITY_Z
    assert keep_probability(first, bounds, drift) == pytest.approx(kept.mean(), abs=0.004)


def test_spending_reaches_alpha_at_the_last_look_and_nothing_before_the_first() -> None:
    assert obrien_fleming_spent(1.0, 0.025) == pytest.approx(0.025)
    assert obrien_fleming_spent(0.0, 0.025) == 0.0
    assert obrien_fleming_spent(0.25, 0.025) < obrien_fleming_spent(0.5, 0.025) < 0.025


def test_a_t_boundary_keeps_the_normal_tail() -> None:
    assert t_boundary(1.96, math.inf) == 1.96
    assert stats.t.sf(t_boundary(1.96, 4), 4) == pytest.approx(stats.norm.sf(1.96))


def _kept_estimates(first: int, most: int, drift: float, paths: int, seed: int) -> list[tuple[int, float]]:
    """(look, z) of every simulated candidate the design keeps, with the futility stop."""
    bounds = keep_boundaries(first, most, 0.025)
    rng = np.random.default_rng(seed)
    kept = []
    for path in rng.normal(drift, 1.0, size=(paths, most)).cumsum(axis=1):
        for look, bound in enumerate(bounds):
            launches = first + look
            z = path[launches - 1] / math.sqrt(launches)
            if z > bound:
                kept.append((look, z))
                break
            if look < len(bounds) - 1 and z <= FUTILITY_Z:
                break
    return kept


@pytest.mark.parametrize("drift", [0.6, 1.5])
def test_the_mean_estimate_of_a_kept_candidate_agrees_with_a_seeded_simulation(drift: float) -> None:
    kept = _kept_estimates(1, 4, drift, 40_000, seed=5)
    simulated = np.mean([z / math.sqrt(1 + look) for look, z in kept])
    assert kept_drift_mean(1, keep_boundaries(1, 4, 0.025), drift) == pytest.approx(simulated, abs=0.01)


@pytest.mark.parametrize("drift", [0.6, 1.0, 2.0])
def test_the_adjusted_estimate_removes_much_of_the_winners_curse(drift: float) -> None:
    bounds = keep_boundaries(1, 4, 0.025)
    kept = _kept_estimates(1, 4, drift, 1500, seed=3)
    naive = np.mean([z / math.sqrt(1 + look) for look, z in kept]) - drift
    adjusted = np.mean([adjusted_z(1, bounds, look, z) / math.sqrt(1 + look) for look, z in kept]) - drift
    assert naive > 0.2  # kept because it came out high
    assert abs(adjusted) < 0.6 * naive  # most of it where the design has power (drift 2: almost all)


def test_the_detectable_z_is_kept_with_the_stated_power() -> None:
    bounds = keep_boundaries(1, 4, 0.025)
    z = detectable_z(1, bounds, 0.8)
    assert keep_probability(1, bounds, z / math.sqrt(4)) == pytest.approx(0.8, abs=1e-4)


@pytest.mark.parametrize(("first", "most", "alpha"), [(0, 3, 0.025), (3, 2, 0.025), (1, 3, 0.0)])
def test_an_impossible_design_is_refused(first: int, most: int, alpha: float) -> None:
    with pytest.raises(ValueError):
        keep_boundaries(first, most, alpha)
