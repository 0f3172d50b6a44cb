"""A search stage in the markdown report: what was tried, what it launched against its budget, how each
trial ended (its one state, its mean over its launches), which knobs mattered (or why that cannot be
said), why the search stopped and why its pick was made."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from perflab.markdown_text import md_text
from perflab.report.model import SearchSection, TrialRow


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def launch_text(search: SearchSection) -> str:
    """``10 launches against a budget of 6 launches: 6 proposals, 4 re-measurements, 0 validation``."""
    count = search.launches
    return (
        f"{count.total} launches against a budget of {search.budget}: {count.proposals} proposals, "
        f"{count.remeasurements} re-measurements for the final pick, {count.validation} validation"
    )


def search_lines(search: SearchSection, unit: str, charts: Mapping[str, str]) -> list[str]:
    """The search's section under its stage heading."""
    objectives = ", ".join(search.objectives)
    lines = [f"Search over {search.space_size} configurations ({md_text(objectives)}).", ""]
    lines += [f"- Launched: {md_text(launch_text(search))}"]
    if search.over_budget:
        lines += [f"- Past the budget: {md_text(search.over_budget)}"]
    if search.stop:
        lines += [f"- Stopped: {md_text(search.stop)}"]
    if search.pick:
        lines += [f"- Pick: {md_text(search.pick)}"]
    if search.importances:
        ranked = ", ".join(f"{name} {value:.2f}" for name, value in search.importances.items())
        lines += [f"- Which knobs mattered ({md_text(search.importance_note)}): {md_text(ranked)}"]
    else:
        lines += [f"- Which knobs mattered: {md_text(search.importance_note)}"]
    lines += ["", *_trial_table(search.trials, unit), ""]
    for name, title in (
        (f"search_convergence_{search.stage}", "Best so far"),
        (f"search_pareto_{search.stage}", "Pareto front"),
        (f"search_importance_{search.stage}", "Knob importance"),
    ):
        if name in charts:
            lines += [f"![{title}]({charts[name]})", ""]
    return lines


def _trial_table(trials: Sequence[TrialRow], unit: str) -> list[str]:
    mean = f"Mean ({unit})" if unit else "Mean"
    lines = [
        f"| Trial | Configuration | State | Screening | {mean} | Launches | Note |",
        "|---|---|---|---|---|---|---|",
    ]
    for trial in trials:
        params = " · ".join(f"{name}={value}" for name, value in sorted(trial.params.items()))
        cells = [
            str(trial.number),
            params,
            trial.state,
            _number(trial.screening),
            _number(trial.mean),
            str(len(trial.samples)),
            trial.note or "",
        ]
        lines.append("| " + " | ".join(md_text(cell) for cell in cells) + " |")
    return lines
