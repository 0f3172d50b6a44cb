"""hosts.yaml's accelerator-hour prices, as the team gives them: the model the inventory validates and
:mod:`perflab.cost.prices` reads.

hosts.yaml holds them beside the hosts (the app, every worker and every command already read that one
file, the team versions it, and no page needs write access to change a price):

- ``currency: USD``: the one currency of every price (an ISO 4217 code);
- ``accelerator_prices: {H100: 2.49, "H100 NVL": 2.89}``: per accelerator model, for models several
  hosts share (:mod:`perflab.cost.prices` says which one applies to a run);
- a host's own ``price_per_accelerator_hour`` (a :data:`HourPrice`, and an optional ``price_label``
  shown beside every figure computed from it, e.g. ``example price``), which wins over the model's
  price for runs on that host.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Bounds of any accelerator-hour price: a typo (24900 for 2.49) is refused, not priced.
MAX_PRICE_PER_HOUR = 1000.0
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
