"""Compare's budget and spread notes, and the run page's accelerator line.

Node totals only compare between runs on the same number of accelerators, so when the compared runs'
budgets differ the page says so and how it compares them instead (per accelerator: the node total ÷
:func:`~perflab.accelerators.accelerators_of`; an imported block measured one replica, so its node total
is the block × replicas). Runs of the same configuration (equal configs) are repetitions: their mean,
coefficient of variation and range say how much that configuration varies.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from db.crud.run_list import RunSummary
from perflab.accelerators import node_total
from perflab.views.compare import FIRST_RESULT, CompareRun
from perflab.views.formatting import counted


def result_node_total(run: RunSummary, result: Mapping[str, Any]) -> float | None:
    """A result's Total tok/s for the whole node (an imported block × the run's replicas)."""
    return node_total(result, replicas=run.replicas, imported=run.source == "imported")


def accelerator_text(run: RunSummary, result: Mapping[str, Any]) -> str | None:
    """``8 accelerators · 474.1 Total tok/s per accelerator`` for the run page (None when unknown)."""
    total = result_node_total(run, result)
    if not run.accelerators:
        return None
    budget = counted(run.accelerators, "accelerator")
    if total is None:
        return budget
    return f"{budget} · {total / run.accelerators:.1f} Total tok/s per accelerator"


def compared_total(compared: CompareRun) -> float | None:
    """The run's first result's Total tok/s for the whole node."""
    result = compared.result_for(FIRST_RESULT)
    return result_node_total(compared.run, result.result) if result is not None else None


def budget_warning(runs: Sequence[CompareRun]) -> str | None:
    """When the runs used different numbers of accelerators: each run's count, and how the page
    compares them instead of by node totals."""
    counts = {compared.run.accelerators for compared in runs if compared.run.accelerators}
    if len(counts) < 2:
        return None
    budgets = "; ".join(
        f"#{compared.run.id}: "
        + (counted(compared.run.accelerators, "accelerator") if compared.run.accelerators else "not known")
        for compared in runs
    )
    return (
        f"These runs used different numbers of accelerators ({budgets}), so node totals do not compare: "
        "their rows carry no change or colour, and the runs are ranked, coloured and put on the Pareto "
        "front by their throughput per accelerator."
    )


def _key(config: Mapping[str, Any] | None) -> str | None:
    if not config:
        return None
    return json.dumps({k: v for k, v in config.items() if k not in ("gpu_ids", "port")}, sort_keys=True)


def spread_lines(runs: Sequence[CompareRun]) -> list[str]:
    """One line per configuration measured by several of the runs: n, mean, CV and range of Total tok/s."""
    groups: dict[str, list[CompareRun]] = {}
    for compared in runs:
        key = _key(compared.run.config)
        if key is not None:
            groups.setdefault(key, []).append(compared)
    lines = []
    for members in groups.values():
        values = [value for value in (compared_total(compared) for compared in members) if value is not None]
        if len(values) < 2:
            continue
        mean = statistics.fmean(values)
        cv = statistics.stdev(values) / mean * 100 if mean else 0.0
        ids = ", ".join(f"#{compared.run.id}" for compared in members)
        lines.append(
            f"Same configuration, {len(values)} runs ({ids}): Total tok/s mean {mean:.1f}, "
            f"CV {cv:.1f} %, range {min(values):.1f} to {max(values):.1f}."
        )
    return lines
