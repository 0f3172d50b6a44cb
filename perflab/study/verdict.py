"""Verdicts with their confidence: does a candidate configuration beat the reference, and how sure is it?

:func:`judge` compares the values measured for two configurations, one value per **launch** (the mean of
that launch's repetitions after its warm-up). Launches, not repetitions, are the samples: repetitions on
one launch share its placement, memory layout and compiled graphs, so they vary less than fresh launches
do, and treating them as independent would overstate the confidence.

The method is Student's t on the launch means, with one spread for both configurations: the
coefficient of variation (CV) pooled over both groups' launches, because configurations measured on the
same host, model and engine vary alike and a study has few launches of each (a per-group Welch interval
with two launches has one degree of freedom and says nothing). A spread measured earlier on the same
host, model and engine (``prior_cv_pct``, see :mod:`perflab.study.noise`) is pooled in with
``prior_df`` degrees of freedom (``None``: taken as known, the normal quantile), so even a first
measurement of one launch each gets an interval. The gain is the candidate's mean against the reference's,
in % of the reference, positive when better in the objective's direction; its half-width is the
quantile × the CV × √(1/n₁ + 1/n₂), scaled by the ratio of the means (the delta method for a ratio).

The outcome: ``better`` when the whole interval lies above ``min_gain_pct``; ``not_better`` when it lies
below; ``undecided`` (measure both again, alternating A B A B so drift cancels) while it straddles the
threshold; and ``within_noise`` once a straddling call has reached ``max_n`` launches of the candidate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
from scipy import stats

Outcome = Literal["better", "not_better", "within_noise", "undecided"]
OUTCOME_TEXT: dict[str, str] = {
    "better": "better",
    "not_better": "not better",
    "within_noise": "within noise",
    "undecided": "measuring again",
}


@dataclass(frozen=True)
class Verdict:
    """One decision: the gain, its interval's half-width (both in %), the confidence and the sample
    counts behind it. ``half_width_pct`` is ``inf`` when no spread is known yet (one launch each and no
    earlier spread)."""

    outcome: Outcome
    gain_pct: float
    half_width_pct: float
    confidence: float
    n_candidate: int
    n_reference: int

    def text(self) -> str:
        """``+4.1 % ± 1.3 %, 95 %, 3 vs 3``."""
        known = math.isfinite(self.half_width_pct)
        spread = f"± {self.half_width_pct:.1f} %" if known else "± ? (no spread yet)"
        return (
            f"{self.gain_pct:+.1f} % {spread}, {self.confidence * 100:g} %, "
            f"{self.n_candidate} vs {self.n_reference}"
        )

    def outcome_text(self) -> str:
        """``better``, ``not better``, ``within noise (±1.3 %)`` or ``measuring again``."""
        if self.outcome == "within_noise" and math.isfinite(self.half_width_pct):
            return f"within noise (±{self.half_width_pct:.1f} %)"
        return OUTCOME_TEXT[self.outcome]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping (an unknown half-width is stored as None)."""
        data = asdict(self)
        if not math.isfinite(self.half_width_pct):
            data["half_width_pct"] = None
        data["text"] = self.text()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        """The inverse of :meth:`to_dict`."""
        half_width = data.get("half_width_pct")
        return cls(
            outcome=data["outcome"],
            gain_pct=float(data["gain_pct"]),
            half_width_pct=math.inf if half_width is None else float(half_width),
            confidence=float(data["confidence"]),
            n_candidate=int(data["n_candidate"]),
            n_reference=int(data["n_reference"]),
        )


def _checked(name: str, values: Sequence[float]) -> np.ndarray:
    array = np.asarray(list(values), dtype=float)
    if array.size == 0:
        raise ValueError(f"{name}: no measured value to judge")
    if not np.all(np.isfinite(array)) or np.any(array <= 0):
        raise ValueError(f"{name}: values must be finite and > 0, got {list(values)}")
    return array


def pooled_cv(groups: Sequence[np.ndarray]) -> tuple[float, int]:
    """The coefficient of variation pooled over ``groups`` (each relative to its own mean) and its
    degrees of freedom; ``(nan, 0)`` when no group has two values."""
    squares, df = 0.0, 0
    for values in groups:
        if values.size >= 2:
            squares += float(np.var(values / values.mean(), ddof=1)) * (values.size - 1)
            df += values.size - 1
    return (math.sqrt(squares / df), df) if df else (math.nan, 0)


def _spread(
    groups: Sequence[np.ndarray], prior_cv_pct: float | None, prior_df: int | None
) -> tuple[float, float]:
    """The CV (a fraction) to use and its degrees of freedom (``inf`` for a known spread)."""
    cv, df = pooled_cv(groups)
    if prior_cv_pct is None:
        return cv, float(df)
    prior = prior_cv_pct / 100.0
    if prior_df is None:
        return prior, math.inf
    if df == 0:
        return prior, float(prior_df)
    return math.sqrt((prior_df * prior**2 + df * cv**2) / (prior_df + df)), float(prior_df + df)


def judge(
    candidate: Sequence[float],
    reference: Sequence[float],
    *,
    higher_is_better: bool,
    min_gain_pct: float,
    confidence: float = 0.95,
    max_n: int | None = None,
    prior_cv_pct: float | None = None,
    prior_df: int | None = None,
) -> Verdict:
    """The verdict on ``candidate`` against ``reference`` (one value per launch each); see the module
    docstring for the method. ``max_n`` is the most launches of the candidate: a call still straddling
    ``min_gain_pct`` there is ``within_noise``."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    if prior_cv_pct is not None and prior_cv_pct < 0:
        raise ValueError(f"prior_cv_pct must be >= 0, got {prior_cv_pct}")
    ours, theirs = _checked("candidate", candidate), _checked("reference", reference)
    ratio = ours.mean() / theirs.mean()
    gain = (ratio - 1.0 if higher_is_better else 1.0 - ratio) * 100.0
    cv, df = _spread((ours, theirs), prior_cv_pct, prior_df)
    if math.isnan(cv) or df <= 0:
        half_width = math.inf
    else:
        tail = 1.0 - (1.0 - confidence) / 2.0
        quantile = float(stats.norm.ppf(tail)) if math.isinf(df) else float(stats.t.ppf(tail, df))
        half_width = quantile * cv * ratio * math.sqrt(1.0 / ours.size + 1.0 / theirs.size) * 100.0
    if gain - half_width > min_gain_pct:
        outcome: Outcome = "better"
    elif gain + half_width < min_gain_pct:
        outcome = "not_better"
    elif gain <= min_gain_pct or (max_n is not None and ours.size >= max_n):
        outcome = "within_noise"
    else:
        outcome = "undecided"
    return Verdict(outcome, float(gain), float(half_width), confidence, int(ours.size), int(theirs.size))
