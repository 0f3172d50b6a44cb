"""Pieces shared by the charts: the chart height and the legend selection that highlights a series."""

from __future__ import annotations

import altair as alt

CHART_HEIGHT = 260
# Charts whose legend sits below the plot (long run names) need room for both.
LEGEND_CHART_HEIGHT = 400
DIMMED_OPACITY = 0.15


def legend_selection(field: str, name: str) -> alt.Parameter:
    """A selection bound to the legend of ``field``: clicking an entry highlights that series."""
    return alt.selection_point(fields=[field], bind="legend", name=name)


def highlight(selection: alt.Parameter) -> alt.OpacityValue:
    """Full opacity for the selected series (or all when nothing is selected), dimmed otherwise."""
    return alt.condition(selection, alt.value(1.0), alt.value(DIMMED_OPACITY))
