"""Charts as PNG files (rendered by vl-convert, no browser needed)."""

from __future__ import annotations

import altair as alt
import vl_convert


def chart_png(chart: alt.TopLevelMixin, *, scale: float = 2.0) -> bytes:
    """The chart rendered to PNG at ``scale`` times its pixel size."""
    return vl_convert.vegalite_to_png(chart.to_dict(), scale=scale)
