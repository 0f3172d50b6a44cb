"""Charts of the compare page: one metric per profile as grouped bars, throughput against latency
with the Pareto front marked, and overlaid latency CDFs. Every chart's legend selects a run."""

from __future__ import annotations

import altair as alt
import pandas as pd

from perflab.charts.common import (
    LEGEND_CHART_HEIGHT,
    fixed_scale,
    highlight,
    legend_selection,
    number_tooltip,
)

ON_FRONT = "on the Pareto front"
DOMINATED = "dominated"
FRONT_SHAPES = {ON_FRONT: "diamond", DOMINATED: "circle"}


def _run_color() -> alt.Color:
    """One colour per run, the legend below the chart (run names are long)."""
    return alt.Color("run:N", title="Run", legend=alt.Legend(orient="bottom", columns=2, labelLimit=320))


def grouped_bars(frame: pd.DataFrame, value_title: str) -> alt.Chart:
    """Bars of ``value`` per ``profile``, one bar per ``run`` side by side."""
    selection = legend_selection("run", "bar_run")
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("profile:N", title="Profile", axis=alt.Axis(labelAngle=0, labelLimit=180)),
            xOffset=alt.XOffset("run:N"),
            y=alt.Y("value:Q", title=value_title),
            color=_run_color(),
            opacity=highlight(selection),
            tooltip=[
                alt.Tooltip("run:N", title="Run"),
                alt.Tooltip("profile:N", title="Profile"),
                number_tooltip("value", value_title),
            ],
        )
        .add_params(selection)
        .properties(height=LEGEND_CHART_HEIGHT)
    )


def pareto_scatter(frame: pd.DataFrame, *, latency_title: str, throughput_title: str) -> alt.LayerChart:
    """Each run as a point (latency → throughput); the Pareto front as a line through its runs."""
    selection = legend_selection("run", "pareto_run")
    marked = frame.assign(front=frame["on_front"].map({True: ON_FRONT, False: DOMINATED}))
    points = (
        alt.Chart(marked)
        .mark_point(filled=True, size=140)
        .encode(
            x=alt.X("latency:Q", title=latency_title, scale=alt.Scale(zero=False)),
            y=alt.Y("throughput:Q", title=throughput_title, scale=alt.Scale(zero=False)),
            color=_run_color(),
            shape=alt.Shape("front:N", title="", scale=fixed_scale(FRONT_SHAPES)),
            opacity=highlight(selection),
            tooltip=[
                alt.Tooltip("run:N", title="Run"),
                number_tooltip("latency", latency_title),
                number_tooltip("throughput", throughput_title),
                alt.Tooltip("front:N", title="Pareto"),
            ],
        )
        .add_params(selection)
    )
    front = (
        alt.Chart(marked[marked["on_front"]].sort_values("latency"))
        .mark_line(color="gray", strokeDash=[6, 4])
        .encode(x="latency:Q", y="throughput:Q", order="latency:Q")
    )
    return alt.layer(front, points).properties(height=LEGEND_CHART_HEIGHT)


def overlaid_cdfs(frame: pd.DataFrame, value_title: str) -> alt.Chart:
    """One CDF line per run of ``value`` (the share of requests at or below it)."""
    selection = legend_selection("run", "cdf_run")
    return (
        alt.Chart(frame)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("value:Q", title=value_title),
            y=alt.Y("fraction:Q", title="Share of requests", axis=alt.Axis(format="%")),
            color=_run_color(),
            opacity=highlight(selection),
            tooltip=[
                alt.Tooltip("run:N", title="Run"),
                number_tooltip("value", value_title),
                alt.Tooltip("fraction:Q", title="Share", format=".1%"),
            ],
        )
        .add_params(selection)
        .properties(height=LEGEND_CHART_HEIGHT)
    )
