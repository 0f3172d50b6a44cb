"""Charts as PNG files (rendered by vl-convert, no browser needed).

A page draws each chart's PNG with the chart (its download button holds the file), so the last
:data:`RENDERED` renderings are kept: a page drawn again renders nothing new.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import altair as alt
import vl_convert

# PNGs kept (a chart's is a few hundred kB at twice its size).
RENDERED = 32


def chart_png(chart: alt.TopLevelMixin | dict[str, Any], *, scale: float = 2.0) -> bytes:
    """The chart (an Altair chart or its Vega-Lite spec) rendered to PNG at ``scale`` times its size."""
    spec = chart if isinstance(chart, dict) else chart.to_dict()
    return _rendered(json.dumps(spec, sort_keys=True), scale)


@functools.lru_cache(maxsize=RENDERED)
def _rendered(spec: str, scale: float) -> bytes:
    return vl_convert.vegalite_to_png(vl_spec=spec, scale=scale)
