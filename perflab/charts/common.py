"""Pieces shared by the charts: the chart height, the legend selection that highlights a series, fixed
styles for known categories, and number tooltips."""

from __future__ import annotations

from collections.abc import Mapping

import altair as alt

CHART_HEIGHT = 260
# Charts whose legend sits below the plot (long run names) need room for both.
LEGEND_CHART_HEIGHT = 400
DIMMED_OPACITY = 0.15
NUMBER_FORMAT = ",.2f"


def legend_selection(field: str, name: str) -> alt.Parameter:
    """A selection bound to the legend of ``field``: clicking an entry highlights that series."""
    return alt.selection_point(fields=[field], bind="legend", name=name)


def highlight(selection: alt.Parameter) -> alt.OpacityValue:
    """Full opacity for the selected series (or all when nothing is selected), dimmed otherwise."""
    return alt.condition(selection, alt.value(1.0), alt.value(DIMMED_OPACITY))


def fixed_scale(styles: Mapping[str, str]) -> alt.Scale:
    """A scale giving each known category (the keys, in legend order) its own colour or shape."""
    return alt.Scale(domain=list(styles), range=list(styles.values()))


def number_tooltip(field: str, title: str) -> alt.Tooltip:
    """A tooltip line with the quantitative ``field`` to two decimals."""
    return alt.Tooltip(f"{field}:Q", title=title, format=NUMBER_FORMAT)
