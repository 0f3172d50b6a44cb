"""The report's charts (Altair), and their PNG files (vl-convert).

- ``comparison``: Total TPS of the baseline and the optimized configuration for every benchmark case;
- ``stages``: every measured candidate of every stage, winners marked, with the best so far;
- ``load_curve_N``: a swept profile's throughput against its load, and its latency against its
  throughput, with the peak throughput and the highest load within the SLOs marked.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
import vl_convert

from perflab.report.model import Report
from perflab.study.loadcurve import LOAD_TITLES, LoadCurve

WIDTH = 520
HEIGHT = 260


def comparison_data(report: Report) -> pd.DataFrame:
    rows = []
    for row in report.comparison:
        for side, figures in (("Baseline", row.baseline), ("Optimized", row.optimized)):
            if figures is not None and figures.total_tps is not None:
                rows.append({"case": row.case, "side": side, "total_tps": figures.total_tps})
    return pd.DataFrame(rows, columns=["case", "side", "total_tps"])


def comparison_chart(report: Report) -> alt.Chart:
    """Grouped bars: baseline vs optimized node Total TPS per benchmark case."""
    return (
        alt.Chart(comparison_data(report), title="Baseline vs optimized")
        .mark_bar()
        .encode(
            x=alt.X("case:N", title=None, sort=None, axis=alt.Axis(labelAngle=-20, labelLimit=180)),
            xOffset=alt.XOffset("side:N", sort=["Baseline", "Optimized"]),
            y=alt.Y("total_tps:Q", title="Total TPS (tok/s, node)"),
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
    return (
        alt.Chart(stages_data(report), title=title)
        .mark_circle(size=90)
        .encode(
            x=alt.X("stage:N", title=None, sort=None, axis=alt.Axis(labelAngle=-20, labelLimit=220)),
            y=alt.Y("value:Q", title=report.objective),
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
    return charts


def png_bytes(chart: alt.TopLevelMixin, scale: float = 2.0) -> bytes:
    """The chart rendered to PNG."""
    return vl_convert.vegalite_to_png(vl_spec=chart.to_json(), scale=scale)
