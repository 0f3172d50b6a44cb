"""Charts of one run: throughput and requests in flight over time, engine queue and KV-cache, GPU
utilisation, latency distributions, and TTFT against input length per request.

Time-series charts take a profile's timeline (``ProfileView.timeline``: bins from 10 ms up, so a run
shorter than a second still draws a curve) or the run's samples (``RunDetail.samples``: ``engine``
rows with ``running``/``waiting``/``kv_cache_usage`` per replica, ``accelerator`` rows with
``gpu``/``utilization_pct``/``memory_used_mib`` and, where the host's tool reports them,
``power_w``/``sm_clock_mhz``/``temperature_c``), drawn once there are at least two sampling instants.
Time axes get as many decimals as their bins need; value axes print significant digits with thousands
separators (``5,000``, ``0.5``), never a fixed number of decimals.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from perflab.charts.common import CHART_HEIGHT, fixed_scale, highlight, legend_selection, number_tooltip
from perflab.views.distributions import cdf_points, metric_label
from perflab.views.timeline import Timeline

ENGINE_SERIES: dict[str, str] = {"running": "Running requests", "waiting": "Waiting requests (queue)"}
HISTOGRAM_BINS = 40
SCATTER_LIMIT = 5000
OUTCOME_COLORS = {"ok": "#4c78a8", "failed": "#e45756"}
VALUE_FORMAT = ",~r"
MIN_SAMPLING_INSTANTS = 2
LIVE_LATENCY_TITLE = "Mean E2EL of the requests that ended (s)"


def time_format(step_s: float) -> str:
    """The tick format of a time axis whose points are ``step_s`` apart (``,.2f`` for 10 ms bins)."""
    decimals = max(0, min(3, -int(np.floor(np.log10(step_s))))) if step_s > 0 else 1
    return f",.{decimals}f"


def _timeline(
    frame: pd.DataFrame,
    *,
    x: str,
    x_title: str,
    value_title: str,
    series_title: str,
    name: str,
    step_s: float = 1.0,
) -> alt.Chart:
    selection = legend_selection("series", name)
    return (
        alt.Chart(frame)
        .mark_line(point=alt.OverlayMarkDef(size=12))
        .encode(
            x=alt.X(f"{x}:Q", title=x_title, axis=alt.Axis(format=time_format(step_s))),
            y=alt.Y(
                "value:Q",
                title=value_title,
                scale=alt.Scale(zero=True, nice=True),
                axis=alt.Axis(format=VALUE_FORMAT, tickMinStep=1),
            ),
            color=alt.Color("series:N", title=series_title),
            opacity=highlight(selection),
            tooltip=[
                alt.Tooltip("series:N", title=series_title),
                alt.Tooltip(f"{x}:Q", title=x_title),
                number_tooltip("value", value_title),
            ],
        )
        .add_params(selection)
        .properties(height=CHART_HEIGHT)
    )


def _stacked(*charts: alt.Chart) -> alt.VConcatChart:
    """Charts one above the other, each with its own legend."""
    return alt.vconcat(*charts).resolve_scale(color="independent")


def _column_timelines(
    frame: pd.DataFrame,
    columns: tuple[tuple[str, str, str], ...],
    *,
    x: str,
    series_title: str,
    x_title: str = "Time (s)",
    step_s: float = 1.0,
) -> list[alt.Chart]:
    """A timeline of each ``(column, value title, selection name)`` that ``frame`` has a value of; a
    frame without a ``series`` column is one series named by the value title."""
    charts = []
    for column, title, name in columns:
        if column not in frame or frame[column].isna().all():
            continue
        values = frame.rename(columns={column: "value"})
        if "series" not in values:
            values = values.assign(series=title)
        charts.append(
            _timeline(
                values[[x, "series", "value"]].dropna(),
                x=x,
                x_title=x_title,
                value_title=title,
                series_title=series_title,
                name=name,
                step_s=step_s,
            )
        )
    return charts


def throughput_timeline(timeline: Timeline) -> alt.VConcatChart:
    """Output tokens/s (top) and requests in flight (bottom), one point per bin of the timeline."""
    width = f"{timeline.bin_s * 1000:g} ms" if timeline.bin_s < 1 else f"{timeline.bin_s:g} s"
    return _stacked(
        *_column_timelines(
            timeline.frame,
            (
                ("output_tokens_per_s", "Output tokens/s", "tokens"),
                ("requests_in_flight", "Requests in flight", "flight"),
            ),
            x="t",
            series_title="Series",
            x_title=f"Time since the first request (s), {width} bins",
            step_s=timeline.bin_s,
        )
    )


def live_timeline(frame: pd.DataFrame) -> alt.VConcatChart:
    """While a benchmark runs: requests completed per second and in flight (top), and the measured
    mean end-to-end latency in seconds of the requests that ended (bottom), from
    :func:`perflab.runner.live.live_frame`."""
    return _stacked(
        *_column_timelines(
            frame,
            (
                ("completed_per_s", "Requests completed/s", "live_rate"),
                ("requests_in_flight", "Requests in flight", "live_flight"),
                ("latency_s", LIVE_LATENCY_TITLE, "live_latency"),
            ),
            x="t",
            series_title="Series",
            x_title="Time since the benchmark started (s)",
        )
    )


def _sampling_step(times: pd.Series) -> float:
    """The smallest gap between distinct sampling instants (1 s when there is none)."""
    gaps = np.diff(np.unique(times.dropna().to_numpy(dtype=float)))
    return float(gaps.min()) if gaps.size else 1.0


def engine_timeline(samples: pd.DataFrame) -> alt.VConcatChart:
    """Running and waiting requests (summed over replicas) and KV-cache usage in % over time."""
    engine = samples[samples["source"] == "engine"]
    counts = [
        engine.groupby("t_s", as_index=False)[column]
        .sum()
        .rename(columns={column: "value"})
        .assign(series=label)
        for column, label in ENGINE_SERIES.items()
        if column in engine
    ]
    step_s = _sampling_step(engine["t_s"])
    queue = _timeline(
        pd.concat(counts, ignore_index=True),
        x="t_s",
        x_title="Time (s)",
        value_title="Requests",
        series_title="Engine",
        name="queue",
        step_s=step_s,
    )
    if "replica" in engine:
        kv = engine.assign(series="replica " + engine["replica"].astype("Int64").astype(str))
    else:
        kv = engine.assign(series="engine")
    kv = kv.assign(value=kv["kv_cache_usage"] * 100.0)[["t_s", "series", "value"]].dropna()
    cache = _timeline(
        kv,
        x="t_s",
        x_title="Time (s)",
        value_title="KV-cache usage (%)",
        series_title="Replica",
        name="kv",
        step_s=step_s,
    )
    return _stacked(queue, cache)


def _sampled(samples: pd.DataFrame, source: str, column: str) -> bool:
    """Whether ``samples`` has ``column`` from ``source`` at enough instants to draw a line."""
    if samples.empty or column not in samples:
        return False
    rows = samples[samples["source"] == source]
    return rows["t_s"].nunique() >= MIN_SAMPLING_INSTANTS


def has_samples(samples: pd.DataFrame) -> bool:
    """Whether the run stored any engine or accelerator sample."""
    return not samples.empty


def has_engine_samples(samples: pd.DataFrame) -> bool:
    """Whether the run has engine gauge samples to chart (at two instants at least)."""
    return _sampled(samples, "engine", "kv_cache_usage")


def has_accelerator_samples(samples: pd.DataFrame) -> bool:
    """Whether the run has accelerator utilisation samples to chart (at two instants at least)."""
    return _sampled(samples, "accelerator", "utilization_pct")


def accelerator_timeline(samples: pd.DataFrame) -> alt.VConcatChart:
    """Utilisation (%), memory used (MiB) and, where sampled, power (W), SM clock (MHz) and temperature
    (°C) of each of the run's accelerators over time."""
    gpus = samples[samples["source"] == "accelerator"]
    labelled = gpus.assign(series="GPU " + gpus["gpu"].astype("Int64").astype(str))
    return _stacked(
        *_column_timelines(
            labelled,
            (
                ("utilization_pct", "Utilisation (%)", "util"),
                ("memory_used_mib", "Memory used (MiB)", "memory"),
                ("power_w", "Power (W)", "power"),
                ("sm_clock_mhz", "SM clock (MHz)", "clock"),
                ("temperature_c", "Temperature (°C)", "temp"),
            ),
            x="t_s",
            series_title="Accelerator",
            step_s=_sampling_step(gpus["t_s"]),
        )
    )


def latency_histogram(values: np.ndarray, metric: str) -> alt.Chart:
    """Histogram of one latency metric's per-request values."""
    frame = pd.DataFrame({"value": values})
    title = metric_label(metric)
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("value:Q", bin=alt.Bin(maxbins=HISTOGRAM_BINS), title=title),
            y=alt.Y("count():Q", title="Requests"),
            tooltip=[alt.Tooltip("value:Q", bin=alt.Bin(maxbins=HISTOGRAM_BINS), title=title), "count():Q"],
        )
        .properties(height=CHART_HEIGHT)
    )


def latency_cdf(values: np.ndarray, metric: str) -> alt.Chart:
    """The empirical CDF of one latency metric."""
    title = metric_label(metric)
    return (
        alt.Chart(cdf_points(values))
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("value:Q", title=title),
            y=alt.Y("fraction:Q", title="Share of requests", axis=alt.Axis(format="%")),
            tooltip=[
                number_tooltip("value", title),
                alt.Tooltip("fraction:Q", format=".1%"),
            ],
        )
        .properties(height=CHART_HEIGHT)
    )


def ttft_scatter(records: pd.DataFrame) -> alt.Chart:
    """One point per request: input length against TTFT, failed requests marked."""
    frame = records.dropna(subset=["input_tokens", "ttft_ms"])
    if len(frame) > SCATTER_LIMIT:
        frame = frame.sample(SCATTER_LIMIT, random_state=0)
    frame = frame.assign(outcome=np.where(frame["success"].astype(bool), "ok", "failed"))
    selection = legend_selection("outcome", "outcome")
    return (
        alt.Chart(frame[["index", "input_tokens", "output_tokens", "ttft_ms", "e2el_ms", "outcome"]])
        .mark_circle(size=30)
        .encode(
            x=alt.X("input_tokens:Q", title="Input length (tokens)"),
            y=alt.Y("ttft_ms:Q", title="TTFT (ms)"),
            color=alt.Color("outcome:N", title="Request", scale=fixed_scale(OUTCOME_COLORS)),
            opacity=highlight(selection),
            tooltip=[
                alt.Tooltip("index:Q", title="Request"),
                alt.Tooltip("input_tokens:Q", title="Input tokens"),
                alt.Tooltip("output_tokens:Q", title="Output tokens"),
                alt.Tooltip("ttft_ms:Q", title="TTFT (ms)", format=",.2f"),
                alt.Tooltip("e2el_ms:Q", title="E2EL (ms)", format=",.2f"),
            ],
        )
        .add_params(selection)
        .properties(height=CHART_HEIGHT)
    )
