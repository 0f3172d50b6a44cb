"""The accelerator-hour price that applies to a run, from the prices hosts.yaml gives
(:mod:`perflab.price_settings`).

A host's own ``price_per_accelerator_hour`` wins; else an ``accelerator_prices`` key matches a run whose
accelerator name holds it as whole words, ignoring case (``NVIDIA H100 80GB HBM3`` matches ``H100``),
the longest matching key winning (``H100 NVL``).

perflab ships no price that pretends to be true: the demo host's is labelled as an example. Prices are
read when a figure is shown, so a changed price re-prices every stored result.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from db.models import Run

if TYPE_CHECKING:
    from perflab.inventory import Inventory

CURRENCY_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£"}


@dataclass(frozen=True)
class Price:
    """The price of one accelerator-hour for a run, where it came from and its label (``example price``)."""

    per_accelerator_hour: float
    currency: str
    source: str
    label: str | None = None

    def money(self, amount: float) -> str:
        """``$0.21`` / ``0.21 CHF``, with the label when the price has one."""
        return money(amount, self.currency) + (f" ({self.label})" if self.label else "")


@dataclass(frozen=True)
class PriceBook:
    """Every price the team gave: per host (amount, label) and per accelerator model, in one currency."""

    currency: str = "USD"
    by_host: Mapping[str, tuple[float, str | None]] = field(default_factory=dict)
    by_model: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_inventory(cls, inventory: Inventory) -> PriceBook:
        """The prices of a loaded hosts.yaml."""
        by_host = {
            host.name: (host.price_per_accelerator_hour, host.price_label)
            for host in inventory
            if host.price_per_accelerator_hour is not None
        }
        return cls(inventory.prices.currency, by_host, dict(inventory.prices.accelerator_prices))

    def price_of(self, run: Run) -> Price | None:
        """The price that applies to ``run``: its host's, else its accelerator model's, else None."""
        if run.host_name in self.by_host:
            amount, label = self.by_host[run.host_name]
            return Price(amount, self.currency, f"host {run.host_name}", label)
        model = model_key(run.accelerator, self.by_model)
        if model is None:
            return None
        return Price(self.by_model[model], self.currency, f"accelerator {model}")


def unpriced(book: PriceBook, hosts: Sequence[str], accelerator: str | None) -> list[str]:
    """One problem per host whose runs ``book`` cannot price (its own price, else ``accelerator``'s)."""
    return [
        f"objective cost_per_mtok: no price for host '{host}' ({accelerator or 'accelerator unknown'}); "
        "set its price_per_accelerator_hour or accelerator_prices in hosts.yaml"
        for host in hosts
        if book.price_of(Run(host_name=host, accelerator=accelerator)) is None
    ]


def model_key(accelerator: str | None, models: Mapping[str, float]) -> str | None:
    """The longest key of ``models`` that ``accelerator`` holds as whole words, ignoring case
    (``NVIDIA A100-SXM4-80GB`` holds ``A100``, not ``A10``)."""
    if not accelerator:
        return None
    matching = [
        key
        for key in models
        if re.search(rf"(?<![A-Za-z0-9]){re.escape(key.strip())}(?![A-Za-z0-9])", accelerator, re.IGNORECASE)
    ]
    return max(matching, key=len, default=None)


def money(amount: float, currency: str) -> str:
    """An amount as people read prices: ``$0.21``, ``€1.30``, ``$0.0042`` (small amounts keep two
    significant digits), ``0.21 CHF`` for a currency without a symbol here."""
    digits = 2 if abs(amount) >= 0.1 or amount == 0 else max(2, 1 - int(f"{abs(amount):e}".split("e")[1]))
    text = f"{amount:,.{digits}f}"
    symbol = CURRENCY_SYMBOLS.get(currency)
    return f"{symbol}{text}" if symbol else f"{text} {currency}"
