"""Prices in hosts.yaml: validated and bounded, one currency, host price over model price."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from db.models import Run
from perflab.cost.prices import PriceBook, model_key, money, unpriced
from perflab.inventory import InventoryError, load_inventory

REPO = Path(__file__).resolve().parents[2]
HOST = """
hosts:
  - name: gpu-a
    address: 10.0.0.5
{extra}
"""


def load(tmp_path: Path, top: str = "", extra: str = "") -> PriceBook:
    path = tmp_path / "hosts.yaml"
    path.write_text(textwrap.dedent(top) + HOST.format(extra=textwrap.indent(textwrap.dedent(extra), "    ")))
    return PriceBook.from_inventory(load_inventory(path))


def problems(tmp_path: Path, top: str = "", extra: str = "") -> list[str]:
    with pytest.raises(InventoryError) as caught:
        load(tmp_path, top, extra)
    return caught.value.problems


def test_shipped_demo_price_is_labelled_an_example() -> None:
    book = PriceBook.from_inventory(load_inventory(REPO / "hosts.yaml"))
    price = book.price_of(Run(host_name="local-sim"))
    assert price is not None and price.label == "example price" and price.currency == "USD"


def test_host_price_wins_over_the_model_price(tmp_path: Path) -> None:
    book = load(
        tmp_path,
        "currency: EUR\naccelerator_prices: {H100: 2.0}\n",
        "price_per_accelerator_hour: 3.1\nprice_label: reserved\n",
    )
    on_host = book.price_of(Run(host_name="gpu-a", accelerator="NVIDIA H100 80GB HBM3"))
    elsewhere = book.price_of(Run(host_name="gpu-b", accelerator="NVIDIA H100 80GB HBM3"))
    assert on_host is not None and (on_host.per_accelerator_hour, on_host.currency) == (3.1, "EUR")
    assert on_host.money(1.5) == "€1.50 (reserved)"
    assert elsewhere is not None and elsewhere.per_accelerator_hour == 2.0 and elsewhere.label is None


def test_bad_prices_are_named_by_line_and_field(tmp_path: Path) -> None:
    found = problems(tmp_path, "currency: usd\naccelerator_prices: {H100: 0, A100: true, H200: 24900}\n")
    assert found == [
        "hosts.yaml:1: field 'currency': 'usd' is not a currency code (three capital letters, e.g. USD, EUR)",
        "hosts.yaml:2: field 'accelerator_prices.H100': must be > 0.0",
        "hosts.yaml:2: field 'accelerator_prices.A100': must be a number",
        "hosts.yaml:2: field 'accelerator_prices.H200': must be <= 1000.0",
    ]
    [host_problem] = problems(tmp_path, extra="price_per_accelerator_hour: '2.49'\n")
    assert host_problem == "hosts.yaml:5: host 'gpu-a' field 'price_per_accelerator_hour': must be a number"
    [label_problem] = problems(tmp_path, extra="price_label: example\n")
    assert "labels a price_per_accelerator_hour, which is not set" in label_problem


def test_model_keys_match_whole_words_longest_first() -> None:
    prices = {"H100": 1.0, "H100 NVL": 2.0, "A10": 3.0, "A100": 4.0}
    assert model_key("NVIDIA H100 NVL", prices) == "H100 NVL"
    assert model_key("nvidia h100 80gb hbm3", prices) == "H100"
    assert model_key("NVIDIA A100-SXM4-80GB", prices) == "A100"
    assert model_key("NVIDIA A10G", prices) is None
    assert model_key(None, prices) is None


def test_money_reads_like_a_price() -> None:
    assert money(0.2149, "USD") == "$0.21"
    assert money(0.0042, "USD") == "$0.0042"
    assert money(1234.5, "GBP") == "£1,234.50"
    assert money(0.5, "CHF") == "0.50 CHF"


def test_a_cost_study_names_the_hosts_it_cannot_price() -> None:
    book = PriceBook("USD", {"gpu-a": (2.0, None)}, {"H200": 3.0})
    assert unpriced(book, ["gpu-a", "gpu-b"], "NVIDIA H200") == []
    assert unpriced(book, ["gpu-a", "gpu-b"], "NVIDIA H100 80GB HBM3") == [
        "objective cost_per_mtok: no price for host 'gpu-b' (NVIDIA H100 80GB HBM3); "
        "set its price_per_accelerator_hour or accelerator_prices in hosts.yaml"
    ]
