"""The compare page's read model: the selected runs, their results for one profile, the metric table
with the % change against a baseline, and the data of its charts.

Every metric any compared result has gets a row; the change is ``(run − baseline) / baseline`` and
is judged by the metric's direction (higher throughput is better, lower latency is better), so
``better``/``worse`` drive the green/red styling and the exports. Each result carries its throughputs
per accelerator too (:func:`perflab.accelerators.per_accelerator_figures`). When the runs used
different numbers of accelerators, node totals do not compare: their rows show the values without a
change or a colour, and the runs are ranked, coloured and put on the Pareto front per accelerator.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import pandas as pd
from pandas.io.formats.style import Styler
from sqlmodel import Session

from db import crud
from perflab.accelerators import PER_ACCELERATOR, per_accelerator_figures
from perflab.cost.stored import CostContext
from perflab.csv_cells import frame_csv
from perflab.markdown_text import md_text
from perflab.views.cost import priced_views, run_costs
from perflab.views.distributions import cdf_points, latency_values
from perflab.views.formatting import (
    MISSING,
    PARTIAL_MARK,
    SIMULATED_MARK,
    format_change,
    format_metric,
    format_throughput,
    percent_change,
    shorten,
    shown_change,
)
from perflab.views.metrics import (
    KEY_METRICS,
    Direction,
    Metric,
    metric_for,
    metric_heading,
    metric_value,
    result_metrics,
)
from perflab.views.pareto import pareto_front
from perflab.views.run_detail import ProfileView, RunView, profile_views, run_view
from perflab.views.run_list import run_link

FIRST_RESULT = "First result of each run"
# The seeds' colours of gains and losses (as perflab.report.summary writes them), for the table's
# cells and its markdown export.
VERDICT_COLOURS: dict[str, str] = {"better": "lightgreen", "worse": "#fbcaca"}
THROUGHPUT_KEYS: frozenset[str] = frozenset(
    {"total_token_throughput", "output_throughput", "max_output_tokens_per_s"}
)
# Figures of the whole node: they compare only between runs on the same number of accelerators.
NODE_TOTAL_KEYS: frozenset[str] = THROUGHPUT_KEYS | {"request_throughput", "request_goodput"}
TOTAL_PER_ACCELERATOR = PER_ACCELERATOR["total_token_throughput"]
# Metrics offered for the grouped bars and for the two axes of the Pareto chart.
BAR_METRICS: tuple[str, ...] = (
    "total_token_throughput",
    TOTAL_PER_ACCELERATOR,
    *KEY_METRICS[1:],
    "p99_ttft_ms",
    "p99_tpot_ms",
)
PARETO_LATENCIES: tuple[str, ...] = (
    "mean_tpot_ms",
    "mean_ttft_ms",
    "p99_tpot_ms",
    "p99_ttft_ms",
    "mean_e2el_ms",
)
PARETO_THROUGHPUTS: tuple[str, ...] = (
    "total_token_throughput",
    TOTAL_PER_ACCELERATOR,
    "output_throughput",
    PER_ACCELERATOR["output_throughput"],
    "request_throughput",
)


@dataclass(frozen=True)
class CompareRun:
    """A compared run and all of its profile results."""

    run: RunView
    results: list[ProfileView]

    @property
    def name(self) -> str:
        """The run's column name: ``#12 · label`` (unique by its id), marked when simulated and when a
        result of it is partial."""
        detail = self.run.label or " ".join(
            part for part in (self.run.engine, self.run.knobs_summary or self.run.model) if part
        )
        name = f"#{self.run.id}" + (f" · {shorten(detail, 40)}" if detail else "")
        if self.run.simulated:
            name += f" {SIMULATED_MARK}"
        if self.partial:
            name += f" {PARTIAL_MARK}"
        return name

    @property
    def partial(self) -> bool:
        """Whether any of its results is partial (its benchmark stopped early)."""
        return any(result.partial for result in self.results)

    def result_for(self, profile: str) -> ProfileView | None:
        """Its result for ``profile`` (a title, or :data:`FIRST_RESULT`)."""
        if profile == FIRST_RESULT:
            return self.results[0] if self.results else None
        return next((result for result in self.results if result.title == profile), None)


@dataclass(frozen=True)
class CompareSet:
    """The runs found for the requested ids (in that order) and the ids that do not exist."""

    runs: list[CompareRun]
    missing: list[int]

    def profiles(self) -> list[str]:
        """:data:`FIRST_RESULT` and the distinct profile titles of the runs' results."""
        titles = dict.fromkeys(result.title for run in self.runs for result in run.results)
        return [FIRST_RESULT, *titles]

    def missing_text(self) -> str | None:
        """Which requested ids do not exist, and what the page does about it (None when all exist)."""
        if not self.missing:
            return None
        ids = ", ".join(str(run_id) for run_id in self.missing)
        named = f"No run with id {ids} exists" if len(self.missing) == 1 else f"No runs with ids {ids} exist"
        return named + ("; comparing the others." if self.runs else ". Pick runs on the Runs page.")

    def run(self, run_id: int) -> CompareRun:
        return next(run for run in self.runs if run.run.id == run_id)

    @property
    def budgets_differ(self) -> bool:
        """Whether the runs used different numbers of accelerators (unknown counts left out)."""
        return len({run.run.accelerators for run in self.runs if run.run.accelerators}) > 1

    @property
    def throughput_key(self) -> str:
        """The throughput the runs are ranked and charted by: Total tok/s per accelerator when their
        budgets differ, else the node's Total tok/s."""
        return TOTAL_PER_ACCELERATOR if self.budgets_differ else "total_token_throughput"


def load_compare(session: Session, run_ids: list[int], costs: CostContext | None = None) -> CompareSet:
    """The runs of ``run_ids`` with their results and request records, each result with its cost and
    energy figures (priced by ``costs``)."""
    found = crud.get_runs(session, run_ids=run_ids)
    found_ids = {run.id for run in found}
    context = costs or CostContext()
    runs = []
    for run in found:
        view = run_view(run)
        priced = priced_views(profile_views(session, run.id), run_costs(session, run.id, context))
        runs.append(CompareRun(run=view, results=[_with_per_accelerator(result, view) for result in priced]))
    return CompareSet(runs=runs, missing=[run_id for run_id in run_ids if run_id not in found_ids])


def _with_per_accelerator(result: ProfileView, run: RunView) -> ProfileView:
    """``result`` with its throughputs per accelerator among its fields."""
    figures = per_accelerator_figures(
        result.result, replicas=run.replicas, imported=run.source == "imported", accelerators=run.accelerators
    )
    return replace(result, result={**result.result, **figures}) if figures else result


@dataclass(frozen=True)
class ComparisonTable:
    """Metric rows × run columns with each run's change against the baseline.

    ``values`` holds the numbers (rows: metric keys; columns: run names), ``changes`` the % changes
    (NaN for the baseline, missing values, and node totals of runs whose budgets differ),
    ``verdicts`` ``better``/``worse``/``""`` per cell (``""`` for every cell of a run in ``unjudged``:
    its result does not measure what the baseline's does, :mod:`perflab.views.comparable`); ``marks``
    the heading marks of the columns whose results cannot be judged (``(too short to judge)``).
    """

    metrics: list[Metric]
    run_names: list[str]
    baseline: str
    replicas: dict[str, int]
    values: pd.DataFrame
    changes: pd.DataFrame
    verdicts: pd.DataFrame
    budgets_differ: bool = False
    marks: Mapping[str, str] = field(default_factory=dict)


def verdict(change: float | None, direction: Direction) -> str:
    """``better``, ``worse`` or ``""`` (no change as printed, no direction, or nothing to compare)."""
    if change is None or direction is None or pd.isna(change) or shown_change(change) == 0:
        return ""
    improved = change > 0 if direction == "higher" else change < 0
    return "better" if improved else "worse"


def comparison_table(
    compare: CompareSet,
    *,
    profile: str,
    baseline_id: int,
    unjudged: frozenset[str] = frozenset(),
    marks: Mapping[str, str] | None = None,
) -> ComparisonTable:
    """The metric table of ``profile`` with changes against run ``baseline_id``; the changes of the runs
    named in ``unjudged`` are neither better nor worse, the columns named in ``marks`` marked."""
    results = {run.name: run.result_for(profile) for run in compare.runs}
    baseline = compare.run(baseline_id).name
    metrics = result_metrics(result.result for result in results.values() if result is not None)
    keys = [metric.key for metric in metrics]
    values = pd.DataFrame(
        {
            name: [metric_value(result.result, key) if result else None for key in keys]
            for name, result in results.items()
        },
        index=keys,
        dtype="float64",
    )
    uncompared = NODE_TOTAL_KEYS if compare.budgets_differ else frozenset()
    changes = pd.DataFrame(
        {
            name: [
                None
                if name == baseline or key in uncompared
                else percent_change(_value(values, key, name), _value(values, key, baseline))
                for key in keys
            ]
            for name in results
        },
        index=keys,
        dtype="float64",
    )
    verdicts = pd.DataFrame(
        {
            name: [
                "" if name in unjudged else verdict(_value(changes, metric.key, name), metric.direction)
                for metric in metrics
            ]
            for name in results
        },
        index=keys,
        dtype="object",
    )
    return ComparisonTable(
        metrics=metrics,
        run_names=list(results),
        baseline=baseline,
        replicas={run.name: run.run.replicas for run in compare.runs},
        values=values,
        changes=changes,
        verdicts=verdicts,
        budgets_differ=compare.budgets_differ,
        marks=dict(marks or {}),
    )


def ranking(compare: CompareSet, *, profile: str) -> list[tuple[str, float]]:
    """The runs with a result for ``profile`` from fastest to slowest by
    :attr:`CompareSet.throughput_key`, with that figure."""
    ranked = []
    for run in compare.runs:
        result = run.result_for(profile)
        value = metric_value(result.result, compare.throughput_key) if result is not None else None
        if value is not None:
            ranked.append((run.name, value))
    return sorted(ranked, key=lambda item: -item[1])


def ranking_text(compare: CompareSet, *, profile: str) -> str | None:
    """``Ranked by total token throughput per accelerator (tok/s): 1. #82 … 3226.48 · 2. …`` (None
    with fewer than two ranked runs)."""
    ranked = ranking(compare, profile=profile)
    metric = metric_for(compare.throughput_key)
    if len(ranked) < 2 or metric is None:
        return None
    places = " · ".join(f"{place}. {name} {value:.2f}" for place, (name, value) in enumerate(ranked, 1))
    return f"Ranked by {metric_heading(metric).lower()}: {places}"


def _value(frame: pd.DataFrame, key: str, column: str) -> float | None:
    value = frame.at[key, column]
    return None if pd.isna(value) else float(value)


def _cell(table: ComparisonTable, metric: Metric, name: str) -> str:
    value = _value(table.values, metric.key, name)
    if metric.key in THROUGHPUT_KEYS:
        text = format_throughput(value, table.replicas.get(name, 1))
    else:
        text = format_metric(metric, value)
    if name == table.baseline or text == MISSING:
        return text
    change = _value(table.changes, metric.key, name)
    return f"{text} ({format_change(change)})" if change is not None else text


def column_name(table: ComparisonTable, name: str) -> str:
    """A run's column heading: its name, marked when it is the baseline and when its result cannot be
    judged (``(too short to judge)``)."""
    marks = ["(baseline)"] if name == table.baseline else []
    if name in table.marks:
        marks.append(table.marks[name])
    return " ".join([name, *marks])


def display_frame(table: ComparisonTable) -> pd.DataFrame:
    """The table as text cells (``3019.19 ×2 (+59.2%)``), the baseline's column marked."""
    columns = {name: column_name(table, name) for name in table.run_names}
    rows = {
        metric_heading(metric): {columns[name]: _cell(table, metric, name) for name in table.run_names}
        for metric in table.metrics
    }
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=list(columns.values()))
    frame.index.name = "Metric"
    return frame


def styled(table: ComparisonTable) -> Styler:
    """:func:`display_frame` with better cells green and worse cells red."""
    frame = display_frame(table)
    styles = pd.DataFrame(
        [
            [_style(table.verdicts.iat[row, column]) for column in range(len(table.run_names))]
            for row in range(len(table.metrics))
        ],
        index=frame.index,
        columns=frame.columns,
    )
    return frame.style.apply(lambda _: styles, axis=None)


def _style(verdict_text: str) -> str:
    colour = VERDICT_COLOURS.get(verdict_text)
    return f"background-color: {colour}" if colour else ""


def comparison_markdown(table: ComparisonTable) -> str:
    """The table as markdown, better changes in green and worse in red spans like the seeds (run
    names escaped)."""
    frame = display_frame(table)
    header = ["Metric", *(md_text(column) for column in frame.columns)]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row, metric in enumerate(table.metrics):
        cells = []
        for column, name in enumerate(table.run_names):
            text = frame.iat[row, column]
            colour = VERDICT_COLOURS.get(table.verdicts.at[metric.key, name])
            cells.append(f'<span style="background-color:{colour};">{text}</span>' if colour else text)
        lines.append("| " + " | ".join([frame.index[row], *cells]) + " |")
    return "\n".join(lines) + "\n"


def comparison_csv(table: ComparisonTable) -> str:
    """One row per metric: key, label, unit, direction, then each run's value and % change."""
    frame = pd.DataFrame(
        {
            "metric": [metric.key for metric in table.metrics],
            "label": [metric.label for metric in table.metrics],
            "unit": [metric.unit for metric in table.metrics],
            "better": [metric.direction or "" for metric in table.metrics],
        }
    )
    for name in table.run_names:
        frame[name] = table.values[name].to_numpy()
        if name != table.baseline:
            frame[f"{name} change %"] = table.changes[name].round(2).to_numpy()
    return frame_csv(frame)


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]#|<>~])")


def markdown_text(text: str) -> str:
    """``text`` as literal markdown table-cell text (special characters escaped, one line)."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def runs_markdown(compare: CompareSet) -> str:
    """The compared runs' facts as a markdown table whose cells wrap, what tells them apart first
    (engine, knobs — never cut —, profiles, accelerators), then the model and where they ran; each
    run links to its page."""
    header = ["Run", "Engine", "Knobs", "Profiles", "Accelerators", "Model", "Where"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for run in compare.runs:
        facts = run.run
        where = " · ".join(part for part in (facts.host_display, facts.accelerator or "") if part)
        cells = [
            f"[{markdown_text(run.name)}]({run_link(facts.id)})",
            markdown_text(facts.engine or MISSING),
            markdown_text(facts.knobs_summary or MISSING),
            markdown_text(", ".join(result.marked_title for result in run.results) or MISSING),
            str(facts.accelerators) if facts.accelerators else MISSING,
            markdown_text(facts.model or MISSING),
            markdown_text(where or MISSING),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def bars_frame(compare: CompareSet, metric_key: str) -> pd.DataFrame:
    """``profile``, ``run``, ``value`` of ``metric_key`` for every result of every run."""
    rows = [
        {"profile": result.title, "run": run.name, "value": metric_value(result.result, metric_key)}
        for run in compare.runs
        for result in run.results
    ]
    frame = pd.DataFrame(rows, columns=["profile", "run", "value"])
    return frame.dropna(subset=["value"]).reset_index(drop=True)


def pareto_frame(compare: CompareSet, *, profile: str, latency_key: str, throughput_key: str) -> pd.DataFrame:
    """One point per run with both values: ``run``, ``latency``, ``throughput``, ``on_front``."""
    rows = []
    for run in compare.runs:
        result = run.result_for(profile)
        if result is None:
            continue
        latency = metric_value(result.result, latency_key)
        throughput = metric_value(result.result, throughput_key)
        if latency is not None and throughput is not None:
            rows.append({"run": run.name, "latency": latency, "throughput": throughput})
    frame = pd.DataFrame(rows, columns=["run", "latency", "throughput"])
    frame["on_front"] = pareto_front(frame["latency"].tolist(), frame["throughput"].tolist())
    return frame


def cdf_frame(compare: CompareSet, *, profile: str, metric: str) -> tuple[pd.DataFrame, list[str]]:
    """Overlaid CDF points (``run``, ``value``, ``fraction``) and the runs without request records."""
    frames, without = [], []
    for run in compare.runs:
        result = run.result_for(profile)
        values = latency_values(result.records, metric) if result is not None else None
        if values is None or values.size == 0:
            without.append(run.name)
            continue
        points = cdf_points(values)
        points.insert(0, "run", run.name)
        frames.append(points)
    frame = (
        pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run", "value", "fraction"])
    )
    return frame, without
