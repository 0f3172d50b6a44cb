"""Verdicts with their confidence: does a candidate configuration beat the reference, and how sure is it?

:func:`judge` compares the values measured for two configurations, one value per **launch** (the mean of
that launch's runs). Launches, not runs, are the samples: runs on one launch share its placement, memory
layout and compiled graphs, so they vary less than fresh launches do, and treating them as independent
would overstate the confidence.

The spread is one coefficient of variation (CV) per launch for every configuration of the study
(:func:`perflab.study.noise.study_spread`: pooled over all their launches, with a spread reused from an
earlier study only when today's launches show it is not quieter than they are), because configurations
measured on the same host, model and engine vary alike and a study has few launches of each. The gain is
the candidate's mean against the reference's, in % of the reference, positive when better in the
objective's direction; its standard error is the CV × √(1/n₁ + 1/n₂), scaled by the ratio of the means
(the delta method).

A candidate is judged at every **look** (its ``first`` launches, then one more each time, up to
``most``): the group-sequential test of :mod:`perflab.study.sequential` spends the one-sided α = (1 −
confidence) / 2 over the looks at their information (the reference ``lead`` launches ahead of the
candidate), so looking again does not raise the chance of keeping a candidate whose true gain is the
minimum gain. No look is taken while the spread rests on fewer than :data:`MIN_DF` degrees of freedom: a
t boundary on one or two is tens of thousands of standard errors wide, a look that could never keep
anything; the verdict then says "no verdict yet: the spread rests on N launches" instead of an interval.
The interval printed (``± x %``) is the repeated confidence interval at that look (Jennison & Turnbull):
it covers the true gain at the study's confidence over all looks together. A stage that tests several
candidates against one reference shares α among them with Holm's step-down rule (``alpha_share``,
:func:`holm_shares`).

The outcome: ``better`` when the gain clears the look's boundary above ``min_gain_pct`` (the whole
interval lies above it); ``not_better`` when the whole interval lies below it; ``undecided`` (measure
again) while neither holds and launches remain, unless the estimate is too weak to go on (futility:
``within_noise``); ``within_noise`` at the last look; ``noise_unknown`` when no spread could be had (one
launch of everything and nothing reused) or it still rests on too few launches at the last look: such a
verdict is never a reason to keep anything.

**The published gain** (:attr:`Verdict.published_gain_pct`, :meth:`Verdict.published_text`): a kept
candidate came out high, which is partly why it was kept. Its published figure is the gain measured on
**confirmation launches** that took no part in the decision (:mod:`perflab.study.confirm`), with their
interval; until they are measured, the measured gain adjusted for the selection
(:func:`perflab.study.sequential.adjusted_z`), said to be awaiting confirmation. A candidate not kept
publishes what was measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import numpy as np

from perflab.study.sequential import (
    adjusted_z,
    futility_z,
    gain_at_power,
    information_levels,
    keep_boundaries,
    t_boundary,
)

Outcome = Literal["better", "not_better", "within_noise", "undecided", "noise_unknown"]
OUTCOME_TEXT: dict[str, str] = {
    "better": "better",
    "not_better": "not better",
    "within_noise": "within noise",
    "undecided": "measuring again",
    "noise_unknown": "one measurement, noise unknown",
}
NOISE_UNKNOWN = "one measurement, noise unknown"
# No look, no interval, while the spread rests on fewer degrees of freedom than this.
MIN_DF = 3


def launches_text(count: int) -> str:
    """``1 launch``, ``4 launches``."""
    return f"{count} launch" if count == 1 else f"{count} launches"


def too_little_text(launches: int) -> str:
    """What is said instead of an interval from too small a spread."""
    return f"no verdict yet: the spread rests on {launches_text(launches)}"


@dataclass(frozen=True)
class Verdict:
    """One decision: the measured gain and its interval's half-width (both in %), the confidence, the
    sample counts behind it, the look (1-based) of how many, the spread's degrees of freedom and the
    launches it rests on; for a kept candidate the gain adjusted for its selection and, once measured,
    the gain on its confirmation launches with their interval and counts. ``half_width_pct`` is ``inf``
    when no interval can be given."""

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
    df: float | None = None
    spread_launches: int | None = None
    confirmed_gain_pct: float | None = None
    confirmed_half_width_pct: float | None = None
    confirmed_launches: tuple[int, int] | None = None

    @property
    def too_little(self) -> bool:
        """Whether a spread exists but rests on too few degrees of freedom for an interval."""
        return self.df is not None and 0 < self.df < MIN_DF

    @property
    def confirmed(self) -> bool:
        return self.confirmed_gain_pct is not None

    @property
    def published_gain_pct(self) -> float:
        """The gain to publish: on the confirmation launches when measured, else adjusted for the
        selection when kept, else as measured."""
        if self.confirmed_gain_pct is not None:
            return self.confirmed_gain_pct
        return self.adjusted_gain_pct if self.adjusted_gain_pct is not None else self.gain_pct

    @property
    def published_half_width_pct(self) -> float:
        """The half-width of the published gain's interval (``inf`` when there is none)."""
        if self.confirmed_half_width_pct is not None:
            return self.confirmed_half_width_pct
        return self.half_width_pct

    def text(self) -> str:
        """``+4.1 % ± 1.3 %, 95 %, 3 vs 3``, ``+4.1 %, one measurement, noise unknown`` or ``+4.1 %, no
        verdict yet: the spread rests on 2 launches``."""
        if self.too_little:
            return f"{self.gain_pct:+.1f} %, {too_little_text(self.spread_launches or 0)}"
        if not math.isfinite(self.half_width_pct):
            return f"{self.gain_pct:+.1f} %, {NOISE_UNKNOWN}"
        return (
            f"{self.gain_pct:+.1f} % ± {self.half_width_pct:.1f} %, {self.confidence * 100:g} %, "
            f"{self.n_candidate} vs {self.n_reference}"
        )

    def published_text(self) -> str:
        """The published figure and where it comes from: ``+3.9 % ± 2.0 % on fresh launches (1 vs 2),
        kept at +4.1 % ± 1.3 %, 95 %, 3 vs 4``; before confirmation ``+3.8 % adjusted for selection, to
        be confirmed on fresh launches (measured +4.1 % ± 1.3 %, 95 %, 3 vs 4)``; else :meth:`text`."""
        if self.confirmed_gain_pct is not None and self.confirmed_launches is not None:
            ours, theirs = self.confirmed_launches
            width = self.confirmed_half_width_pct
            interval = f" ± {width:.1f} %" if width is not None and math.isfinite(width) else ""
            return (
                f"{self.confirmed_gain_pct:+.1f} %{interval} on fresh launches ({ours} vs {theirs}), "
                f"kept at {self.text()}"
            )
        if self.adjusted_gain_pct is None:
            return self.text()
        return (
            f"{self.adjusted_gain_pct:+.1f} % adjusted for selection, to be confirmed on fresh launches "
            f"(measured {self.text()})"
        )

    def outcome_text(self) -> str:
        """``better``, ``not better``, ``within noise (±1.3 %)``, ``stopped: too weak to go on`` …"""
        if self.too_little and self.outcome in ("undecided", "noise_unknown"):
            return too_little_text(self.spread_launches or 0)
        if self.outcome == "within_noise" and self.futility:
            return f"within noise (stopped at look {self.look} of {self.looks}: too weak to reach the bar)"
        if self.outcome == "within_noise" and math.isfinite(self.half_width_pct):
            return f"within noise (±{self.half_width_pct:.1f} %)"
        return OUTCOME_TEXT[self.outcome]

    def with_confirmation(self, gain_pct: float, half_width_pct: float, launches: tuple[int, int]) -> Verdict:
        """This verdict with the gain measured on its confirmation launches (the decision stands)."""
        return replace(
            self,
            confirmed_gain_pct=gain_pct,
            confirmed_half_width_pct=half_width_pct,
            confirmed_launches=launches,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping (an unknown half-width, and the infinite degrees of freedom of a spread
        stated as known, are stored as None: JSON has no infinity)."""
        data = asdict(self)
        for key in ("half_width_pct", "confirmed_half_width_pct", "df"):
            if data[key] is not None and not math.isfinite(data[key]):
                data[key] = None
        if self.confirmed_launches is not None:
            data["confirmed_launches"] = list(self.confirmed_launches)
        data["text"] = self.text()
        data["published_gain_pct"] = self.published_gain_pct
        width = self.published_half_width_pct
        data["published_half_width_pct"] = width if math.isfinite(width) else None
        data["published_text"] = self.published_text()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        """The inverse of :meth:`to_dict`."""

        def number(key: str) -> float | None:
            value = data.get(key)
            return None if value is None else float(value)

        half_width = number("half_width_pct")
        launches = data.get("confirmed_launches")
        spread_launches = data.get("spread_launches")
        return cls(
            outcome=data["outcome"],
            gain_pct=float(data["gain_pct"]),
            half_width_pct=math.inf if half_width is None else half_width,
            confidence=float(data["confidence"]),
            n_candidate=int(data["n_candidate"]),
            n_reference=int(data["n_reference"]),
            adjusted_gain_pct=number("adjusted_gain_pct"),
            look=int(data.get("look", 1)),
            looks=int(data.get("looks", 1)),
            futility=bool(data.get("futility", False)),
            df=number("df"),
            spread_launches=None if spread_launches is None else int(spread_launches),
            confirmed_gain_pct=number("confirmed_gain_pct"),
            confirmed_half_width_pct=number("confirmed_half_width_pct"),
            confirmed_launches=None if launches is None else (int(launches[0]), int(launches[1])),
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


def one_sided_alpha(confidence: float, alpha_share: float = 1.0) -> float:
    """The one-sided α of a verdict at ``confidence``, times its share."""
    return (1.0 - confidence) / 2.0 * alpha_share


def gain_of(candidate: np.ndarray, reference: np.ndarray, higher_is_better: bool) -> tuple[float, float]:
    """The ratio of the means and the gain it makes, in % (positive when better)."""
    ratio = float(candidate.mean() / reference.mean())
    return ratio, (ratio - 1.0 if higher_is_better else 1.0 - ratio) * 100.0


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
    lead: int | None = None,
    spread_launches: int | None = None,
) -> Verdict:
    """The verdict on ``candidate`` against ``reference`` (one value per launch each), with a per-launch
    CV of ``cv_pct`` on ``df`` degrees of freedom (``inf``: known) measured on ``spread_launches``
    launches; see the module. The look is the candidate's launch count between ``first`` and ``most``;
    the design launches the reference ``lead`` times more than the candidate (None: as many more as it
    has now); ``final`` makes the look the last (no launch follows), ``alpha_share`` is the candidate's
    Holm share of α."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    ours, theirs = _checked("candidate", candidate), _checked("reference", reference)
    ratio, gain = gain_of(ours, theirs, higher_is_better)
    most = max(most, first)
    looks = most - first + 1
    look = min(max(ours.size - first, 0), looks - 1)
    last = final or look == looks - 1
    common = {
        "confidence": confidence,
        "n_candidate": int(ours.size),
        "n_reference": int(theirs.size),
        "look": look + 1,
        "looks": looks,
        "spread_launches": spread_launches,
    }
    known = cv_pct is not None and math.isfinite(cv_pct) and df > 0
    if not known or df < MIN_DF:
        outcome: Outcome = "noise_unknown" if last else "undecided"
        return Verdict(outcome, float(gain), math.inf, df=float(df) if known else None, **common)
    assert cv_pct is not None
    lead = max(theirs.size - ours.size, 0) if lead is None else lead
    levels = information_levels(first, most, lead)
    bounds = keep_boundaries(levels, one_sided_alpha(confidence, alpha_share))
    bound = t_boundary(bounds[look], df)
    se_pct = cv_pct * ratio * math.sqrt(1.0 / ours.size + 1.0 / theirs.size)
    half_width = bound * se_pct
    z = (gain - min_gain_pct) / se_pct if se_pct > 0 else math.copysign(math.inf, gain - min_gain_pct)
    adjusted = None
    futility = False
    if z > bound:
        outcome = "better"
        if math.isfinite(z):
            adjusted = min_gain_pct + adjusted_z(levels, bounds, look, z) * se_pct
    elif z < -bound:
        outcome = "not_better"
    elif last:
        outcome = "within_noise"
    elif z <= futility_z(look):
        outcome, futility = "within_noise", True
    else:
        outcome = "undecided"
    return Verdict(
        outcome,
        float(gain),
        float(half_width),
        adjusted_gain_pct=adjusted,
        futility=futility,
        df=float(df),
        **common,
    )


def detectable_gain_pct(
    *,
    min_gain_pct: float,
    cv_pct: float | None,
    df: float,
    confidence: float = 0.95,
    first: int = 1,
    most: int = 4,
    lead: int = 1,
    candidates: int = 1,
    power: float = 0.8,
    lower_is_better: bool = False,
) -> float | None:
    """The smallest true gain the design keeps with probability ``power`` at this spread: a candidate
    measured up to ``most`` launches against a reference launched ``lead`` times more, one of
    ``candidates`` sharing α by Holm's rule (its first share, 1/candidates: the rule's own power
    without recycling), each look's boundary carried over to t at ``df`` degrees of freedom, the
    futility stop applied, and the gain's standard error growing with the ratio of the means as
    :func:`judge` takes it (:func:`perflab.study.sequential.gain_at_power`). None without a spread, or
    where no gain reaches that power."""
    if cv_pct is None or not math.isfinite(cv_pct) or df <= 0:
        return None
    most = max(most, first)
    levels = information_levels(first, most, lead)
    normal = keep_boundaries(levels, one_sided_alpha(confidence, 1.0 / max(candidates, 1)))
    bounds = tuple(t_boundary(bound, max(df, MIN_DF)) for bound in normal)
    return gain_at_power(levels, bounds, min_gain_pct, cv_pct, lower_is_better, power)
