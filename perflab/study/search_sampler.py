"""The search's sampler for one objective: Gaussian-process Bayesian optimization under constraints.

A search launches a handful of configurations of a finite space, and its SLOs often leave only a small
part of the space feasible (a tight TPOT limit met by a few layouts at small batches). Tree-structured
Parzen estimators need many trials to find such a region; a Gaussian process shares what each launch
showed with its neighbours from the start. :class:`ConstrainedGPSampler` is an Optuna sampler that
models, from the trials told so far:

- the objective (its logarithm, so gains are relative) where a trial measured it, and where a pruned
  trial screened it (its screening, times the median ratio of full value to screening over the trials
  that have both: the model learns where the space is poor, not only where it earned a full run), and
- the constraint: ``log(1 + violation)`` of every told trial (the worst SLO's excess as a fraction of
  its limit, from :mod:`perflab.study.search`; an engine that could not start the configuration counts
  as 1, twice the limit), negative where every SLO is met,

each with a Gaussian process (Matérn 5/2 kernel with one length scale per knob, fitted by maximum
marginal likelihood with SciPy's L-BFGS-B; Rasmussen & Williams 2006, ch. 2 and 5), and proposes the
untried point of the space with the largest **expected improvement times the probability of
feasibility** (Gardner et al., *Bayesian optimization with inequality constraints*, ICML 2014; Schonlau,
Welch & Jones 1998); while nothing feasible has been measured, the point most likely to be feasible
(a random one while every trial failed alike). Knobs enter as coordinates in [0, 1]: an integer or
ordered knob by its position (a log range on its logarithm), a categorical one as one-hot
coordinates, an embedded one (the layouts: one axis per degree of parallelism) by its row of
coordinates. The first ``startup`` trials are drawn at random.

Deterministic: the same told trials and seed give the same proposal, so a search rebuilt from its
stored trials proposes what an uninterrupted one would have.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, IntDistribution
from optuna.samplers import BaseSampler, RandomSampler
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState
from scipy import optimize, stats
from threadpoolctl import ThreadpoolController

# A trial's user attribute: whether its objective value was measured (a configuration that did not run is
# told a stand-in value that the objective's model must not learn from).
MEASURED = "measured"
# Spaces larger than this are searched over this many points drawn from them (seeded).
MAX_POINTS = 4096
# Bounds of the fitted hyperparameters (log scale): length scales in units of a knob's range, the
# observation noise as a fraction of the standardized targets' variance.
LENGTH_BOUNDS = (math.log(0.05), math.log(20.0))
NOISE_BOUNDS = (math.log(1e-6), math.log(0.5))
_ROOT_FIVE = math.sqrt(5.0)
# Per knob, the coordinates of each of its integer positions, where a knob's values are not points on
# one line (layouts of several degrees of parallelism: ``SearchSpec.embeddings``).
Embeddings = Mapping[str, Sequence[Sequence[float]]]
_THREADS = ThreadpoolController()


def _coordinates(
    distributions: dict[str, BaseDistribution], embeddings: Embeddings, params: dict[str, Any]
) -> list[float]:
    """A point's coordinates in [0, 1] (one-hot for a categorical knob, its row for an embedded one)."""
    found: list[float] = []
    for name, distribution in distributions.items():
        value = params[name]
        if name in embeddings:
            found.extend(embeddings[name][value - distribution.low])  # type: ignore[attr-defined]
        elif isinstance(distribution, IntDistribution):
            low, high = distribution.low, distribution.high
            if distribution.log:
                low, high, value = math.log(low), math.log(high), math.log(value)
            found.append((value - low) / (high - low) if high > low else 0.0)
        else:
            choices = distribution.choices  # type: ignore[attr-defined]
            found.extend(1.0 / math.sqrt(2.0) if choice == value else 0.0 for choice in choices)
    return found


def space_points(distributions: dict[str, BaseDistribution], seed: int) -> list[dict[str, Any]]:
    """Every point of the space (as the sampler sees it), or :data:`MAX_POINTS` of them drawn at random
    from ``seed`` when it is larger."""
    rng = np.random.default_rng(seed)
    axes: list[list[Any]] = []
    for distribution in distributions.values():
        if isinstance(distribution, IntDistribution):
            axes.append(list(range(distribution.low, distribution.high + 1, distribution.step)))
        else:
            axes.append(list(distribution.choices))  # type: ignore[attr-defined]
    names = list(distributions)
    if math.prod(len(axis) for axis in axes) <= MAX_POINTS:
        return [dict(zip(names, values, strict=True)) for values in itertools.product(*axes)]
    return [
        {name: axis[int(rng.integers(len(axis)))] for name, axis in zip(names, axes, strict=True)}
        for _ in range(MAX_POINTS)
    ]


def _matern(a: np.ndarray, b: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The Matérn 5/2 kernel between the rows of ``a`` and ``b``, with per-coordinate length scales."""
    distance = np.sqrt(np.maximum((((a[:, None, :] - b[None, :, :]) / lengths) ** 2).sum(-1), 0.0))
    scaled = _ROOT_FIVE * distance
    return (1.0 + scaled + scaled**2 / 3.0) * np.exp(-scaled)


class _Process:
    """A Gaussian process fitted to targets ``y`` at points ``x`` (standardized; noise fitted)."""

    def __init__(self, x: np.ndarray, y: np.ndarray, groups: Sequence[slice]) -> None:
        self.x = x
        self.mean = float(y.mean())
        self.scale = float(y.std()) or 1.0
        self.y = (y - self.mean) / self.scale
        self.groups = groups
        start = np.array([0.0] * len(groups) + [math.log(1e-3)])
        bounds = [LENGTH_BOUNDS] * len(groups) + [NOISE_BOUNDS]
        # one BLAS thread: OpenBLAS otherwise starts threads for each of L-BFGS-B's many tiny steps, which
        # on a busy machine cost far more than the arithmetic (scipy/scipy#22438)
        with _THREADS.limit(limits=1, user_api="blas"):
            fitted = optimize.minimize(self._negative_likelihood, start, method="L-BFGS-B", bounds=bounds)
        self._set(fitted.x if np.all(np.isfinite(fitted.x)) else start)

    def _lengths(self, theta: np.ndarray) -> np.ndarray:
        lengths = np.ones(self.x.shape[1])
        for group, log_length in zip(self.groups, theta[:-1], strict=True):
            lengths[group] = math.exp(log_length)
        return lengths

    def _factor(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        covariance = _matern(self.x, self.x, self._lengths(theta))
        covariance[np.diag_indices_from(covariance)] += math.exp(theta[-1]) + 1e-9
        try:
            lower = np.linalg.cholesky(covariance)
        except np.linalg.LinAlgError:
            return None
        return lower, np.linalg.solve(lower.T, np.linalg.solve(lower, self.y))

    def _negative_likelihood(self, theta: np.ndarray) -> float:
        factor = self._factor(theta)
        if factor is None:
            return 1e10
        lower, alpha = factor
        return float(0.5 * self.y @ alpha + np.log(np.diag(lower)).sum())

    def _set(self, theta: np.ndarray) -> None:
        self.theta = theta
        factor = self._factor(theta)
        if factor is None:  # the start's jitter always factors; kept for a pathological fit
            theta = np.array([0.0] * len(self.groups) + [NOISE_BOUNDS[1]])
            factor = self._factor(theta)
            self.theta = theta
        self.lower, self.alpha = factor  # type: ignore[misc]

    def predict(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The posterior mean and standard deviation at ``points`` (in the targets' units)."""
        cross = _matern(points, self.x, self._lengths(self.theta))
        mean = cross @ self.alpha
        solved = np.linalg.solve(self.lower, cross.T)
        variance = np.maximum(1.0 - (solved**2).sum(0), 1e-12)
        return mean * self.scale + self.mean, np.sqrt(variance) * self.scale


class ConstrainedGPSampler(BaseSampler):
    """Constrained expected improvement over a finite space (see the module)."""

    def __init__(
        self,
        distributions: dict[str, BaseDistribution],
        *,
        seed: int,
        startup: int,
        embeddings: Embeddings | None = None,
    ) -> None:
        self._distributions = distributions
        self._embeddings = embeddings or {}
        self._seed = seed
        self._startup = startup
        self._random = RandomSampler(seed=seed)

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return dict(self._distributions)

    def sample_independent(
        self, study: Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        return self._random.sample_independent(study, trial, param_name, param_distribution)

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        told = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
        if len(told) < self._startup or not search_space:
            return {}
        return self.propose(told, study.direction)

    def propose(self, told: Sequence[FrozenTrial], direction: StudyDirection) -> dict[str, Any]:
        """The untried point with the largest constrained expected improvement (see the module)."""
        distributions = self._distributions
        groups = self._groups()
        tried = {tuple(sorted(trial.params.items())) for trial in told}
        points = [
            point
            for point in space_points(distributions, self._seed)
            if tuple(sorted(point.items())) not in tried
        ]
        if not points:
            return {}
        grid = np.array([self._coordinates(point) for point in points])
        sign = 1.0 if direction == StudyDirection.MAXIMIZE else -1.0
        feasibility = self._feasibility(told, grid, groups)
        if feasibility is None:
            return {}  # a random proposal: every trial so far failed alike
        measured = [
            trial for trial in told if trial.user_attrs.get(MEASURED) and trial.values and trial.values[0] > 0
        ]
        feasible = [trial for trial in measured if _violation(trial) <= 0]
        observed = objective_observations(measured, told)
        if not feasible or len(observed) < 2:
            return points[int(np.argmax(feasibility + 1e-9 * np.arange(len(points))[::-1]))]
        x = np.array([self._coordinates(params) for params, _ in observed])
        y = np.array([sign * math.log(value) for _, value in observed])
        mean, sd = _Process(x, y, groups).predict(grid)
        best = max(sign * math.log(trial.values[0]) for trial in feasible)
        gap = (mean - best) / sd
        improvement = sd * (gap * stats.norm.cdf(gap) + stats.norm.pdf(gap))
        score = improvement * feasibility
        return points[int(np.argmax(score + 1e-12 * np.arange(len(points))[::-1]))]

    def _coordinates(self, params: dict[str, Any]) -> list[float]:
        return _coordinates(self._distributions, self._embeddings, params)

    def _groups(self) -> list[slice]:
        """The coordinates of each knob (one length scale each)."""
        groups, start = [], 0
        for name, distribution in self._distributions.items():
            if name in self._embeddings:
                width = len(self._embeddings[name][0])
            elif isinstance(distribution, IntDistribution):
                width = 1
            else:
                width = len(distribution.choices)  # type: ignore[attr-defined]
            groups.append(slice(start, start + width))
            start += width
        return groups

    def _feasibility(
        self, told: Sequence[FrozenTrial], grid: np.ndarray, groups: list[slice]
    ) -> np.ndarray | None:
        """Each point's probability of meeting every constraint (1 where none was ever broken); None
        while every told trial broke them alike (nothing to tell regions apart by)."""
        violations = np.array([_violation(trial) for trial in told])
        if not np.any(violations > 0):
            return np.ones(len(grid))
        x = np.array([self._coordinates(trial.params) for trial in told])
        target = np.log1p(np.maximum(violations, -0.99))
        if np.ptp(target) == 0:
            return None
        mean, sd = _Process(x, target, groups).predict(grid)
        return stats.norm.cdf(-mean / sd)

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self._random.before_trial(study, trial)

    def after_trial(
        self, study: Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None
    ) -> None:
        self._random.after_trial(study, trial, state, values)


def _screening(trial: FrozenTrial) -> float | None:
    """The trial's screening value (its first intermediate value), when it has a positive one."""
    value = trial.intermediate_values.get(0)
    return value if value is not None and value > 0 else None


def objective_observations(
    measured: Sequence[FrozenTrial], told: Sequence[FrozenTrial]
) -> list[tuple[dict[str, Any], float]]:
    """The objective's observations: each measured trial's value, and each pruned trial's screening
    on the full profile's scale (times the median ratio of full value to screening over the trials
    that have both; 1 while none has), so the model learns where the screenings were poor."""
    found = [(trial.params, float(trial.values[0])) for trial in measured]
    # a configuration that broke an SLO at its screening is told that screening as its value: no ratio
    ratios = [
        trial.values[0] / screening
        for trial in measured
        if (screening := _screening(trial)) is not None and trial.values[0] != screening
    ]
    scale = float(np.median(ratios)) if ratios else 1.0
    for trial in told:
        screening = _screening(trial)
        if trial.state == TrialState.PRUNED and screening is not None:
            found.append((trial.params, screening * scale))
    return found


def _violation(trial: FrozenTrial) -> float:
    return max(trial.constraints.values(), default=0.0) if trial.constraints else 0.0
