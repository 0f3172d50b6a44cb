"""The report as a markdown document in the seeds' layout (MkDocs Material admonitions).

Conclusion (serving command, comparison table), Optimization Objective, Experimental Setup (model,
hardware, engine versions, datasets, the ``vllm bench serve`` commands), one section per stage with
each candidate's serving script and benchmark result block (or ``# RuntimeError: …`` lines), the Summary of
Optimization Options, Other Benchmark Cases, and the load curves when the tuning profile was swept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from perflab.markdown_text import fence, md_text
from perflab.report.costs import cost_table_rows
from perflab.report.model import (
    BenchBlock,
    CandidateSection,
    ComparisonRow,
    Figures,
    LaunchRow,
    Report,
    StageSection,
)
from perflab.report.predictions import prediction_lines
from perflab.report.published import PublishedGain, percent_text
from perflab.report.search_section import search_lines
from perflab.report.summary import coloured, ranked
from perflab.study.decide import detectable_text
from perflab.study.loadcurve import LOAD_TITLES, LoadCurve
from perflab.views.formatting import counted

INDENT = "    "
LAUNCH_KINDS = {
    "first": "first",
    "again": "again",
    "validation": "validation only",
    "confirmation": "confirmation",
}


def _indented(lines: Sequence[str]) -> list[str]:
    return [f"{INDENT}{line}" if line else "" for line in lines]


def _fenced(text: str, language: str = "") -> list[str]:
    marker = fence(text)
    return [f"{marker}{language}", *text.rstrip("\n").splitlines(), marker]


def _admonition(kind: str, title: str, body: Sequence[str], *, open_: bool = False) -> list[str]:
    marker = "???+" if open_ else "???"
    return [f'{marker} {kind} "{title}"', *_indented(body), ""]


def _cell(
    figures: Figures | None, gain: PublishedGain | None, decimals: int, writeup: float | None = None
) -> str:
    if figures is None:
        return "not measured"
    if figures.short is not None:
        return md_text(figures.short)
    tps = f"Total TPS: {figures.tps_text}"
    if gain is not None:
        tps += " " + coloured(f"({gain.text(decimals)})", gain.change)
    if writeup is not None:
        tps += f" (the write-up's {percent_text(writeup, decimals)})"
    sample = f"<br>({figures.sample_text})" if figures.sample_text else ""
    return f"{tps}<br>Mean TPOT(ms): {figures.tpot_text}{sample}"


def comparison_table(rows: Sequence[ComparisonRow], decimals: int) -> list[str]:
    """The Conclusion's baseline-vs-optimized table."""
    lines = [
        "| Benchmark Case | Baseline | Optimized |",
        "|----------|-------------------------------------------|-----------|",
    ]
    for row in rows:
        baseline = _cell(row.baseline, None, decimals)
        optimized = _cell(row.optimized, row.gain, decimals, row.writeup)
        lines.append(f"| **{md_text(row.case)}** | {baseline} | {optimized} |")
    return lines


def comparison_note(report: Report) -> str | None:
    """What a change in the comparison is where no decision made it (a validation case, a stage that kept
    nothing, an imported write-up's figures), with how many results each side's mean holds."""
    undecided = [
        row
        for row in report.comparison
        if row.gain is not None and not row.gain.decided and row.baseline and row.optimized
    ]
    if not undecided:
        return None
    counts = {(row.baseline.count_text, row.optimized.count_text) for row in undecided}
    if len(counts) == 1:
        baseline, optimized = counts.pop()
        measured = f"{baseline} against {optimized}"
    else:
        measured = "; ".join(
            f"{row.case}: {row.baseline.count_text} against {row.optimized.count_text}" for row in undecided
        )
    return (
        "A change without ± is the ratio of the two configurations' means, not a decision: no interval, "
        f"no verdict ({measured})."
    )


def conclusion_table(report: Report) -> list[str]:
    """The baseline-vs-optimized table with each case's cost row after the throughput rows."""
    decimals = report.decimals
    return [*comparison_table(report.comparison, decimals), *cost_table_rows(report.costs, decimals)]


def summary_table(report: Report) -> list[str]:
    """The "Summary of Optimization Options" table (a cost objective's column says how cost changed):
    each figure in its own column, each column saying what it is against."""
    column = "Cost Change" if report.lower_is_better else "Throughput Improvement"
    sign = -1 if report.lower_is_better else 1
    lines = [
        f"| Optimization Option | {column} | Against the Baseline | Not Kept (against the best before it) |",
        "|-----------------------------|-------------------------------------|---------------------|---|",
    ]
    for row in report.summary:
        improvement = row.improvement
        gain = (
            "-"
            if improvement is None
            else coloured(improvement.text(report.decimals), sign * improvement.change)
        )
        versus = "-" if row.versus_baseline is None else row.versus_baseline.text(report.decimals)
        lines.append(
            f"| {md_text(row.option)} | {gain} | {versus} | {md_text(row.note) if row.note else '-'} |"
        )
    note = summary_note(report)
    return [*lines, "", note] if note else lines


def summary_note(report: Report) -> str | None:
    """What the Summary's figures are, where a decision with its noise made one of them."""
    decided = any(row.improvement is not None and row.improvement.decided for row in report.summary)
    if not decided and not any(row.note and " ± " in row.note for row in report.summary):
        return None
    return (
        "Every percentage is new ÷ old − 1 (0.943× is −5.7%). A kept stage's figure is its decision's "
        "published gain against the best configuration before it, with its interval; against the baseline, "
        "the published gains of the kept stages so far one after the other (the last one the "
        "recommendation's). A stage that kept nothing is measured against the baseline (the ratio of the "
        "means), its decision in the last column."
    )


def _blocks(blocks: Sequence[BenchBlock], *, named: bool) -> list[str]:
    body: list[str] = []
    for block in blocks:
        if body:
            body.append("")
        if named and not block.failed:
            body.append(f"# {block.case}")
        body.extend(block.text.splitlines())
    return body


def _candidate(candidate: CandidateSection, *, show_label: bool) -> list[str]:
    lines = [md_text(candidate.label)] if show_label else []
    if candidate.serve_command:
        lines += _admonition("info", "Serving script", _fenced(candidate.serve_command, "bash"))
    if candidate.blocks:
        sample = candidate.figures.sample_text if candidate.figures is not None else None
        if sample and candidate.figures is not None:
            shown = "first run" if len(candidate.blocks) == 1 else "runs"
            lines += [
                f"Judged on the {sample}: Total TPS {candidate.figures.tps_text}. Below: the latest "
                f"launch's {shown}.",
                "",
            ]
        lines += _admonition(
            "info", "Benchmark result", _fenced("\n".join(_blocks(candidate.blocks, named=False)))
        )
    elif candidate.status and candidate.decision is None:
        lines += [
            f"Not measured yet (run {candidate.run_id}: {md_text(candidate.state or candidate.status)}).",
            "",
        ]
    return lines


def _ranking(stage: StageSection, unit: str, lower_is_better: bool) -> list[str]:
    ordered = ranked(stage, lower_is_better=lower_is_better)
    if len(ordered) < 2:
        return []
    # costs are small numbers (0.0042 per 1M tokens): four significant digits rather than two decimals
    digits = ".4g" if lower_is_better else ".2f"
    shown = [f"{md_text(c.label)} ({c.value:{digits}} {unit})".replace(" )", ")") for c in ordered]
    line = "Result: " + (" < " if lower_is_better else " > ").join(shown)
    if any(c.launches > 1 for c in ordered):
        line += " (means over each configuration's launches)"
    return [line, ""]


def _decision(candidate: CandidateSection) -> str:
    """``not better (lower than previous)``; a note that already names the decision stands alone."""
    words = candidate.state or (candidate.decision or "").replace("_", " ")
    if not candidate.note:
        return words
    return md_text(candidate.note) if words in candidate.note else f"{words} ({md_text(candidate.note)})"


def _decisions(stage: StageSection) -> list[str]:
    lines = [f"- {md_text(c.label)}: {_decision(c)}" for c in stage.candidates if c.decision]
    return [*lines, ""] if lines else []


def stage_lines(stage: StageSection, unit: str, *, lower_is_better: bool = False) -> list[str]:
    """One stage's section."""
    lines = [f"### {stage.index}. {md_text(stage.name)}", ""]
    for candidate in stage.candidates:
        lines += _candidate(candidate, show_label=True)
    if not stage.decided:
        lines += ["This stage is still running.", ""]
    return lines + _ranking(stage, unit, lower_is_better) + _decisions(stage)


def _setup(report: Report) -> list[str]:
    lines = [
        "## Experimental Setup",
        "",
        "### Model",
        "",
        md_text(report.model) if report.model else "not recorded",
        "",
        "### Hardware",
        "",
    ]
    lines += [md_text(report.hardware) if report.hardware else "not recorded", ""]
    if report.slos:
        lines += [
            "### Service Level Objectives",
            "",
            "A configuration that breaks one is infeasible: never kept, never recommended.",
            "",
            *(f"- {md_text(name)} ≤ {limit:g}" for name, limit in report.slos.items()),
            "",
        ]
    if report.engine_versions:
        lines += [
            "### Engine Version",
            "",
            *(f"- {md_text(engine)}: {md_text(version)}" for engine, version in report.engine_versions),
            "",
        ]
    if report.datasets:
        lines += [
            "### Benchmark Dataset",
            "",
            *(f"{i}. {md_text(text)}" for i, text in enumerate(report.datasets, 1)),
            "",
        ]
    if report.bench_commands:
        script: list[str] = []
        for title, command in report.bench_commands:
            script += [*([""] if script else []), f"# {title}", command]
        lines += [
            "### Benchmark Script",
            "",
            "The equivalent **vLLM bench CLI** commands of the benchmark profiles:",
            "",
            *_fenced("\n".join(script), "bash"),
            "",
        ]
    return lines


def _curve(title: str, curve: LoadCurve, chart: str | None) -> list[str]:
    lines = [f"### {md_text(title)}", ""]
    if chart:
        lines += [f"![{md_text(title)}]({chart})", ""]
    slo_columns = list(curve.slos)
    header = [
        LOAD_TITLES.get(curve.kind, "Load"),
        "Output tok/s",
        "Total tok/s",
        "p99 TTFT (ms)",
        "Mean TPOT (ms)",
    ]
    lines.append("| " + " | ".join([*header, "Within SLO"]) + " |")
    lines.append("|" + "---|" * (len(header) + 1))
    for point in curve.points:
        figures = point.figures
        cells = [
            f"{point.load:g}",
            f"{point.output_throughput:.2f}",
            f"{point.total_token_throughput:.2f}",
            f"{figures.get('p99_ttft_ms', float('nan')):.2f}",
            f"{figures.get('mean_tpot_ms', float('nan')):.2f}",
            ("yes" if point.meets_slos else "no: " + md_text("; ".join(point.violations)))
            if slo_columns
            else "-",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    if curve.peak is not None:
        peak = curve.peak
        lines.append(
            f"- Peak throughput: {peak.output_throughput:.2f} output tok/s at {peak.load:g} {curve.unit}"
        )
    if curve.saturation is not None:
        saturation = curve.saturation.load
        lines.append(f"- Saturation: throughput reaches its plateau at {saturation:g} {curve.unit}")
    if slo_columns:
        limits = ", ".join(f"{name} ≤ {limit:g}" for name, limit in curve.slos.items())
        found = f"{curve.slo_limit.load:g} {curve.unit}" if curve.slo_limit else "no load meets them"
        lines.append(f"- Highest load within the SLOs ({limits}): {found}")
    return [*lines, ""]


def _incomplete(report: Report) -> list[str]:
    """The warning of an incomplete study: its unmeasured candidates, and no claim over them."""
    if not report.unmeasured:
        return []
    body = [
        "These candidates could not be measured because of the infrastructure (not a result):",
        "",
        *(
            f"- {md_text(item.stage)} · {md_text(item.label)}: {md_text(item.reason)}"
            for item in report.unmeasured
        ),
        "",
    ]
    if report.provisional_best:
        body.append(
            f"No configuration is recommended over them: {md_text(report.provisional_best)}, the best "
            "measured so far, is provisional until they are measured."
        )
    else:
        body.append("Nothing can be recommended until they are measured.")
    return _admonition("warning", "Incomplete study", body, open_=True)


def replicas_note(report: Report) -> str | None:
    """How to read a recommendation of N replicas: ``Run 8 replicas of it per node; Total TPS is written
    per replica ×8 (618.28×8 is 618.28 tok/s per replica, 4946.24 for the node).`` (None for one)."""
    replicas = report.recommended_replicas
    if replicas <= 1:
        return None
    row = report.comparison[0] if report.comparison else None
    figures = row.optimized if row is not None else None
    text = f"Run {replicas} replicas of it per node; Total TPS is written per replica ×{replicas}"
    if figures is None or figures.total_tps is None or figures.replicas != replicas:
        return f"{text} (one replica's figure, ×{replicas} for the node)."
    node = figures.total_tps
    return f"{text} ({figures.tps_text} is {node / replicas:.2f} tok/s per replica, {node:.2f} for the node)."


def per_accelerator_lines(report: Report) -> list[str]:
    """The first case's Total TPS per accelerator beside the node totals, the gain's confidence, the
    candidates no verdict could separate, each stage's choice between aggregated and disaggregated
    serving, and the baseline's measured spread."""
    lines = []
    row = report.comparison[0] if report.comparison else None
    counts = report.accelerators
    gain = row.gain if row is not None else None
    if row is not None and row.baseline and row.optimized and gain is not None and None not in counts:
        base = row.baseline.total_tps / counts[0] if row.baseline.total_tps is not None else None
        best = row.optimized.total_tps / counts[1] if row.optimized.total_tps is not None else None
        if base is not None and best is not None:
            change = gain.scaled(counts[0] / counts[1]).text(report.decimals)
            on_base, on_best = (counted(count, "accelerator") for count in counts)
            lines.append(
                f"Per accelerator ({md_text(row.case)}): baseline {base:.2f} tok/s on {on_base}, optimized "
                f"{best:.2f} tok/s on {on_best} ({change})."
            )
            if counts[0] != counts[1]:
                lines.append("The two used different numbers of accelerators: compare them per accelerator.")
    if report.published is not None:
        lines.append(
            f"Gain over the baseline: {report.published.sentence(report.decimals)}. This is the figure of "
            "every table above and below: the published gain is each kept stage's gain on fresh "
            "confirmation launches (until they are measured, its measured gain less the bias of being "
            "kept; docs/studies.md), so it can differ from the ratio of the measured means shown beside it."
        )
    if report.within_noise:
        lines.append(
            "Within noise, neither kept nor beaten (gain against the best configuration so far): "
            + "; ".join(md_text(text) for text in report.within_noise)
            + "."
        )
    lines += [md_text(choice.text()) for choice in report.layouts]
    lines += [md_text(line) for line in spread_lines(report)]
    return [part for line in lines for part in (line, "")]


def spread_lines(report: Report) -> list[str]:
    """The noise the decisions used, as sentences: the study's spread (today's and the one offered from
    an earlier study, with its source, age and why it was or was not used), the baseline's split, and the
    true gain the study keeps 80 % of the time."""
    spread = report.spread
    lines = []
    if spread.study is not None:
        lines.append(f"Spread of the verdicts: {spread.study.text()}.")
    if spread.baseline is not None:
        lines.append(f"Measured spread of the baseline: {spread.baseline.text()}.")
    if spread.detectable_gain_pct is not None:
        said = detectable_text(spread.detectable_gain_pct)
        lines.append(f"{said[0].upper()}{said[1:]}.")
    elif spread.study is not None and not spread.study.known:
        lines.append("Noise unknown: nothing was measured twice, so no change over the baseline is kept.")
    return lines


def launches_table(launches: Sequence[LaunchRow], unit: str) -> list[str]:
    """Every launch of the study: its run, configuration, why it was launched, its status, its complete
    runs of the tuning profile and their mean."""
    marks = any(launch.marks for launch in launches)
    header = ["Run", "Configuration", "Launch", "Status", "Runs", f"Mean ({unit})" if unit else "Mean"]
    lines = [
        "| " + " | ".join(header + (["Marks"] if marks else [])) + " |",
        "|" + "---|" * (len(header) + marks),
    ]
    for launch in launches:
        cells = [
            str(launch.run_id),
            md_text(launch.configuration),
            LAUNCH_KINDS.get(launch.kind, launch.kind),
            md_text(launch.status),
            str(launch.runs),
            "-" if launch.value is None else f"{launch.value:.2f}",
        ]
        if marks:
            cells.append(md_text(", ".join(launch.marks)) or "-")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def render_markdown(report: Report, charts: Mapping[str, str] | None = None) -> str:
    """The report's markdown; ``charts`` maps chart names (``comparison``, ``stages``, ``load_curve_1``…)
    to the relative paths of their PNG files."""
    charts = dict(charts or {})
    lines = [f"# {md_text(report.title)}", "", "## Conclusion", ""]
    if "comparison" in charts:
        lines += [f"![Baseline vs optimized]({charts['comparison']})", ""]
    if report.recommended_command:
        model = md_text(report.model) if report.model else "the model"
        lines += [f"Recommended configuration for {md_text(report.objective)} of {model}:", ""]
        lines += _admonition(
            "tip", "Serving Command", _fenced(report.recommended_command, "bash"), open_=True
        )
        note = replicas_note(report)
        if note is not None:
            lines += [md_text(note), ""]
    lines += _incomplete(report)
    lines += ["Comparison of benchmark results before and after optimization:", ""]
    lines += [*conclusion_table(report), ""]
    note = comparison_note(report)
    if note is not None:
        lines += [md_text(note), ""]
    lines += per_accelerator_lines(report)
    notes = [*report.notes, *report.caveats]
    lines += _admonition(
        "note", "Notes", [f"{i}. {md_text(note)}" for i, note in enumerate(notes, 1)], open_=True
    )
    aim = "Minimize" if report.lower_is_better else "Maximize"
    goal = md_text(report.goal) if report.goal else f"{aim} {md_text(report.objective)}."
    lines += ["## Optimization Objective", "", goal, ""]
    lines += _setup(report)
    lines += ["## Experiment Results", ""]
    if report.baseline is not None:
        lines += ["### Baseline", "", *_candidate(report.baseline, show_label=False)]
    unit = report.objective_unit
    searches = {search.stage: search for search in report.searches}
    for stage in report.stages:
        lines += stage_lines(stage, unit, lower_is_better=report.lower_is_better)
        if stage.index in searches:
            lines += search_lines(searches[stage.index], unit, charts)
    if "stages" in charts:
        lines += [f"![Stage progression]({charts['stages']})", ""]
    lines += ["### Summary of Optimization Options", "", *summary_table(report), ""]
    lines += prediction_lines(report.predictions, md_text)
    if report.baseline_validation or report.optimized_validation:
        lines += [
            "### Other Benchmark Cases",
            "",
            "We further benchmarked the optimized configuration to evaluate its generalization under other "
            "workloads.",
            "",
        ]
        for side, section in (
            ("Baseline", report.baseline_validation),
            ("Optimized", report.optimized_validation),
        ):
            if section is None:
                continue
            if section.serve_command:
                lines += _admonition("info", f"{side} serving script", _fenced(section.serve_command, "bash"))
            lines += _admonition(
                "info",
                f"{side} benchmark results",
                _fenced("\n".join(_blocks(section.blocks, named=True)), "bash"),
            )
    if report.curves:
        lines += ["## Load Curves", ""]
        for index, (title, curve) in enumerate(report.curves, 1):
            lines += _curve(title, curve, charts.get(f"load_curve_{index}"))
    if report.launches:
        lines += [
            "## Launches",
            "",
            "Every launch of the study; a configuration's mean is the mean of its launches' means.",
            "",
            *launches_table(report.launches, unit),
            "",
        ]
    return "\n".join(lines).rstrip("\n") + "\n"
