"""The metric cards at the top of a profile's result on the run page."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from perflab.views.formatting import format_metric, format_throughput
from perflab.views.metrics import KEY_METRICS, metric_for, metric_value

CARD_KEYS: tuple[str, ...] = (*KEY_METRICS, "success_rate")
_REPLICATED = frozenset({"total_token_throughput", "output_throughput", "request_throughput"})
# How each latency is measured (vLLM's definitions), with the names other tools give them.
METRIC_HELP: dict[str, str] = {
    "mean_ttft_ms": "Request sent → first streamed token.",
    "mean_tpot_ms": (
        "(E2EL − TTFT) / (output tokens − 1) per request, vLLM's TPOT; guidellm and AIPerf call this ITL."
    ),
    "mean_itl_ms": "Gaps between successive streamed chunks, pooled over all requests (vLLM's ITL).",
}


@dataclass(frozen=True)
class Card:
    label: str
    value: str
    help: str | None = None


def metric_cards(result: Mapping[str, Any], replicas: int = 1) -> list[Card]:
    """Cards for the headline metrics the result has (throughputs ×N for replicated runs)."""
    cards = []
    for key in CARD_KEYS:
        value = metric_value(result, key)
        metric = metric_for(key)
        if value is None or metric is None:
            continue
        label = f"{metric.label} ({metric.unit})" if metric.unit and metric.unit != "%" else metric.label
        if key in _REPLICATED and replicas > 1:
            cards.append(
                Card(
                    label,
                    format_throughput(value, replicas),
                    f"node total {value:.2f} over {replicas} replicas",
                )
            )
        else:
            cards.append(Card(label, format_metric(metric, value), METRIC_HELP.get(key)))
    return cards
