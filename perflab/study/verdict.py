"""Verdicts with their confidence: does a candidate configuration beat the reference, and how sure is it?

:func:`judge` compares the values measured for two configurations, one value per **launch** (the mean of
that launch's runs). Launches, not runs, are the samples: runs on one launch share its placement, memory
layout and compiled graphs, so they vary less than fresh launches do, and treating them as independent
would overstate the confidence.

The spread is one coefficient of variation (CV) per launch for every configuration of the study
(:func:`perflab.study.noise.study_spread`: pooled over all their launches, with a spread reused from an
earlier study only when today's launches agree with it), because configurations measured on the same
host, model and engine vary alike and a study has few launches of each. The gain is the candidate's mean
against the reference's, in % of the reference, positive when better in the objective's direction; its
standard error is the CV × √(1/n₁ + 1/n₂), scaled by the ratio of the means (the delta method).

A candidate is judged at every **look** (``first`` launches, then one more each time, up to ``most``):
the group-sequential test of :mod:`perflab.study.sequential` spends the one-sided α = (1 − confidence) / 2
over the looks, so looking again does not raise the chance of keeping a candidate whose true gain is the
minimum gain. The interval printed (``± x %``) is the repeated confidence interval at that look
(Jennison & Turnbull): it covers the true gain at the study's confidence over all looks together. A stage
that tests several candidates against one reference shares α among them with Holm's step-down rule
(``alpha_share``, :func:`holm_shares`).

The outcome: ``better`` when the gain clears the look's boundary above ``min_gain_pct`` (the whole
interval lies above it); ``not_better`` when the whole interval lies below it; ``undecided`` (measure
again) while neither holds and launches remain, unless the estimate is too weak to go on (futility:
``within_noise``); ``within_noise`` at the last look; ``noise_unknown`` when no spread could be had (one
launch of everything and nothing reused): such a verdict is never a reason to keep anything. A kept
candidate's published gain is ``adjusted_gain_pct``, the estimate adjusted for the decision that kept it
(:func:`perflab.study.sequential.adjusted_z`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from perflab.study.sequential import FUTILITY_Z, adjusted_z, detectable_z, keep_boundaries, t_boundary

Outcome = Literal["better", "not_better", "within_noise", "undecided", "noise_unknown"]
OUTCOME_TEXT: dict[str, str] = {
    "better": "better",
    "not_better": "not better",
    "within_noise": "within noise",
    "undecided": "measuring again",
    "noise_unknown": "one measurement, noise unknown",
}
NOISE_UNKNOWN = "one measurement, noise unknown"


@dataclass(frozen=True)
class Verdict:
    """One decision: the measured gain and its interval's half-width (both in %), the confidence, the
    sample counts behind it, the look (1-based) of how many, and for a kept candidate the gain adjusted
    for its selection. ``half_width_pct`` is ``inf`` when no spread is known."""

    outcome: Outcome
    gain_pct: float
    half_width_pct: float
    confidence: float
    n_candidate: int
    n_reference: int
    adjusted_gain_pct: float | None = None
    look: int = 1
    looks: int = 1
    futility: bool = False

    @property
    def published_gain_pct(self) -> float:
        """The gain to publish: adjusted for the selection when kept, else as measured."""
        return self.adjusted_gain_pct if self.adjusted_gain_pct is not None else self.gain_pct

    def text(self) -> str:
        """``+4.1 % ± 1.3 %, 95 %, 3 vs 3``, or ``+4.1 %, one measurement, noise unknown``."""
        if not math.isfinite(self.half_width_pct):
            return f"{self.gain_pct:+.1f} %, {NOISE_UNKNOWN}"
        return (
            f"{self.gain_pct:+.1f} % ± {self.half_width_pct:.1f} %, {self.confidence * 100:g} %, "
            f"{self.n_candidate} vs {self.n_reference}"
        )

    def published_text(self) -> str:
        """A kept candidate's gain adjusted for its selection, then what was measured:
        ``+3.8 % adjusted for selection (measured +4.1 % ± 1.3 %, 95 %, 3 vs 3)``."""
        if self.adjusted_gain_pct is None:
            return self.text()
        return f"{self.adjusted_gain_pct:+.1f} % adjusted for selection (measured {self.text()})"

    def outcome_text(self) -> str:
        """``better``, ``not better``, ``within noise (±1.3 %)``, ``stopped: too weak to go on`` …"""
        if self.outcome == "within_noise" and self.futility:
            return f"within noise (stopped at look {self.look} of {self.looks}: too weak to reach the bar)"
        if self.outcome == "within_noise" and math.isfinite(self.half_width_pct):
            return f"within noise (±{self.half_width_pct:.1f} %)"
        return OUTCOME_TEXT[self.outcome]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping (an unknown half-width is stored as None)."""
        data = asdict(self)
        if not math.isfinite(self.half_width_pct):
            data["half_width_pct"] = None
        data["text"] = self.text()
        data["published_gain_pct"] = self.published_gain_pct
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        """The inverse of :meth:`to_dict`."""
        half_width = data.get("half_width_pct")
        adjusted = data.get("adjusted_gain_pct")
        return cls(
            outcome=data["outcome"],
            gain_pct=float(data["gain_pct"]),
            half_width_pct=math.inf if half_width is None else float(half_width),
            confidence=float(data["confidence"]),
            n_candidate=int(data["n_candidate"]),
            n_reference=int(data["n_reference"]),
            adjusted_gain_pct=None if adjusted is None else float(adjusted),
            look=int(data.get("look", 1)),
            looks=int(data.get("looks", 1)),
            futility=bool(data.get("futility", False)),
        )


def _checked(name: str, values: Sequence[float]) -> np.ndarray:
    array = np.asarray(list(values), dtype=float)
    if array.size == 0:
        raise ValueError(f"{name}: no measured value to judge")
    if not np.all(np.isfinite(array)) or np.any(array <= 0):
        raise ValueError(f"{name}: values must be finite and > 0, got {list(values)}")
    return array


def pooled_cv(groups: Sequence[Sequence[float]]) -> tuple[float, int]:
    """The coefficient of variation pooled over ``groups`` (each relative to its own mean) and its
    degrees of freedom; ``(nan, 0)`` when no group has two values."""
    squares, df = 0.0, 0
    for group in groups:
        values = np.asarray(list(group), dtype=float)
        if values.size >= 2:
            squares += float(np.var(values / values.mean(), ddof=1)) * (values.size - 1)
            df += values.size - 1
    return (math.sqrt(squares / df), df) if df else (math.nan, 0)


def holm_shares(kept: int, tested: int) -> float:
    """The share of α one of ``tested`` candidates against one reference gets once ``kept`` of them
    were kept: Holm's step-down rule, ``1 / (tested − kept)``, recycled into the sequential tests as in
    Maurer & Bretz (2013)."""
    return 1.0 / max(tested - kept, 1)


def _alpha(confidence: float, alpha_share: float) -> float:
    return (1.0 - confidence) / 2.0 * alpha_share


def judge(
    candidate: Sequence[float],
    reference: Sequence[float],
    *,
    higher_is_better: bool,
    min_gain_pct: float,
    cv_pct: float | None,
    df: float,
    confidence: float = 0.95,
    first: int = 1,
    most: int = 4,
    alpha_share: float = 1.0,
    final: bool = False,
) -> Verdict:
    """The verdict on ``candidate`` against ``reference`` (one value per launch each), with a per-launch
    CV of ``cv_pct`` on ``df`` degrees of freedom (``inf``: known); see the module docstring. The look is
    the candidate's launch count between ``first`` and ``most``; ``final`` makes it the last (no launch
    follows), ``alpha_share`` is the candidate's Holm share of α."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    ours, theirs = _checked("candidate", candidate), _checked("reference", reference)
    ratio = ours.mean() / theirs.mean()
    gain = (ratio - 1.0 if higher_is_better else 1.0 - ratio) * 100.0
    most = max(most, first)
    looks = most - first + 1
    look = min(max(ours.size - first, 0), looks - 1)
    last = final or look == looks - 1
    if cv_pct is None or not math.isfinite(cv_pct) or df <= 0:
        outcome: Outcome = "noise_unknown" if last else "undecided"
        return Verdict(
            outcome,
            float(gain),
            math.inf,
            confidence,
            int(ours.size),
            int(theirs.size),
            None,
            look + 1,
            looks,
        )
    bounds = keep_boundaries(first, most, _alpha(confidence, alpha_share))
    bound = t_boundary(bounds[look], df)
    se_pct = cv_pct * ratio * math.sqrt(1.0 / ours.size + 1.0 / theirs.size)
    half_width = bound * se_pct
    z = (gain - min_gain_pct) / se_pct if se_pct > 0 else math.copysign(math.inf, gain - min_gain_pct)
    adjusted = None
    futility = False
    if z > bound:
        outcome = "better"
        if math.isfinite(z):
            adjusted = min_gain_pct + adjusted_z(first, bounds, look, z) * se_pct
    elif z < -bound:
        outcome = "not_better"
    elif last:
        outcome = "within_noise"
    elif z <= FUTILITY_Z:
        outcome, futility = "within_noise", True
    else:
        outcome = "undecided"
    return Verdict(
        outcome,
        float(gain),
        float(half_width),
        confidence,
        int(ours.size),
        int(theirs.size),
        adjusted,
        look + 1,
        looks,
        futility,
    )


def detectable_gain_pct(
    *,
    min_gain_pct: float,
    cv_pct: float | None,
    df: float,
    confidence: float = 0.95,
    first: int = 1,
    most: int = 4,
    reference_launches: int = 2,
    power: float = 0.8,
) -> float | None:
    """The smallest true gain the design keeps with probability ``power`` at this spread: a candidate
    measured up to ``most`` launches against a reference with ``reference_launches`` (one more with
    each of the candidate's while it has no more than the candidate). None without a spread."""
    if cv_pct is None or not math.isfinite(cv_pct) or df <= 0:
        return None
    alpha = _alpha(confidence, 1.0)
    bounds = tuple(t_boundary(bound, df) for bound in keep_boundaries(first, max(most, first), alpha))
    reference = reference_launches
    for launches in range(first, max(most, first)):
        if reference <= launches:
            reference += 1
    last = max(most, first)
    se_pct = cv_pct * math.sqrt(1.0 / last + 1.0 / reference)
    return min_gain_pct + detectable_z(first, bounds, power) * se_pct
