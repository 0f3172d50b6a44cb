"""Group-sequential keep boundaries: α spent over the looks, a futility stop, power, and the gain estimate
adjusted for the decision that kept it.

A candidate is judged at each **look**: first when it has ``first`` launches, then after each further
launch, up to ``most``. Every look tests the same hypothesis, "the gain is at most the minimum gain", so a
fixed 95 % test repeated at every look would keep a candidate at the threshold more often than 2.5 % of
the time (the more looks, the more often). The keep boundary therefore spends the one-sided α over the
looks with the Lan–DeMets spending function of O'Brien–Fleming type, ``α(t) = 2 − 2Φ(z_{1−α/2} / √t)``
(Lan & DeMets 1983), on the fraction ``t = n / most`` of the candidate's launches: early looks need
overwhelming evidence, the last nearly the fixed-sample boundary, and the chance of ever keeping a
threshold candidate stays at most α however many looks there are. The boundaries come from the recursive
numerical integration of Armitage, McPherson & Rowe (1969) over the independent increments of the score
``S = z·√n``.

Futility: an interim look whose statistic is at or below :data:`FUTILITY_Z` stops measuring the
candidate. The rule is non-binding: the keep boundaries are computed as if it did not exist, so stopping
early can only lower the keep rate.

With a spread estimated on ``df`` degrees of freedom, a normal boundary's tail probability is carried
over to Student's t with ``df`` (Jennison & Turnbull 2000, §11.4).

A kept candidate's measured gain is biased upward: it was kept *because* it came out high. Its published
gain subtracts that bias: the measured drift less ``E[estimate | kept] − drift`` evaluated at the
measured drift (a one-step, plug-in bias correction as in Whitehead 1986, here conditional on keeping as
for the winner's curse of Sun & Bull 2005), with the conditional mean integrated over the same looks.
The conditional maximum-likelihood estimate was not used: near the boundary its likelihood grows without
bound toward small gains, and its estimates land far below the truth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import optimize, stats

# An interim look at or below this z stops the candidate (chosen with benchmarks/study_noise.py).
FUTILITY_Z = 0.9
GRID_POINTS = 201  # points of the score's density grid at each look
TAIL_SDS = 8.0  # the grid spans the mean ± this many standard deviations
_ROOT_TWO_PI = math.sqrt(2.0 * math.pi)


def obrien_fleming_spent(fraction: float, alpha: float) -> float:
    """The one-sided α spent by ``fraction`` of the looks' information (Lan–DeMets, O'Brien–Fleming type)."""
    if fraction <= 0.0:
        return 0.0
    tail = stats.norm.isf(alpha / 2.0) / math.sqrt(min(fraction, 1.0))
    return 2.0 * float(stats.norm.sf(tail))


@dataclass(frozen=True)
class _Density:
    """The sub-density of the score on a grid, for the paths still going; weights sum to probabilities."""

    points: np.ndarray
    weights: np.ndarray

    @classmethod
    def start(cls, info: float, drift: float, low: float, high: float) -> _Density:
        """The score's density at the first look, on ``(low, high)``."""
        sd = math.sqrt(info)
        return cls._on_grid(drift * info, sd, low, high, lambda points: _normal(points, drift * info, sd))

    def advance(self, variance: float, drift: float, low: float, high: float) -> _Density:
        """The sub-density after an increment N(drift, variance), on ``(low, high)``."""
        sd = math.sqrt(variance)
        centre = float(self.points.mean()) + drift
        spread = float(np.ptp(self.points)) / 2.0 + TAIL_SDS * sd

        def density(points: np.ndarray) -> np.ndarray:
            return _normal(points[:, None], self.points[None, :] + drift, sd) @ self.weights

        return self._on_grid(centre, spread / TAIL_SDS, low, high, density)

    @classmethod
    def _on_grid(cls, centre: float, sd: float, low: float, high: float, density) -> _Density:
        low, high = max(low, centre - TAIL_SDS * sd), min(high, centre + TAIL_SDS * sd)
        if high <= low:
            return cls(np.array([low]), np.array([0.0]))
        points = np.linspace(low, high, GRID_POINTS)
        step = (high - low) / (GRID_POINTS - 1)
        trapezoid = np.full(GRID_POINTS, step)
        trapezoid[[0, -1]] = step / 2.0
        return cls(points, density(points) * trapezoid)

    def above(self, variance: float, drift: float, level: float) -> float:
        """The probability that the next look's score exceeds ``level``."""
        tail = stats.norm.sf((level - self.points - drift) / math.sqrt(variance))
        return float(tail @ self.weights)

    def mean_above(self, variance: float, drift: float, level: float) -> float:
        """E[score · 1(score > level)] at the next look (the partial expectation of a normal)."""
        sd = math.sqrt(variance)
        centre = self.points + drift
        standard = (level - centre) / sd
        partial = centre * stats.norm.sf(standard) + sd * stats.norm.pdf(standard)
        return float(partial @ self.weights)


def _normal(points: np.ndarray, mean: np.ndarray | float, sd: float) -> np.ndarray:
    return np.exp(-0.5 * ((points - mean) / sd) ** 2) / (sd * _ROOT_TWO_PI)


@lru_cache(maxsize=256)
def keep_boundaries(first: int, most: int, alpha: float) -> tuple[float, ...]:
    """The z each look (``first`` … ``most`` launches of the candidate) must exceed to keep it, spending
    one-sided ``alpha`` over the looks; computed without the futility stop (it is non-binding)."""
    if not 1 <= first <= most:
        raise ValueError(f"looks need 1 <= first <= most, got first={first}, most={most}")
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
    bounds: list[float] = []
    density: _Density | None = None
    spent = 0.0
    for launches in range(first, most + 1):
        target = obrien_fleming_spent(launches / most, alpha) - spent
        spent += target
        if density is None:
            bound = float(stats.norm.isf(target))
            density = _Density.start(launches, 0.0, -math.inf, bound * math.sqrt(launches))
        else:
            previous = density

            def crossing(
                z: float, previous: _Density = previous, launches: int = launches, target: float = target
            ) -> float:
                return previous.above(1.0, 0.0, z * math.sqrt(launches)) - target

            bound = (
                12.0 if crossing(12.0) >= 0.0 else float(optimize.brentq(crossing, -12.0, 12.0, xtol=1e-7))
            )
            density = previous.advance(1.0, 0.0, -math.inf, bound * math.sqrt(launches))
        bounds.append(bound)
    return tuple(bounds)


def keep_probability(first: int, bounds: tuple[float, ...], drift: float, *, futility: bool = True) -> float:
    """The probability that the design keeps a candidate whose z grows by ``drift`` × √launches (the
    futility stop applied at every interim look unless ``futility`` is False)."""
    kept = 0.0
    density: _Density | None = None
    last = len(bounds) - 1
    for index, bound in enumerate(bounds):
        launches = first + index
        low = FUTILITY_Z * math.sqrt(launches) if futility and index < last else -math.inf
        high = bound * math.sqrt(launches)
        if density is None:
            kept += float(stats.norm.sf((high - drift * launches) / math.sqrt(launches)))
            density = _Density.start(launches, drift, low, high)
        else:
            kept += density.above(1.0, drift, high)
            density = density.advance(1.0, drift, low, high)
    return min(kept, 1.0)


def kept_drift_mean(first: int, bounds: tuple[float, ...], drift: float) -> float:
    """E[estimated drift | kept] for a true ``drift``: the mean of ``z / √launches`` over the looks that
    keep, with the futility stop (what the measured gain of a kept candidate averages to)."""
    kept, total = 0.0, 0.0
    density: _Density | None = None
    last = len(bounds) - 1
    for index, bound in enumerate(bounds):
        launches = first + index
        low = FUTILITY_Z * math.sqrt(launches) if index < last else -math.inf
        high = bound * math.sqrt(launches)
        if density is None:
            sd = math.sqrt(launches)
            standard = (high - drift * launches) / sd
            kept += float(stats.norm.sf(standard))
            total += (
                drift * launches * float(stats.norm.sf(standard)) + sd * float(stats.norm.pdf(standard))
            ) / launches
            density = _Density.start(launches, drift, low, high)
        else:
            kept += density.above(1.0, drift, high)
            total += density.mean_above(1.0, drift, high) / launches
            density = density.advance(1.0, drift, low, high)
    return total / kept if kept > 0 else math.nan


def t_boundary(z_bound: float, df: float) -> float:
    """The normal boundary carried over to Student's t with ``df`` degrees of freedom (same tail)."""
    if math.isinf(df):
        return z_bound
    return float(stats.t.isf(stats.norm.sf(z_bound), df))


@lru_cache(maxsize=4096)
def adjusted_z(first: int, bounds: tuple[float, ...], look: int, z: float) -> float:
    """The statistic ``z`` of a candidate kept at look ``look`` (0-based) less the bias that keeping
    gives: ``z`` − √n·(E[estimate | kept] − drift) at the drift ``z`` estimates (see the module)."""
    launches = first + look
    drift = z / math.sqrt(launches)
    bias = kept_drift_mean(first, bounds, drift) - drift
    return (drift - bias) * math.sqrt(launches) if math.isfinite(bias) else z


def detectable_z(first: int, bounds: tuple[float, ...], power: float = 0.8) -> float:
    """The expected z at the last look of a candidate the design keeps with probability ``power``."""
    most = first + len(bounds) - 1

    def short(drift: float) -> float:
        return keep_probability(first, bounds, drift) - power

    drift = optimize.brentq(short, 0.0, 20.0 / math.sqrt(first), xtol=1e-6)
    return float(drift) * math.sqrt(most)
