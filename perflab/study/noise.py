"""Measured noise: how much one configuration's objective varies between repetitions and between launches.

A configuration measured on ``M`` launches with ``N`` repetitions each (after each launch's warm-up)
gives groups of values, one group per launch. :func:`estimate_spread` splits their variation the classic
one-way random-effects way (analysis of variance): the within-launch mean square estimates the
run-to-run variance; the between-launch mean square, less its share of run-to-run variance, estimates
the launch-to-launch variance (clipped at zero). Both are coefficients of variation (% of the mean), so
a spread measured on one configuration carries over to others on the same host, model and engine:
:meth:`Spread.per_launch_cv_pct` is the CV of one launch's mean of ``N`` repetitions, the spread that
:func:`perflab.study.verdict.judge` takes as ``prior_cv_pct``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Spread:
    """Run-to-run and launch-to-launch coefficients of variation (%), with the launches and
    repetitions they were measured on."""

    run_cv_pct: float
    launch_cv_pct: float
    launches: int
    repetitions: int

    def per_launch_cv_pct(self, repeats: int) -> float:
        """The CV of one launch's mean over ``repeats`` repetitions."""
        return math.sqrt(self.launch_cv_pct**2 + self.run_cv_pct**2 / max(repeats, 1))

    @property
    def df(self) -> int:
        """Degrees of freedom behind the launch-to-launch part (launches − 1)."""
        return max(self.launches - 1, 0)

    def text(self) -> str:
        """``run CV 2.0 %, launch CV 1.1 % (4 launches, 12 runs)``."""
        return (
            f"run CV {self.run_cv_pct:.1f} %, launch CV {self.launch_cv_pct:.1f} % "
            f"({self.launches} launches, {self.repetitions} runs)"
        )


def estimate_spread(groups: Sequence[Sequence[float]]) -> Spread | None:
    """The spread of ``groups`` (one group of values per launch); None when there are fewer than two
    values in all or a value is not positive."""
    launches = [np.asarray(list(group), dtype=float) for group in groups if len(group)]
    values = np.concatenate(launches) if launches else np.array([])
    if values.size < 2 or not np.all(np.isfinite(values)) or np.any(values <= 0):
        return None
    grand = values.mean()
    relative = [group / grand for group in launches]
    within_df = sum(group.size - 1 for group in relative)
    squares = sum(float(((group - group.mean()) ** 2).sum()) for group in relative)
    within_ms = squares / within_df if within_df else 0.0
    launch_var = 0.0
    if len(relative) >= 2:
        means = np.array([group.mean() for group in relative])
        sizes = np.array([group.size for group in relative], dtype=float)
        between_ms = float((sizes * (means - 1.0) ** 2).sum()) / (len(relative) - 1)
        # the effective group size of an unbalanced one-way layout
        n0 = (sizes.sum() - (sizes**2).sum() / sizes.sum()) / (len(relative) - 1)
        launch_var = max((between_ms - within_ms) / n0, 0.0) if within_df else between_ms
    return Spread(
        run_cv_pct=math.sqrt(within_ms) * 100.0,
        launch_cv_pct=math.sqrt(launch_var) * 100.0,
        launches=len(relative),
        repetitions=int(values.size),
    )
