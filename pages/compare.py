"""Compare (``?compare=3,7,12&baseline=3``): the runs side by side against a baseline — every metric
with its % change (green better, red worse) and the runs ranked by throughput; when asked for, in
tabs drawn one at a time, grouped bars per profile, throughput vs latency with the Pareto front,
overlaid latency CDFs; charts as PNG, the table as CSV or markdown. Runs on different numbers of
accelerators are ranked, coloured and charted per accelerator. A run with a partial result is marked
``(partial)``. Results of another model, workload or dataset than the baseline's, or that cannot be
judged (too short, or riding an earlier run's prefix cache), are named in a warning and their changes
are not coloured (:mod:`perflab.views.comparable`)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from perflab import ui
from perflab.charts import compare as compare_charts
from perflab.views import budget, comparable, compare, distributions, urlstate
from perflab.views import cost as cost_views
from perflab.views.formatting import MISSING
from perflab.views.metrics import metric_for, metric_heading

ui.ensure_app_shell()

PAGE = "compare"


def heading(key: str) -> str:
    """A metric key as the widgets show it: ``Mean TPOT (ms)``."""
    metric = metric_for(key)
    return metric_heading(metric) if metric is not None else key


st.title("Compare runs")
run_ids = ui.url_run_ids()
if run_ids is None:
    typed = st.text_input("Run ids to compare", placeholder="3, 7, 12", key="compare_open_ids")
    if typed and st.button("Compare", key="compare_open"):
        st.query_params["compare"] = typed
        st.rerun()
    st.stop()

compared = ui.load_compare(run_ids)
missing = compared.missing_text()
if missing:
    st.warning(missing)
if not compared.runs:
    st.page_link("pages/runs.py", label="All runs", icon=":material/list:")
    st.stop()

budget_note = budget.budget_warning(compared.runs)
if budget_note:
    st.warning(budget_note, icon=":material/balance:")
for line in budget.spread_lines(compared.runs):
    st.info(line, icon=":material/stacked_line_chart:")

found_ids = [entry.run.id for entry in compared.runs]
baseline_id, baseline_note = urlstate.parse_baseline(ui.query_param("baseline"), found_ids)
if baseline_note:
    st.info(baseline_note)
names = {entry.run.id: entry.name for entry in compared.runs}
baseline_col, profile_col = st.columns(2, vertical_alignment="bottom")
baseline_id = baseline_col.selectbox(
    "Baseline",
    found_ids,
    index=found_ids.index(baseline_id),
    format_func=names.__getitem__,
    key="compare_baseline",
)
if ui.query_param("baseline") != str(baseline_id):
    st.query_params["baseline"] = str(baseline_id)
profile = profile_col.selectbox("Profile", compared.profiles(), key="compare_profile")
ui.copy_link_button(
    ui.share_link(PAGE, urlstate.compare_query(found_ids, baseline_id), current_page=PAGE), key="compare"
)

st.markdown(compare.runs_markdown(compared))

checked = comparable.comparability(compared, profile=profile, baseline_id=baseline_id)
for warning in checked.warnings:
    st.warning(warning, icon=":material/warning:")
for note in checked.notes:
    st.info(note, icon=":material/info:")
table = compare.comparison_table(
    compared,
    profile=profile,
    baseline_id=baseline_id,
    unjudged=checked.unjudged,
    marks=checked.marks,
)
st.subheader("Metrics")
if not table.metrics:
    st.info("None of these runs has a result for this profile yet.")
else:
    shown = compare.styled(table)
    st.dataframe(
        shown,
        key="compare_table",
        height=ui.table_height(len(table.metrics)),
        column_config=ui.fitted_columns(shown.data),
        placeholder=MISSING,
    )
    ranking = compare.ranking_text(compared, profile=profile)
    if ranking:
        st.caption(ranking)
    if any(metric.group in ("Cost", "Energy") for metric in table.metrics):
        st.caption(cost_views.COMPARE_NOTE.format(currency=ui.price_book().currency))
    ui.download_row(
        ui.Download(
            "Download CSV",
            compare.comparison_csv(table),
            "perflab-compare.csv",
            "compare_download_csv",
        ),
        ui.Download(
            "Download markdown",
            compare.comparison_markdown(table),
            "perflab-compare.md",
            "compare_download_markdown",
        ),
    )


def metric_box(place: Any, label: str, keys: tuple[str, ...], *, key: str) -> str:
    """A box picking one of the metrics ``keys`` by its heading; the throughput the runs are ranked
    by is picked first where it is among them."""
    first = keys.index(compared.throughput_key) if compared.throughput_key in keys else 0
    return str(place.selectbox(label, keys, index=first, format_func=heading, key=key))


def draw_bars() -> None:
    """One metric of every result, grouped by profile."""
    bar_metric = metric_box(st, "Metric", compare.BAR_METRICS, key="compare_bar_metric")
    bars = compare.bars_frame(compared, bar_metric)
    if bars.empty:
        st.caption("No run has this metric.")
        return
    ui.chart(
        compare_charts.grouped_bars(bars, heading(bar_metric)),
        key="bars",
        file_name=f"compare-{bar_metric}.png",
    )


def draw_pareto() -> None:
    """Throughput against latency, the Pareto front marked (per accelerator when budgets differ)."""
    latency_col, throughput_col = st.columns(2, vertical_alignment="bottom")
    latency_key = metric_box(latency_col, "Latency", compare.PARETO_LATENCIES, key="compare_latency")
    throughput_key = metric_box(
        throughput_col, "Throughput", compare.PARETO_THROUGHPUTS, key="compare_throughput"
    )
    points = compare.pareto_frame(
        compared, profile=profile, latency_key=latency_key, throughput_key=throughput_key
    )
    if points.empty:
        st.caption("No run has both figures for this profile.")
        return
    front = ", ".join(points.loc[points["on_front"], "run"])
    st.caption(f"Pareto front (no other run is both faster and higher-throughput): {front}")
    ui.chart(
        compare_charts.pareto_scatter(
            points, latency_title=heading(latency_key), throughput_title=heading(throughput_key)
        ),
        key="pareto",
        file_name="compare-pareto.png",
    )


def draw_cdfs() -> None:
    """Every run's CDF of one latency metric, overlaid."""
    cdf_metric = st.selectbox(
        "Latency metric",
        distributions.DISTRIBUTION_METRICS,
        format_func=distributions.metric_label,
        key="compare_cdf_metric",
    )
    curves, without_records = compare.cdf_frame(compared, profile=profile, metric=cdf_metric)
    if without_records:
        st.caption(
            f"No per-request records for {', '.join(without_records)} (imported summaries carry none)."
        )
    if not curves.empty:
        ui.chart(
            compare_charts.overlaid_cdfs(curves, distributions.metric_label(cdf_metric)),
            key="cdf",
            file_name=f"compare-{cdf_metric}-cdf.png",
        )


# Drawn when asked for, one at a time: only the open tab's chart is built and drawn.
CHARTS = {"Per profile": draw_bars, "Throughput vs latency": draw_pareto, "Latency distributions": draw_cdfs}
ui.lazy_box(
    "Charts: " + ", ".join(name.lower() for name in CHARTS),
    lambda: ui.lazy_tabs(CHARTS, key="compare_charts"),
    key="compare_charts_box",
)
