"""The runs page's read model on SQLite and PostgreSQL: filters (incl. simulated hosts), sort,
paging with clamping, and the table's cells."""

from __future__ import annotations

import math
from datetime import timedelta

import pandas as pd
import pytest
from sqlmodel import Session

from db import crud
from db.models import utcnow
from perflab.cost.prices import PriceBook
from perflab.engines import EngineConfig
from perflab.views.run_costs import COST_COLUMN
from perflab.views.run_list import RunFilters, load_run_page, page_count

RESULT = {
    "completed": 10,
    "failed": 0,
    "total_token_throughput": 0.0,
    "mean_ttft_ms": 5.0,
    "mean_tpot_ms": 1.0,
}


def make_runs(session: Session) -> dict[str, int]:
    start = utcnow() - timedelta(hours=1)
    ids: dict[str, int] = {}
    specs = [
        (
            "sim-a",
            dict(
                config=EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", tp=2),
                host_name="local-sim",
                simulated=True,
                accelerator="NVIDIA H100 80GB HBM3",
            ),
            1000.0,
        ),
        (
            "sim-b",
            dict(
                config=EngineConfig(engine="sglang", model="Qwen/Qwen3-8B", replicas=2),
                host_name="local-sim",
                simulated=True,
                accelerator="NVIDIA H100 80GB HBM3",
            ),
            3000.0,
        ),
        (
            "real",
            dict(
                config=EngineConfig(engine="vllm", model="meta-llama/Llama-3.1-8B"),
                host_name="gpu-a",
                accelerator="NVIDIA A100-SXM4-80GB",
            ),
            2000.0,
        ),
        ("imported", dict(source="imported", status="done", engine="trtllm", model="Qwen/Qwen3-32B"), None),
    ]
    for position, (key, columns, throughput) in enumerate(specs):
        run = crud.create_run(session, created_at=start + timedelta(minutes=position), **columns)
        if throughput is not None:
            crud.add_profile_result(
                session,
                run_id=run.id,
                profile={"name": "short"},
                result=dict(RESULT, total_token_throughput=throughput),
                text_block=None,
                bench_mode=None,
            )
        ids[key] = run.id
    return ids


def test_filters_sort_and_cells(db_session: Session) -> None:
    ids = make_runs(db_session)
    page = load_run_page(db_session, RunFilters())
    assert page.run_ids == [ids["imported"], ids["real"], ids["sim-b"], ids["sim-a"]]
    assert (page.total, page.page, page.pages) == (4, 1, 1)
    assert page.position_text() == "Runs 1–4 of 4 · page 1 of 1"
    table = page.table
    assert table.loc[ids["sim-a"], "Host"] == "local-sim (simulated)"
    assert table.loc[ids["sim-a"], "Source"] == "perflab · simulated"
    assert table.loc[ids["sim-b"], "Replicas"] == 2 and table.loc[ids["sim-b"], "Knobs"] == "defaults ×2"
    assert table.loc[ids["real"], "Host"] == "gpu-a" and pd.isna(table.loc[ids["imported"], "Host"])
    assert table.loc[ids["sim-a"], "Run"] == f"run?run={ids['sim-a']}"

    simulated = load_run_page(db_session, RunFilters(source="perflab · simulated hosts"))
    assert sorted(simulated.run_ids) == sorted([ids["sim-a"], ids["sim-b"]])
    real = load_run_page(db_session, RunFilters(source="perflab · real hosts"))
    assert real.run_ids == [ids["real"]]
    assert load_run_page(db_session, RunFilters(source="imported")).run_ids == [ids["imported"]]
    assert load_run_page(db_session, RunFilters(engine=("vllm",), model_text="QWEN")).run_ids == [
        ids["sim-a"]
    ]
    assert load_run_page(db_session, RunFilters(accelerator=("NVIDIA A100-SXM4-80GB",))).run_ids == [
        ids["real"]
    ]

    by_throughput = load_run_page(db_session, RunFilters(), sort_label="Total tok/s")
    assert by_throughput.run_ids == [ids["sim-b"], ids["real"], ids["sim-a"], ids["imported"]]
    ascending = load_run_page(db_session, RunFilters(), sort_label="Total tok/s", descending=False)
    assert ascending.run_ids == [ids["sim-a"], ids["real"], ids["sim-b"], ids["imported"]]


def test_paging_clamps_to_the_last_page(db_session: Session) -> None:
    make_runs(db_session)
    second = load_run_page(db_session, RunFilters(), page=2, page_size=3)
    assert (second.page, second.pages, len(second.run_ids)) == (2, 2, 1)
    beyond = load_run_page(db_session, RunFilters(), page=9, page_size=3)
    assert beyond.page == 2 and beyond.run_ids == second.run_ids
    empty = load_run_page(db_session, RunFilters(engine=("mindie",)))
    assert (empty.total, empty.page, empty.pages, empty.table.empty) == (0, 1, 1, True)
    assert empty.position_text() == "No runs match."
    assert RunFilters(engine=("mindie",)).active and RunFilters(source="imported").active
    assert not RunFilters().active and not RunFilters(model_text="  ").active
    assert [page_count(total, 50) for total in (0, 1, 50, 51, 10_000)] == [1, 1, 1, 2, 200]


def test_cost_column_and_sort_from_the_price_book(db_session: Session) -> None:
    ids = make_runs(db_session)
    prices = PriceBook("USD", by_host={"local-sim": (2.5, "example price")}, by_model={"A100": 1.0})
    cheapest = load_run_page(
        db_session, RunFilters(), sort_label="Cost per 1M tok", descending=False, prices=prices
    )
    # sim-a: 2 GPUs × 2.5 / 1000 tok/s; sim-b: 2 × 2.5 / 3000; real: 1 A100 × 1.0 / 2000; imported: none
    assert cheapest.run_ids == [ids["real"], ids["sim-b"], ids["sim-a"], ids["imported"]]
    costs = cheapest.table[COST_COLUMN]
    assert costs[ids["sim-a"]] == pytest.approx(5 / (1000 * 3600) * 1e6)
    assert costs[ids["real"]] == pytest.approx(1 / (2000 * 3600) * 1e6)
    assert math.isnan(costs[ids["imported"]])
    dearest = load_run_page(db_session, RunFilters(), sort_label="Cost per 1M tok", prices=prices)
    assert dearest.run_ids == [ids["sim-a"], ids["sim-b"], ids["real"], ids["imported"]]
    paged = load_run_page(
        db_session, RunFilters(), sort_label="Cost per 1M tok", prices=prices, page=9, page_size=3
    )
    assert (paged.page, paged.total, paged.run_ids) == (2, 4, [ids["imported"]])
    on_sim = RunFilters(source="perflab · simulated hosts")
    simulated = load_run_page(db_session, on_sim, sort_label="Cost per 1M tok", prices=prices)
    assert simulated.run_ids == [ids["sim-a"], ids["sim-b"]]
