"""The length histogram of a dataset: its prompts', or its turns' new messages."""

from __future__ import annotations

import altair as alt
import pandas as pd

from perflab.charts.common import CHART_HEIGHT

LENGTH_BINS = 40


def length_histogram(lengths: pd.DataFrame, per: str = "Prompt") -> alt.Chart:
    """How many prompts (or turns, ``per="Turn"``) have each length in tokens (``lengths`` has one
    ``tokens`` column)."""
    return (
        alt.Chart(lengths)
        .mark_bar()
        .encode(
            x=alt.X("tokens:Q", bin=alt.Bin(maxbins=LENGTH_BINS), title=f"{per} length (tokens)"),
            y=alt.Y("count():Q", title=f"{per}s"),
            tooltip=[alt.Tooltip("tokens:Q", bin=alt.Bin(maxbins=LENGTH_BINS), title="Tokens"), "count():Q"],
        )
        .properties(height=CHART_HEIGHT)
    )
