"""Accelerator-hour prices, as the team gives them in hosts.yaml, and the one that applies to a run.

hosts.yaml holds them beside the hosts (the app, every worker and every command already read that one
file, the team versions it, and no page needs write access to change a price):

- ``currency: USD``: the one currency of every price (an ISO 4217 code);
- ``accelerator_prices: {H100: 2.49, "H100 NVL": 2.89}``: per accelerator model, for models several
  hosts share; a key matches a run whose accelerator name holds it as whole words, ignoring case
  (``NVIDIA H100 80GB HBM3`` matches ``H100``), the longest matching key winning (``H100 NVL``);
- a host's own ``price_per_accelerator_hour`` (and an optional ``price_label`` shown beside every figure
  computed from it, e.g. ``example price``), which wins over the model's price for runs on that host.

perflab ships no price that pretends to be true: the demo host's is labelled as an example. Prices are
read when a figure is shown, so a changed price re-prices every stored result.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from db.models import Run

if TYPE_CHECKING:
    from perflab.inventory import Inventory

# Bounds of any accelerator-hour price: a typo (24900 for 2.49) is refused, not priced.
MAX_PRICE_PER_HOUR = 1000.0
CURRENCY_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£"}
_CURRENCY = re.compile(r"^[A-Z]{3}$")
# A price per accelerator-hour as hosts.yaml gives it: a number (never ``true`` or ``"2.49"``), bounded.
HourPrice = Annotated[float, Field(strict=True, gt=0, le=MAX_PRICE_PER_HOUR)]


class PriceSettings(BaseModel):
    """hosts.yaml's top-level price fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    currency: str = Field("USD", description="ISO 4217 code of every price, e.g. USD, EUR")
    accelerator_prices: dict[str, HourPrice] = Field(
        default_factory=dict, description="price per accelerator-hour by accelerator model"
    )

    @field_validator("currency")
    @classmethod
    def _iso_code(cls, value: str) -> str:
        if not _CURRENCY.match(value):
            raise ValueError(f"'{value}' is not a currency code (three capital letters, e.g. USD, EUR)")
        return value

    @field_validator("accelerator_prices")
    @classmethod
    def _named(cls, prices: dict[str, float]) -> dict[str, float]:
        if any(not model.strip() for model in prices):
            raise ValueError("an accelerator model name must not be empty")
        return prices


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
