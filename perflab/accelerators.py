"""How many accelerators a run used: the budget that every per-accelerator figure divides by.

A run launched by perflab used ``tp × dp × replicas`` accelerators (the GPUs it locked); an imported run
used what its write-up or result says. Unknown is ``None``, never a guess. A result's node throughputs
divided by that count are its ``…_per_accelerator`` figures (:data:`PER_ACCELERATOR`): what compares
runs of different budgets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from db.models import Run

# A node throughput → the key of the same figure per accelerator.
PER_ACCELERATOR: dict[str, str] = {
    "total_token_throughput": "total_token_throughput_per_accelerator",
    "output_throughput": "output_throughput_per_accelerator",
}


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def accelerators_of(run: Run) -> int | None:
    """The number of accelerators ``run`` used: its locked GPUs, else its ``accelerators`` column (set
    from its config, or from an imported write-up's node), else its config's tp × dp × replicas."""
    if run.gpu_ids:
        return len(run.gpu_ids)
    if _positive_int(run.accelerators):
        return run.accelerators
    config: Mapping[str, Any] = run.config or {}
    tp = _positive_int(config.get("tp")) or 1
    dp = _positive_int(config.get("dp")) or 1
    replicas = _positive_int(run.replicas) or 1
    if run.source == "perflab" or "tp" in config:
        return tp * dp * replicas
    return None


def per_accelerator(value: float | None, run: Run) -> float | None:
    """``value`` (a node total such as tokens/s) divided by the accelerators ``run`` used."""
    count = accelerators_of(run)
    if value is None or count is None:
        return None
    return value / count


def node_total(
    result: Mapping[str, Any], *, replicas: int, imported: bool, metric: str = "total_token_throughput"
) -> float | None:
    """A result's throughput ``metric`` (tok/s) for the whole node: perflab's results are node totals
    already; a block imported from a write-up measured one replica (unless it says ``replicas``), so
    it is × replicas."""
    value = result.get(metric)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    return float(value) * (replicas if imported and "replicas" not in result else 1)


def per_accelerator_figures(
    result: Mapping[str, Any], *, replicas: int, imported: bool, accelerators: int | None
) -> dict[str, float]:
    """``result``'s node throughputs divided by ``accelerators``, under their
    :data:`PER_ACCELERATOR` keys; empty when the count is unknown."""
    if not accelerators:
        return {}
    figures = {}
    for metric, key in PER_ACCELERATOR.items():
        total = node_total(result, replicas=replicas, imported=imported, metric=metric)
        if total is not None:
            figures[key] = total / accelerators
    return figures
