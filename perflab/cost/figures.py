"""A result's cost and energy figures, from its run, its stored result and the run's samples.

- $ per 1M output (total) tokens = accelerators × price per accelerator-hour ÷ output (total) tokens
  per hour × 10⁶, at the measured throughput; accelerators from
  :func:`perflab.accelerators.accelerators_of`. Needs a price (:mod:`perflab.cost.prices`).
- Energy over the result's benchmark window (:mod:`perflab.cost.energy`): node joules, joules per
  request (÷ completed), joules per output token, output tokens per joule, mean power of the node and per
  accelerator. The window is the result's ``sample_window_s`` (``[start, end]`` on the samples' clock,
  recorded by the runner); results without one (imported write-ups) say "energy not measured". A result
  a simulated engine timed carries that engine's own count over its simulated window instead.

Every figure is None when what it needs is unknown; nothing is guessed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from db.models import Run, RunSample
from perflab.accelerators import accelerators_of, node_total
from perflab.bench.report import SIM_ENERGY_KEY
from perflab.cost.energy import Energy, NotMeasured, simulated_energy, window_energy
from perflab.cost.prices import Price, PriceBook

WINDOW_KEY = "sample_window_s"
# Figures shown as metrics beside a result's own (compare table, run page cards).
METRIC_FIELDS = (
    "cost_per_mtok_total",
    "cost_per_mtok_output",
    "output_tokens_per_joule",
    "joules_per_output_token",
    "joules_per_request",
    "mean_power_w_per_accelerator",
)
TOKENS_PER_MILLION = 1_000_000
SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class CostFigures:
    """What one result cost and the energy it took (None: not known); ``total_tps`` is the node's total
    throughput the cost is priced at."""

    price: Price | None
    accelerators: int | None
    cost_per_mtok_output: float | None
    cost_per_mtok_total: float | None
    energy: Energy | NotMeasured
    total_tps: float | None = None
    joules_per_request: float | None = None
    joules_per_output_token: float | None = None
    output_tokens_per_joule: float | None = None
    mean_power_w_per_accelerator: float | None = None

    def metrics(self) -> dict[str, float]:
        """The known figures as result fields (the metrics of :mod:`perflab.views.metrics`)."""
        found = {name: getattr(self, name) for name in METRIC_FIELDS}
        return {name: value for name, value in found.items() if value is not None}

    def record(self) -> dict[str, Any]:
        """The figures as CSV/JSON columns."""
        energy = self.energy
        measured = isinstance(energy, Energy)
        return {
            "currency": self.price.currency if self.price else None,
            "price_per_accelerator_hour": self.price.per_accelerator_hour if self.price else None,
            "price_label": self.price.label if self.price else None,
            "accelerators": self.accelerators,
            "cost_per_mtok_output": self.cost_per_mtok_output,
            "cost_per_mtok_total": self.cost_per_mtok_total,
            "energy_j": energy.joules if measured else None,
            "energy_method": ", ".join(energy.methods) if measured else None,
            "energy_not_measured": None if measured else energy.reason,
            "joules_per_request": self.joules_per_request,
            "joules_per_output_token": self.joules_per_output_token,
            "output_tokens_per_joule": self.output_tokens_per_joule,
            "mean_power_w_per_accelerator": self.mean_power_w_per_accelerator,
        }

    @property
    def energy_text(self) -> str:
        """``12.3 kJ over 60 s (NVML energy counter)`` or ``energy not measured: why``."""
        if isinstance(self.energy, NotMeasured):
            return f"energy not measured: {self.energy.reason}"
        energy = self.energy
        return f"{energy.joules / 1000:,.2f} kJ over {energy.window_s:.1f} s ({', '.join(energy.methods)})"


def _positive(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return float(value)


def cost_per_mtok(tokens_per_s: float | None, accelerators: int | None, price: Price | None) -> float | None:
    """Money per 1M tokens at ``tokens_per_s`` on ``accelerators`` priced at ``price`` per hour each."""
    rate = _positive(tokens_per_s)
    if rate is None or accelerators is None or price is None:
        return None
    return accelerators * price.per_accelerator_hour / (rate * SECONDS_PER_HOUR) * TOKENS_PER_MILLION


def sample_window(result: Mapping[str, Any]) -> tuple[float, float] | None:
    """The result's benchmark window on its run's sample clock, if the runner recorded one."""
    window = result.get(WINDOW_KEY)
    if not isinstance(window, (list, tuple)) or len(window) != 2:
        return None
    start, end = window
    numbers = all(isinstance(edge, (int, float)) and not isinstance(edge, bool) for edge in window)
    return (float(start), float(end)) if numbers and 0 <= start < end else None


def result_energy(run: Run, result: Mapping[str, Any], samples: Iterable[RunSample]) -> Energy | NotMeasured:
    """The node's energy over ``result``'s benchmark window: a simulated engine's own count where the
    result carries one, else from ``samples`` (the run's rows)."""
    counted = simulated_energy(result.get(SIM_ENERGY_KEY), accelerators_of(run))
    if counted is not None:
        return counted
    window = sample_window(result)
    if window is None:
        return NotMeasured("no benchmark window recorded (no sampled power)")
    rows = ((sample.t_s, sample.source, sample.values or {}) for sample in samples)
    return window_energy(rows, window, run.gpu_ids)


def cost_figures(
    run: Run, result: Mapping[str, Any], samples: Iterable[RunSample], prices: PriceBook
) -> CostFigures:
    """Every cost and energy figure of one stored result of ``run``."""
    price = prices.price_of(run)
    accelerators = accelerators_of(run)
    energy = result_energy(run, result, samples)
    node = {"replicas": run.replicas, "imported": run.source == "imported"}
    # the node's throughput, bought by all its accelerators (an imported block measured one replica)
    total_tps = node_total(result, **node)
    figures = CostFigures(
        price=price,
        accelerators=accelerators,
        cost_per_mtok_output=cost_per_mtok(
            node_total(result, metric="output_throughput", **node), accelerators, price
        ),
        cost_per_mtok_total=cost_per_mtok(total_tps, accelerators, price),
        energy=energy,
        total_tps=total_tps,
    )
    if isinstance(energy, NotMeasured) or energy.joules <= 0:
        return figures
    completed = _positive(result.get("completed"))
    output_tokens = _positive(result.get("total_output_tokens"))
    return replace(
        figures,
        joules_per_request=energy.joules / completed if completed else None,
        joules_per_output_token=energy.joules / output_tokens if output_tokens else None,
        output_tokens_per_joule=output_tokens / energy.joules if output_tokens else None,
        mean_power_w_per_accelerator=energy.mean_power_w / accelerators if accelerators else None,
    )
