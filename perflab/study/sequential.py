"""Group-sequential keep boundaries: α spent over the looks, a futility stop, power, and the gain estimate
adjusted for the decision that kept it.

A candidate is judged at each **look**: after its ``first``-th launch, then after each further launch, up
to ``most``. Every look tests the same hypothesis, "the gain is at most the minimum gain", so a fixed
95 % test repeated at every look would keep a candidate at the threshold more often than 2.5 % of the
time (the more looks, the more often). The keep boundary therefore spends the one-sided α over the looks
with the Lan–DeMets spending function of O'Brien–Fleming type, ``α(t) = 2 − 2Φ(z_{1−α/2} / √t)`` (Lan &
DeMets 1983), at the **information fraction** ``t`` of each look: early looks need overwhelming
evidence, the last nearly the fixed-sample boundary, and the chance of ever keeping a threshold candidate
stays at most α however many looks there are.

Information is measured in units of 1/σ² (σ: the spread of one launch's value): a comparison of ``k``
launches of the candidate against ``k + lead`` of its reference has information ``1 / (1/k + 1/(k +
lead))`` (:func:`information_levels`; the staged plan launches the reference once more than its
candidates, ``lead = 1``). A look that is not taken (too few degrees of freedom to judge) spends nothing:
its α is left for the looks that are taken, as Lan–DeMets spending allows. The boundaries come from the
recursive numerical integration of Armitage, McPherson & Rowe (1969) over the independent increments of
the score ``S = z·√I`` (Jennison & Turnbull 2000, ch. 19).

Futility: an interim look whose statistic is at or below :func:`futility_z` stops measuring the
candidate: at its first look (the least information) only an estimate half a standard error below the
minimum gain, after that one less than :data:`FUTILITY_Z` standard errors above it. The rule is
non-binding: the keep boundaries are computed as if it did not exist, so stopping early can only lower
the keep rate; it is set loose enough that a gain the design is built to detect is rarely stopped (it
costs the detectable gain's 80 % power a few points, included in :func:`keep_probability`).

With a spread estimated on ``df`` degrees of freedom, a normal boundary's tail probability is carried
over to Student's t with ``df`` (Jennison & Turnbull 2000, §11.4).

A kept candidate's measured gain is biased upward: it was kept *because* it came out high. Until
confirmation launches measure it afresh (:mod:`perflab.study.confirm`), the figure shown subtracts that
bias: the measured effect less ``E[estimate | kept] − effect`` evaluated at the measured effect (a
one-step, plug-in bias correction as in Whitehead 1986, here conditional on keeping as for the winner's
curse of Sun & Bull 2005), with the conditional mean integrated over the same looks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import optimize, stats

# An interim look after a candidate's first at or below this z stops the candidate.
FUTILITY_Z = 0.6
# At a candidate's first look (the least information) only an estimate this far below the minimum gain does.
FIRST_FUTILITY_Z = -0.5
GRID_POINTS = 201  # points of the score's density grid at each look
TAIL_SDS = 8.0  # the grid spans the mean ± this many standard deviations
_ROOT_TWO_PI = math.sqrt(2.0 * math.pi)


def information_levels(first: int, most: int, lead: int = 0) -> tuple[float, ...]:
    """The information (in units of 1/σ²) of a comparison at each look: the candidate's ``k`` launches
    (``first`` … ``most``) against ``k + lead`` of its reference."""
    if not 1 <= first <= most:
        raise ValueError(f"looks need 1 <= first <= most, got first={first}, most={most}")
    if lead < 0:
        raise ValueError(f"the reference's lead must be >= 0, got {lead}")
    return tuple(1.0 / (1.0 / k + 1.0 / (k + lead)) for k in range(first, most + 1))


def futility_z(look: int) -> float:
    """The z at or below which an interim look (0-based) stops the candidate."""
    return FIRST_FUTILITY_Z if look == 0 else FUTILITY_Z


def obrien_fleming_spent(fraction: float, alpha: float) -> float:
    """The one-sided α spent by ``fraction`` of the information (Lan–DeMets, O'Brien–Fleming type)."""
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
    def start(cls, info: float, effect: float, low: float, high: float) -> _Density:
        """The score's density at the first look, on ``(low, high)``."""
        sd = math.sqrt(info)
        return cls._on_grid(effect * info, sd, low, high, lambda points: _normal(points, effect * info, sd))

    def advance(self, variance: float, mean: float, low: float, high: float) -> _Density:
        """The sub-density after an increment N(mean, variance), on ``(low, high)``."""
        sd = math.sqrt(variance)
        centre = float(self.points.mean()) + mean
        spread = float(np.ptp(self.points)) / 2.0 + TAIL_SDS * sd

        def density(points: np.ndarray) -> np.ndarray:
            return _normal(points[:, None], self.points[None, :] + mean, sd) @ self.weights

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

    def above(self, variance: float, mean: float, level: float) -> float:
        """The probability that the next look's score exceeds ``level``."""
        tail = stats.norm.sf((level - self.points - mean) / math.sqrt(variance))
        return float(tail @ self.weights)

    def mean_above(self, variance: float, mean: float, level: float) -> float:
        """E[score · 1(score > level)] at the next look (the partial expectation of a normal)."""
        sd = math.sqrt(variance)
        centre = self.points + mean
        standard = (level - centre) / sd
        partial = centre * stats.norm.sf(standard) + sd * stats.norm.pdf(standard)
        return float(partial @ self.weights)


def _normal(points: np.ndarray, mean: np.ndarray | float, sd: float) -> np.ndarray:
    return np.exp(-0.5 * ((points - mean) / sd) ** 2) / (sd * _ROOT_TWO_PI)


def _checked(levels: tuple[float, ...]) -> None:
    if not levels or any(b <= a for a, b in zip(levels, levels[1:], strict=False)) or levels[0] <= 0:
        raise ValueError(f"information levels must be positive and increasing, got {levels}")


@lru_cache(maxsize=512)
def keep_boundaries(levels: tuple[float, ...], alpha: float, total: float | None = None) -> tuple[float, ...]:
    """The z each look at information ``levels`` must exceed to keep the candidate, spending one-sided
    ``alpha`` at the fractions ``level / total`` (``total``: the last level); computed without the
    futility stop (it is non-binding)."""
    _checked(levels)
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
    total = levels[-1] if total is None else total
    bounds: list[float] = []
    density: _Density | None = None
    spent, previous_info = 0.0, 0.0
    for info in levels:
        target = obrien_fleming_spent(info / total, alpha) - spent
        spent += target
        if density is None:
            bound = float(stats.norm.isf(target))
            density = _Density.start(info, 0.0, -math.inf, bound * math.sqrt(info))
        else:
            before, step = density, info - previous_info

            def crossing(
                z: float,
                before: _Density = before,
                info: float = info,
                step: float = step,
                target: float = target,
            ) -> float:
                return before.above(step, 0.0, z * math.sqrt(info)) - target

            bound = (
                12.0 if crossing(12.0) >= 0.0 else float(optimize.brentq(crossing, -12.0, 12.0, xtol=1e-7))
            )
            density = before.advance(step, 0.0, -math.inf, bound * math.sqrt(info))
        previous_info = info
        bounds.append(bound)
    return tuple(bounds)


def _walk(
    levels: tuple[float, ...],
    bounds: tuple[float, ...],
    effect: float,
    futility: bool,
    lows: tuple[float, ...] | None = None,
):
    """For each look: (information, the keep level of the score, the density of the paths still going
    before it, the increment's variance). ``lows``: the z of each interim look's futility stop, where it
    is not :func:`futility_z`'s."""
    density: _Density | None = None
    previous = 0.0
    last = len(bounds) - 1
    for index, (info, bound) in enumerate(zip(levels, bounds, strict=True)):
        stop = futility_z(index) if lows is None else lows[index]
        low = stop * math.sqrt(info) if futility and index < last else -math.inf
        high = bound * math.sqrt(info)
        yield info, high, density, info - previous
        step = info - previous
        density = (
            _Density.start(info, effect, low, high)
            if density is None
            else density.advance(step, effect * step, low, high)
        )
        previous = info


def keep_probability(
    levels: tuple[float, ...],
    bounds: tuple[float, ...],
    effect: float,
    *,
    futility: bool = True,
    lows: tuple[float, ...] | None = None,
) -> float:
    """The probability that the design keeps a candidate whose score grows by ``effect`` per unit of
    information (the futility stop, at ``lows`` if given, applied at every interim look unless
    ``futility`` is False)."""
    kept = 0.0
    for info, high, density, step in _walk(levels, bounds, effect, futility, lows):
        if density is None:
            kept += float(stats.norm.sf((high - effect * info) / math.sqrt(info)))
        else:
            kept += density.above(step, effect * step, high)
    return min(kept, 1.0)


def kept_effect_mean(levels: tuple[float, ...], bounds: tuple[float, ...], effect: float) -> float:
    """E[estimated effect | kept] for a true ``effect``: the mean of ``z / √I`` over the looks that keep,
    with the futility stop (what the measured gain of a kept candidate averages to)."""
    kept, total = 0.0, 0.0
    for info, high, density, step in _walk(levels, bounds, effect, True):
        if density is None:
            sd = math.sqrt(info)
            standard = (high - effect * info) / sd
            tail = float(stats.norm.sf(standard))
            kept += tail
            total += (effect * info * tail + sd * float(stats.norm.pdf(standard))) / info
        else:
            kept += density.above(step, effect * step, high)
            total += density.mean_above(step, effect * step, high) / info
    return total / kept if kept > 0 else math.nan


@lru_cache(maxsize=4096)
def t_boundary(z_bound: float, df: float) -> float:
    """The normal boundary carried over to Student's t with ``df`` degrees of freedom (same tail)."""
    if math.isinf(df):
        return z_bound
    return float(stats.t.isf(stats.norm.sf(z_bound), df))


@lru_cache(maxsize=4096)
def adjusted_z(levels: tuple[float, ...], bounds: tuple[float, ...], look: int, z: float) -> float:
    """The statistic ``z`` of a candidate kept at look ``look`` (0-based) less the bias that keeping
    gives: ``z`` − √I·(E[estimate | kept] − effect) at the effect ``z`` estimates (see the module)."""
    info = levels[look]
    effect = z / math.sqrt(info)
    bias = kept_effect_mean(levels, bounds, effect) - effect
    return (effect - bias) * math.sqrt(info) if math.isfinite(bias) else z


def gain_keep_probability(
    levels: tuple[float, ...],
    bounds: tuple[float, ...],
    *,
    gain_pct: float,
    min_gain_pct: float,
    cv_pct: float,
    lower_is_better: bool = False,
) -> float:
    """The probability that the design keeps a candidate whose true gain is ``gain_pct`` on a launch CV
    of ``cv_pct``, its statistic being a verdict's: z = (Ĝ − min gain) / (cv · r̂ / √I), r̂ the ratio of
    the means (:func:`perflab.study.verdict.judge`). The standard error grows with r̂, so each look's
    keep and futility levels of z are carried over to levels of r̂ (normal, mean r, sd r·cv/√I), then to
    the standard score of r̂ in the direction of a gain, and walked as a score without drift."""
    if cv_pct <= 0.0:  # a host without noise keeps every gain above the minimum, and nothing else
        return 1.0 if gain_pct > min_gain_pct else 0.0
    sign = -1.0 if lower_is_better else 1.0
    ratio = 1.0 + sign * gain_pct / 100.0
    floor = 1.0 + sign * min_gain_pct / 100.0

    def level(z: float, info: float) -> float:
        """The standard score of r̂ at which a look's z equals ``z``."""
        width = cv_pct / 100.0 / math.sqrt(info)  # r̂'s relative sd at this look
        scale = 1.0 - sign * z * width  # z > level ⟺ sign·(r̂·scale − floor) > 0
        if scale <= 0.0:
            return math.inf if sign > 0 else -math.inf
        return sign * (floor / (ratio * scale) - 1.0) / width

    highs = tuple(level(bound, info) for bound, info in zip(bounds, levels, strict=True))
    lows = tuple(level(futility_z(index), info) for index, info in enumerate(levels))
    return keep_probability(levels, highs, 0.0, lows=lows)


@lru_cache(maxsize=1024)
def gain_at_power(
    levels: tuple[float, ...],
    bounds: tuple[float, ...],
    min_gain_pct: float,
    cv_pct: float,
    lower_is_better: bool = False,
    power: float = 0.8,
) -> float | None:
    """The true gain, in %, the design keeps with probability ``power`` at a launch CV of ``cv_pct``
    (:func:`gain_keep_probability`); None where no gain reaches it (a fall can be at most 100 %)."""

    def short(gain_pct: float) -> float:
        return (
            gain_keep_probability(
                levels,
                bounds,
                gain_pct=gain_pct,
                min_gain_pct=min_gain_pct,
                cv_pct=cv_pct,
                lower_is_better=lower_is_better,
            )
            - power
        )

    if cv_pct <= 0.0:
        return min_gain_pct
    low = min_gain_pct
    high = 99.999 if lower_is_better else min_gain_pct + 10.0 * cv_pct + 1.0
    while short(high) < 0.0:
        if lower_is_better or high > 1e6:
            return None
        high *= 2.0
    if short(low) >= 0.0:
        return low
    return float(optimize.brentq(short, low, high, xtol=1e-6))
