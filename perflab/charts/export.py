"""Charts as PNG files (rendered by vl-convert, no browser needed)."""

from __future__ import annotations

from typing import Any

import altair as alt
import vl_convert


def chart_png(chart: alt.TopLevelMixin | dict[str, Any], *, scale: float = 2.0) -> bytes:
    """The chart (an Altair chart or its Vega-Lite spec) rendered to PNG at ``scale`` times its size."""
    spec = chart if isinstance(chart, dict) else chart.to_dict()
    return vl_convert.vegalite_to_png(spec, scale=scale)
