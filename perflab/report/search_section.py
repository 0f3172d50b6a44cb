"""A search stage in the markdown report: what was tried, how each trial ended, which knobs mattered,
why the search stopped and why its pick was made."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

OUTCOMES = {
    "complete": "measured",
    "pruned": "screened out",
    "infeasible": "infeasible",
    "unmeasured": "not measured",
    "pending": "waiting",
    "screened": "screened",
}


def md_cell(text: str) -> str:
    """``text`` on one line with its pipes escaped, for a markdown table cell or list item."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def search_lines(entry: Mapping[str, Any], charts: Mapping[str, str]) -> list[str]:
    """The search's section under its stage heading."""
    stage = entry["stage"]
    lines = [
        f"Search over {entry['space_size']} configurations: {entry['launches']} launches "
        f"({', '.join(entry['objectives'])}).",
        "",
    ]
    if entry.get("stop"):
        lines += [f"- Stopped: {md_cell(entry['stop'])}"]
    if entry.get("pick"):
        lines += [f"- Pick: {md_cell(entry['pick'])}"]
    importances = entry.get("importances") or {}
    if importances:
        ranked = ", ".join(f"{name} {value:.2f}" for name, value in importances.items())
        lines += [f"- Which knobs mattered (PED-ANOVA importance): {md_cell(ranked)}"]
    lines += ["", *_trial_table(entry["trials"]), ""]
    for name, title in (
        (f"search_convergence_{stage}", "Best so far"),
        (f"search_pareto_{stage}", "Pareto front"),
        (f"search_importance_{stage}", "Knob importance"),
    ):
        if name in charts:
            lines += [f"![{title}]({charts[name]})", ""]
    return lines


def _trial_table(trials: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["| Trial | Configuration | Outcome | Screening | Value | Note |", "|---|---|---|---|---|---|"]
    for trial in trials:
        params = " · ".join(f"{name}={value}" for name, value in sorted(trial["params"].items()))
        outcome = (
            "repeat" if trial.get("repeat_of") is not None else OUTCOMES.get(trial["status"], trial["status"])
        )
        values = trial.get("samples") or (trial.get("values") or [])[:1]
        value = sum(values) / len(values) if values else None
        cells = [str(trial["number"]), params, outcome, _number(trial.get("screening")), _number(value)]
        cells.append(trial.get("note") or "")
        lines.append("| " + " | ".join(md_cell(cell) for cell in cells) + " |")
    return lines
