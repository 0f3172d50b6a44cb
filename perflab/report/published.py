"""The gain a report publishes for each decision, read from one place.

A decision's verdict (:class:`perflab.study.verdict.Verdict`) publishes one gain:
``Verdict.published_gain_pct``: for a kept change, its gain on the study's fresh confirmation launches
(until they are measured, the measured gain adjusted for the selection that kept it), else as measured,
with its interval (``Verdict.published_half_width_pct``). :func:`published_gain` is the only reader of
that figure: the comparison table, the per-accelerator line, the Summary, the cost rows, the study page,
``results.json`` and ``results.csv`` all show what it returns, so each decision has one figure
everywhere. The interval is the verdict's published one (at the study's confidence); a verdict without a
known spread has none.

A comparison no decision was made on — a validation case, an imported write-up's single measurement, a
stage that kept nothing against the baseline — shows the ratio of the two means minus one, without an
interval (:func:`measured_gain`).

One definition of a change, gain or loss: new ÷ old − 1 (0.649× is −35.1 %), the verdict's ratio of
means minus one. It is the only definition under which a gain, its interval (the delta method on the
ratio) and a product of gains (a recommendation over several stages) agree; the seeds' −(old ÷ new −
1) for a loss is kept only where an imported write-up printed it, labelled as the write-up's.

The cost of a case follows from its throughput: at the same accelerators and price the cost per token
is the inverse of the throughput, so a throughput gain g (interval g ± h) is a cost change of
k ÷ (1 + g) − 1 (from k ÷ (1 + g + h) − 1 to k ÷ (1 + g − h) − 1), k the ratio of what the two sides
spend per hour (:func:`cost_change`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from perflab.study.verdict import Verdict


def percent_text(change: float, decimals: int = 1) -> str:
    """``0.592`` → ``+59.2%`` (``decimals`` places, explicit sign)."""
    return f"{change * 100:+.{decimals}f}%"


def relative_change(new: float, old: float) -> float:
    """``new`` against ``old``: new ÷ old − 1, a gain or a loss alike (see the module)."""
    return new / old - 1.0


@dataclass(frozen=True)
class PublishedGain:
    """A gain as a fraction (0.101 is +10.1 %) with the half-width of its interval (None: none known);
    ``decided`` when a decision published it, ``confirmed`` when it was measured on the study's fresh
    confirmation launches, ``adjusted`` when, before them, that decision adjusted it for the selection
    that kept it, and ``measured`` the decision's measured verdict in words."""

    change: float
    half_width: float | None = None
    decided: bool = False
    adjusted: bool = False
    measured: str | None = None
    confirmed: bool = False

    def text(self, decimals: int = 1) -> str:
        """``+10.1% ± 12.6%``, or ``+10.1%`` without an interval."""
        shown = percent_text(self.change, decimals)
        return shown if self.half_width is None else f"{shown} ± {self.half_width * 100:.{decimals}f}%"

    def sentence(self, decimals: int = 1) -> str:
        """``+9.8% ± 6.3% on fresh launches (kept at +15.3 % ± 12.6 %, 95 %, 3 vs 2)``; before them
        ``+10.1% ± 12.6% adjusted for selection, to be confirmed on fresh launches (measured …)``; or
        ``+4.1% ± 1.3% (95 %, 3 vs 3)`` for a gain published as measured."""
        if self.measured is None:
            return self.text(decimals)
        if self.confirmed:
            return f"{self.text(decimals)} on fresh launches (kept at {self.measured})"
        if self.adjusted:
            return (
                f"{self.text(decimals)} adjusted for selection, to be confirmed on fresh launches "
                f"(measured {self.measured})"
            )
        return f"{self.text(decimals)} ({self.measured.split(', ', 1)[-1]})"

    def scaled(self, factor: float) -> PublishedGain:
        """The gain of ``factor`` × the new value against the old (per accelerator: ``factor`` is the
        old side's accelerators over the new side's), its interval scaled alike."""
        half = self.half_width * factor if self.half_width is not None else None
        return replace(self, change=(1.0 + self.change) * factor - 1.0, half_width=half)

    def to_json(self) -> dict[str, Any]:
        """``gain_pct``, ``half_width_pct`` (None: no interval), ``decided``, ``adjusted_for_selection``,
        ``confirmed_on_fresh_launches``."""
        return {
            "gain_pct": self.change * 100.0,
            "half_width_pct": self.half_width * 100.0 if self.half_width is not None else None,
            "decided": self.decided,
            "adjusted_for_selection": self.adjusted,
            "confirmed_on_fresh_launches": self.confirmed,
        }


def published_gain(verdict: Verdict) -> PublishedGain:
    """The gain ``verdict`` publishes, with its interval: every rendering's one source of it."""
    width = verdict.published_half_width_pct
    half = float(width) / 100.0 if math.isfinite(width) else None
    return PublishedGain(
        float(verdict.published_gain_pct) / 100.0,
        half,
        decided=True,
        adjusted=verdict.adjusted_gain_pct is not None and not verdict.confirmed,
        measured=verdict.text(),
        confirmed=verdict.confirmed,
    )


def as_change(gain: PublishedGain, *, lower_is_better: bool) -> PublishedGain:
    """A decision's gain as a change of its objective's value: for a lower-is-better objective (cost)
    the gain is how much lower, so +9 % cheaper is a change of −9 %."""
    if not lower_is_better:
        return gain
    return replace(gain, change=-gain.change)


def measured_gain(new: float, old: float) -> PublishedGain:
    """A comparison no decision was made on: the ratio of the means minus one, without an interval."""
    return PublishedGain(float(relative_change(new, old)))


def recommendation_gain(
    recommendation: Verdict | None, kept: Sequence[Verdict | None]
) -> PublishedGain | None:
    """What the recommendation over the baseline publishes; ``kept`` holds each kept stage's decision
    (None for a winner kept without one, as when it alone met the SLOs). With one stage that kept a
    change by a decision, that decision: its reference was the baseline (nothing had been kept before
    it) and its winner is the recommendation (nothing was kept after it), so it is the same pair, and one
    figure stands for it; else the recommendation's own verdict (the product of the kept stages'
    published gains, with the interval of the two configurations' launches)."""
    if len(kept) == 1 and kept[0] is not None:
        return published_gain(kept[0])
    return published_gain(recommendation) if recommendation is not None else None


def chained(gains: Sequence[PublishedGain]) -> PublishedGain:
    """Gains one after the other, each against the best before it, as one gain over the first reference:
    the product of (1 + gain) minus one; an interval only where there is one gain."""
    if len(gains) == 1:
        return gains[0]
    change = math.prod(1.0 + gain.change for gain in gains) - 1.0
    return PublishedGain(
        change,
        None,
        all(gain.decided for gain in gains),
        any(gain.adjusted for gain in gains),
        confirmed=bool(gains) and all(gain.confirmed for gain in gains),
    )


@dataclass(frozen=True)
class CostChange:
    """A change of cost per token as a fraction (−0.38 is 38 % cheaper) and its interval's ends."""

    change: float
    low: float | None = None
    high: float | None = None

    def interval_text(self, decimals: int = 1) -> str | None:
        """``-19.4% to +3.0%``; None without an interval."""
        if self.low is None or self.high is None:
            return None
        return f"{percent_text(self.low, decimals)} to {percent_text(self.high, decimals)}"


def cost_change(throughput: PublishedGain, spend_ratio: float) -> CostChange | None:
    """The cost change of a throughput gain when the new side spends ``spend_ratio`` × the old side's
    money per hour (see the module); None for a gain of −100 % or worse."""
    if 1.0 + throughput.change <= 0 or spend_ratio <= 0:
        return None
    change = spend_ratio / (1.0 + throughput.change) - 1.0
    half = throughput.half_width
    if half is None:
        return CostChange(change)
    high = (
        spend_ratio / (1.0 + throughput.change - half) - 1.0 if 1.0 + throughput.change - half > 0 else None
    )
    return CostChange(change, spend_ratio / (1.0 + throughput.change + half) - 1.0, high)


def cost_gain_change(cost: PublishedGain) -> CostChange:
    """The cost change a decision on cost published (its gain is how much cheaper: +9 % is −9 %)."""
    change = as_change(cost, lower_is_better=True)
    if change.half_width is None:
        return CostChange(change.change)
    return CostChange(change.change, change.change - change.half_width, change.change + change.half_width)
