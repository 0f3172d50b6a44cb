"""Noise-aware verdicts: is a candidate better than a reference, given repeated measurements?

:func:`judge` compares the samples of two configurations (one objective value per measurement) with a
Welch t confidence interval on the relative difference of their means (SciPy's Student t quantile).
The gain is signed so that a positive gain is always an improvement (``higher_is_better`` says which
way the objective points). With one sample on a side the spread comes from ``prior_cv_pct`` (the
study's measured run-to-run noise) when it is known; without it nothing can be said yet.

Outcomes: ``better`` (the whole interval clears ``min_gain_pct``), ``within_noise`` (the interval holds
0 and stays below ``min_gain_pct``: the two are equivalent), ``not_better`` (a difference is resolved
and it is not a large enough gain), ``undecided`` (more samples are needed; ``max_n`` reached on both
sides turns it into ``within_noise``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

Outcome = Literal["better", "not_better", "within_noise", "undecided"]


@dataclass(frozen=True)
class Verdict:
    """The outcome of one comparison with its interval (percent of the reference mean)."""

    outcome: Outcome
    gain_pct: float | None
    half_width_pct: float | None
    confidence: float
    n_candidate: int
    n_reference: int

    def text(self) -> str:
        """``+3.1% ± 1.2% (95%, n=3 vs 3): better``."""
        counts = f"n={self.n_candidate} vs {self.n_reference}"
        if self.gain_pct is None:
            return f"no interval yet ({counts}): {self.outcome.replace('_', ' ')}"
        width = "?" if self.half_width_pct is None else f"{self.half_width_pct:.1f}%"
        return (
            f"{self.gain_pct:+.1f}% ± {width} ({self.confidence * 100:g}%, {counts}): "
            f"{self.outcome.replace('_', ' ')}"
        )


def _spread(samples: np.ndarray, prior_cv_pct: float | None) -> float | None:
    """The variance of one sample: measured with two or more, else from the prior CV."""
    if samples.size >= 2:
        return float(np.var(samples, ddof=1))
    if prior_cv_pct is None:
        return None
    return (float(samples.mean()) * prior_cv_pct / 100.0) ** 2


def judge(
    candidate: Sequence[float],
    reference: Sequence[float],
    *,
    higher_is_better: bool,
    min_gain_pct: float,
    confidence: float = 0.95,
    max_n: int | None = None,
    prior_cv_pct: float | None = None,
) -> Verdict:
    """The verdict on ``candidate`` against ``reference`` (their measured objective values)."""
    ours, theirs = np.asarray(candidate, dtype=float), np.asarray(reference, dtype=float)
    n_ours, n_theirs = int(ours.size), int(theirs.size)
    if n_ours == 0 or n_theirs == 0 or float(theirs.mean()) == 0.0:
        return Verdict("undecided", None, None, confidence, n_ours, n_theirs)
    base = float(theirs.mean())
    sign = 1.0 if higher_is_better else -1.0
    gain = sign * (float(ours.mean()) / base - 1.0) * 100.0
    var_ours, var_theirs = _spread(ours, prior_cv_pct), _spread(theirs, prior_cv_pct)
    exhausted = max_n is not None and n_ours >= max_n and n_theirs >= max_n
    if var_ours is None or var_theirs is None:
        return Verdict("within_noise" if exhausted else "undecided", gain, None, confidence, n_ours, n_theirs)
    a, b = var_ours / n_ours, var_theirs / n_theirs
    standard_error = math.sqrt(a + b)
    if standard_error == 0.0:
        half_width = 0.0
    else:
        # Welch–Satterthwaite degrees of freedom; a side with one sample (prior CV) counts as one.
        dof = (a + b) ** 2 / sum(part**2 / max(n - 1, 1) for part, n in ((a, n_ours), (b, n_theirs)) if part)
        half_width = float(stats.t.ppf(0.5 + confidence / 2.0, dof)) * standard_error / base * 100.0
    low, high = gain - half_width, gain + half_width
    if low >= min_gain_pct and gain > 0:
        outcome: Outcome = "better"
    elif high < min_gain_pct and low <= 0.0 <= high:
        outcome = "within_noise"
    elif high < min_gain_pct:
        outcome = "not_better"
    else:
        outcome = "within_noise" if exhausted else "undecided"
    return Verdict(outcome, gain, half_width, confidence, n_ours, n_theirs)
