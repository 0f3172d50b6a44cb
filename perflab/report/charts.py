"""The report's charts (Altair; their PNG files are :func:`perflab.chart_png.chart_png`'s).

- ``comparison``: Total TPS of the baseline and the optimized configuration for every benchmark case;
- ``stages``: every measured candidate of every stage, winners marked, with the best so far;
- ``load_curve_N``: a swept profile's throughput against its load, and its latency against its
  throughput, with the peak throughput and the highest load within the SLOs marked;
- ``search_convergence_N``, ``search_pareto_N``, ``search_importance_N``: a search stage's charts
  (:mod:`perflab.report.search_charts`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import altair as alt
import pandas as pd

from perflab.report.model import Report
from perflab.report.search_charts import HEIGHT, WIDTH, search_charts
from perflab.study.loadcurve import LOAD_TITLES, LoadCurve

# Ticks a value axis aims for; its top tick is the first one above the largest value plus a margin (a
# fraction of it) that keeps a point's whole circle inside the plot.
VALUE_TICKS = 5
TOP_MARGIN = 0.05


def _round_step(raw: float) -> float:
    """The smallest 1, 2, 2.5 or 5 × 10^k that is at least ``raw``."""
    power = 10.0 ** math.floor(math.log10(raw))
    return next(power * factor for factor in (1.0, 2.0, 2.5, 5.0, 10.0) if power * factor >= raw)


def value_axis(field: str, values: Iterable[float], title: str) -> alt.Y:
    """The y encoding of quantitative ``field``: from 0 to the first round tick above the largest of
    ``values`` (with a margin), every tick labelled, so no point or bar reaches past the top of the
    axis."""
    top = max((value for value in values if value is not None and math.isfinite(value)), default=0.0)
    if top <= 0:
        return alt.Y(f"{field}:Q", title=title)
    step = _round_step(top / VALUE_TICKS)
    ticks = math.floor(top * (1.0 + TOP_MARGIN) / step) + 1
    domain_max = step * ticks
    return alt.Y(
        f"{field}:Q",
        scale=alt.Scale(domain=[0, domain_max], nice=False, zero=True),
        axis=alt.Axis(values=[step * index for index in range(ticks + 1)]),
        title=title,
    )


def comparison_data(report: Report) -> pd.DataFrame:
    rows = []
    for row in report.comparison:
        for side, figures in (("Baseline", row.baseline), ("Optimized", row.optimized)):
            if figures is not None and figures.total_tps is not None:
                rows.append({"case": row.case, "side": side, "total_tps": figures.total_tps})
    return pd.DataFrame(rows, columns=["case", "side", "total_tps"])


def comparison_chart(report: Report) -> alt.Chart:
    """Grouped bars: baseline vs optimized node Total TPS per benchmark case."""
    data = comparison_data(report)
    return (
        alt.Chart(data, title="Baseline vs optimized")
        .mark_bar()
        .encode(
            x=alt.X("case:N", title=None, sort=None, axis=alt.Axis(labelAngle=-20, labelLimit=180)),
            xOffset=alt.XOffset("side:N", sort=["Baseline", "Optimized"]),
            y=value_axis("total_tps", data["total_tps"], "Total TPS (tok/s, node)"),
            color=alt.Color("side:N", title=None, sort=["Baseline", "Optimized"]),
            tooltip=["case", "side", alt.Tooltip("total_tps:Q", format=".2f")],
        )
        .properties(width=WIDTH, height=HEIGHT)
    )


def stages_data(report: Report) -> pd.DataFrame:
    rows = []
    for stage in report.stages:
        for candidate in stage.candidates:
            if candidate.value is None:
                continue
            rows.append(
                {
                    "stage": f"{stage.index}. {stage.name}",
                    "candidate": candidate.label,
                    "value": candidate.value,
                    "decision": (candidate.decision or "pending").replace("_", " "),
                }
            )
    return pd.DataFrame(rows, columns=["stage", "candidate", "value", "decision"])


def stages_chart(report: Report) -> alt.Chart:
    """Every measured candidate per stage (a reused one at the value of the run it reuses), coloured
    by its decision."""
    title = f"{report.objective} per stage ({report.objective_unit})".replace(" ()", "")
    data = stages_data(report)
    return (
        alt.Chart(data, title=title)
        .mark_circle(size=90)
        .encode(
            x=alt.X("stage:N", title=None, sort=None, axis=alt.Axis(labelAngle=-20, labelLimit=220)),
            y=value_axis("value", data["value"], report.objective),
            color=alt.Color("decision:N", title="Decision"),
            tooltip=["stage", "candidate", "decision", alt.Tooltip("value:Q", format=".2f")],
        )
        .properties(width=WIDTH, height=HEIGHT)
    )


def load_curve_data(curve: LoadCurve) -> pd.DataFrame:
    """One row per point, with ``mark`` naming the peak, the saturation point and the SLO limit."""
    rows = []
    for point in curve.points:
        marks = []
        if point is curve.peak:
            marks.append("peak throughput")
        if point is curve.saturation:
            marks.append("saturation")
        if point is curve.slo_limit:
            marks.append("highest load within SLO")
        rows.append(
            {
                "load": point.load,
                "output_throughput": point.output_throughput,
                "p99_ttft_ms": point.figures.get("p99_ttft_ms"),
                "mean_tpot_ms": point.figures.get("mean_tpot_ms"),
                "within_slo": point.meets_slos,
                "mark": " & ".join(marks),
            }
        )
    columns = ["load", "output_throughput", "p99_ttft_ms", "mean_tpot_ms", "within_slo", "mark"]
    return pd.DataFrame(rows, columns=columns)


def load_curve_chart(title: str, curve: LoadCurve) -> alt.HConcatChart:
    """Throughput against load, and latency against throughput, peak and SLO limit marked."""
    data = load_curve_data(curve)
    load_title = LOAD_TITLES.get(curve.kind, "Load")
    base = alt.Chart(data)
    throughput = base.mark_line(point=True).encode(
        x=alt.X("load:Q", title=load_title),
        y=alt.Y("output_throughput:Q", title="Output tok/s"),
        tooltip=["load", alt.Tooltip("output_throughput:Q", format=".2f"), "within_slo"],
    )
    marks = (
        base.transform_filter(alt.datum.mark != "")
        .mark_rule(strokeDash=[4, 3])
        .encode(x="load:Q", color=alt.Color("mark:N", title="Marked"), tooltip=["mark", "load"])
    )
    latency = (
        base.transform_fold(["p99_ttft_ms", "mean_tpot_ms"], as_=["metric", "ms"])
        .mark_line(point=True)
        .encode(
            x=alt.X("output_throughput:Q", title="Output tok/s"),
            y=alt.Y("ms:Q", title="Latency (ms)", scale=alt.Scale(type="log")),
            color=alt.Color("metric:N", title="Latency"),
            tooltip=["load", "metric", alt.Tooltip("ms:Q", format=".1f")],
        )
    )
    return alt.hconcat(
        (throughput + marks).properties(width=WIDTH // 2 + 40, height=HEIGHT, title=title),
        latency.properties(width=WIDTH // 2 + 40, height=HEIGHT, title="Latency vs throughput"),
    ).resolve_scale(color="independent")


def report_charts(report: Report) -> dict[str, alt.TopLevelMixin]:
    """Every chart the report has data for, by name."""
    charts: dict[str, alt.TopLevelMixin] = {}
    if not comparison_data(report).empty:
        charts["comparison"] = comparison_chart(report)
    if not stages_data(report).empty:
        charts["stages"] = stages_chart(report)
    for index, (title, curve) in enumerate(report.curves, 1):
        charts[f"load_curve_{index}"] = load_curve_chart(title, curve)
    for entry in report.searches:
        charts.update(search_charts(entry, report.objective_unit))
    return charts
