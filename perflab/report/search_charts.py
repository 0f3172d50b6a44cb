"""A search stage's charts (Altair), from its section of the study's result
(:class:`~perflab.report.model.SearchSection`).

- ``search_convergence_N``: the best value so far against launches and against GPU-hours;
- ``search_pareto_N`` (two objectives): every feasible trial, the Pareto front marked and joined;
- ``search_importance_N``: how much each knob mattered (Optuna's PED-ANOVA importances).
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from perflab.report.model import SearchSection

# The report's chart size (perflab.report.charts), which draws these beside its own.
WIDTH = 520
HEIGHT = 260


def convergence_data(entry: SearchSection) -> pd.DataFrame:
    rows = [point for point in entry.convergence if point.get("best") is not None]
    return pd.DataFrame(rows, columns=["launches", "gpu_hours", "best", "trial"])


def convergence_chart(entry: SearchSection, unit: str) -> alt.HConcatChart:
    """Best so far against launches and against GPU-hours, side by side."""
    data = convergence_data(entry)
    objective = entry.objectives[0]
    title = f"{objective} ({unit})".replace(" ()", "")

    def against(field: str, axis: str) -> alt.Chart:
        return (
            alt.Chart(data, title=f"Best so far against {axis}")
            .mark_line(point=True, interpolate="step-after")
            .encode(
                x=alt.X(f"{field}:Q", title=axis),
                y=alt.Y("best:Q", title=title, scale=alt.Scale(zero=False)),
                tooltip=["trial", "launches", alt.Tooltip("gpu_hours:Q", format=".2f"), "best"],
            )
            .properties(width=WIDTH // 2, height=HEIGHT)
        )

    return alt.hconcat(against("launches", "launches"), against("gpu_hours", "GPU-hours"))


def pareto_data(entry: SearchSection) -> pd.DataFrame:
    front = set(entry.front)
    rows = [
        {
            "trial": trial.number,
            "x": trial.values[0],
            "y": trial.values[1],
            "front": "Pareto front" if trial.number in front else "explored",
        }
        for trial in entry.trials
        if trial.state in ("measured", "winner")
        and trial.values
        and len(trial.values) == 2
        and trial.violation <= 0
    ]
    return pd.DataFrame(rows, columns=["trial", "x", "y", "front"])


def pareto_chart(entry: SearchSection) -> alt.LayerChart:
    """Explored points of a two-objective search, the front marked and joined."""
    first, second = entry.objectives
    data = pareto_data(entry)
    points = (
        alt.Chart(data, title="Explored configurations and the Pareto front")
        .mark_circle(size=90)
        .encode(
            x=alt.X("x:Q", title=first, scale=alt.Scale(zero=False)),
            y=alt.Y("y:Q", title=second, scale=alt.Scale(zero=False)),
            color=alt.Color("front:N", title=None),
            tooltip=["trial", alt.Tooltip("x:Q", title=first), alt.Tooltip("y:Q", title=second)],
        )
    )
    line = alt.Chart(data[data["front"] == "Pareto front"]).mark_line().encode(x="x:Q", y="y:Q", order="x:Q")
    return (points + line).properties(width=WIDTH, height=HEIGHT)


def importance_data(entry: SearchSection) -> pd.DataFrame:
    rows = [{"knob": name, "importance": value} for name, value in (entry.importances or {}).items()]
    return pd.DataFrame(rows, columns=["knob", "importance"])


def importance_chart(entry: SearchSection) -> alt.Chart:
    """Each knob's share of the objective's variation."""
    return (
        alt.Chart(importance_data(entry), title="Which knobs mattered")
        .mark_bar()
        .encode(
            x=alt.X("importance:Q", title="importance (PED-ANOVA)"),
            y=alt.Y("knob:N", title=None, sort="-x"),
            tooltip=["knob", alt.Tooltip("importance:Q", format=".3f")],
        )
        .properties(width=WIDTH, height=max(60, 30 * len(importance_data(entry))))
    )


def search_charts(entry: SearchSection, unit: str) -> dict[str, alt.TopLevelMixin]:
    """The charts one search stage has data for, by name."""
    stage = entry.stage
    charts: dict[str, alt.TopLevelMixin] = {}
    if not convergence_data(entry).empty:
        charts[f"search_convergence_{stage}"] = convergence_chart(entry, unit)
    if len(entry.objectives) == 2 and not pareto_data(entry).empty:
        charts[f"search_pareto_{stage}"] = pareto_chart(entry)
    if not importance_data(entry).empty:
        charts[f"search_importance_{stage}"] = importance_chart(entry)
    return charts
