"""The published gain of a decision as every rendering reads it
(:func:`perflab.report.published.published_gain`): a kept change's gain adjusted for selection until its
fresh confirmation launches are measured, then the gain on those launches with their interval, and the
decision's own verdict beside it."""

from __future__ import annotations

import pytest

from perflab.report.published import chained, published_gain
from perflab.study.verdict import Verdict

KEPT = Verdict("better", 12.1, 5.0, 0.95, 3, 4, adjusted_gain_pct=11.6, df=6.0, spread_launches=9)


def test_a_kept_gain_is_adjusted_for_selection_until_it_is_confirmed_on_fresh_launches() -> None:
    before = published_gain(KEPT)
    assert before.change == pytest.approx(0.116) and before.half_width == pytest.approx(0.05)
    assert before.adjusted and not before.confirmed
    assert before.sentence() == (
        "+11.6% ± 5.0% adjusted for selection, to be confirmed on fresh launches "
        "(measured +12.1 % ± 5.0 %, 95 %, 3 vs 4)"
    )


def test_a_confirmed_gain_publishes_the_fresh_launches_figure_and_interval_everywhere() -> None:
    after = published_gain(KEPT.with_confirmation(9.8, 6.3, (1, 1)))
    assert after.change == pytest.approx(0.098) and after.half_width == pytest.approx(0.063)
    assert after.confirmed and not after.adjusted
    assert after.sentence() == "+9.8% ± 6.3% on fresh launches (kept at +12.1 % ± 5.0 %, 95 %, 3 vs 4)"
    assert after.to_json() == {
        "gain_pct": pytest.approx(9.8),
        "half_width_pct": pytest.approx(6.3),
        "decided": True,
        "adjusted_for_selection": False,
        "confirmed_on_fresh_launches": True,
    }
    # per accelerator and over several stages the figure keeps where it came from
    assert after.scaled(0.5).confirmed
    assert chained([after, after]).confirmed and not chained([after, published_gain(KEPT)]).confirmed
