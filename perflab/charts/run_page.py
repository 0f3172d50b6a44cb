"""The Run page's charts by name, as Vega-Lite specs built from a :class:`RunDetail`.

The page caches each spec with the run's data (keyed by the run's version: a finished run's charts are
built once), so a spec is built without Altair's schema validation here: the chart builders are
validated by the tests of :mod:`perflab.charts.run`.
"""

from __future__ import annotations

from typing import Any

import altair as alt

from perflab.charts import run as run_charts
from perflab.views import distributions
from perflab.views.run_detail import RunDetail

# Charts of one profile result (need its id; the latency ones also a metric) and of the whole run.
PROFILE_CHARTS: tuple[str, ...] = ("throughput", "histogram", "cdf", "scatter")
RUN_CHARTS: tuple[str, ...] = ("engine", "accelerators")


def _figure(detail: RunDetail, chart: str, profile_id: int | None, metric: str | None) -> alt.TopLevelMixin:
    if chart in RUN_CHARTS:
        builder = run_charts.engine_timeline if chart == "engine" else run_charts.accelerator_timeline
        return builder(detail.samples)
    if chart not in PROFILE_CHARTS:
        raise ValueError(f"unknown run chart {chart!r}")
    profile = next(profile for profile in detail.profiles if profile.id == profile_id)
    if chart == "throughput":
        return run_charts.throughput_timeline(profile.timeline)
    if chart == "scatter":
        return run_charts.ttft_scatter(profile.records)
    if metric is None:
        raise ValueError(f"the {chart} chart needs a latency metric")
    values = distributions.latency_values(profile.records, metric)
    builder = run_charts.latency_histogram if chart == "histogram" else run_charts.latency_cdf
    return builder(values, metric)


def chart_spec(
    detail: RunDetail, chart: str, *, profile_id: int | None = None, metric: str | None = None
) -> dict[str, Any]:
    """The Vega-Lite spec of ``chart`` (one of :data:`PROFILE_CHARTS` or :data:`RUN_CHARTS`)."""
    return _figure(detail, chart, profile_id, metric).to_dict(validate=False)
