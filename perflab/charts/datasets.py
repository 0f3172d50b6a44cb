"""The prompt-length histogram of a dataset."""

from __future__ import annotations

import altair as alt
import pandas as pd

from perflab.charts.common import CHART_HEIGHT

LENGTH_BINS = 40


def length_histogram(lengths: pd.DataFrame) -> alt.Chart:
    """How many prompts have each length in tokens (``lengths`` has one ``tokens`` column)."""
    return (
        alt.Chart(lengths)
        .mark_bar()
        .encode(
            x=alt.X("tokens:Q", bin=alt.Bin(maxbins=LENGTH_BINS), title="Prompt length (tokens)"),
            y=alt.Y("count():Q", title="Prompts"),
            tooltip=[alt.Tooltip("tokens:Q", bin=alt.Bin(maxbins=LENGTH_BINS), title="Tokens"), "count():Q"],
        )
        .properties(height=CHART_HEIGHT)
    )
