"""Compare's budget warning and repeated-run spread, and per-accelerator figures, on known inputs."""

from __future__ import annotations

import pandas as pd
import pytest

from db.models import Run
from perflab.accelerators import accelerators_of, node_total
from perflab.views.budget import accelerator_text, budget_warning, spread_lines
from perflab.views.compare import CompareRun
from perflab.views.run_detail import ProfileView, run_view
from perflab.views.timeline import from_series


def _compared(
    run_id: int, tps: float, *, accelerators: int, replicas: int = 1, source: str = "perflab", tp: int = 1
) -> CompareRun:
    run = Run(
        id=run_id,
        status="done",
        source=source,
        replicas=replicas,
        accelerators=accelerators,
        config={"engine": "vllm", "model": "m", "tp": tp, "replicas": replicas},
    )
    result = ProfileView(
        id=run_id,
        position=0,
        name="p",
        title="P",
        profile={},
        result={"total_token_throughput": tps},
        text_block=None,
        sweep_point=None,
        records=pd.DataFrame(),
        timeline=from_series([]),
    )
    return CompareRun(run=run_view(run), results=[result])


def test_different_budgets_are_named_with_how_they_are_compared() -> None:
    single = _compared(3, 3950.0, accelerators=1)
    node = _compared(7, 9116.8, accelerators=8, replicas=4, tp=2)
    warning = budget_warning([single, node])
    assert warning == (
        "These runs used different numbers of accelerators (#3: 1 accelerator; #7: 8 accelerators), so "
        "node totals do not compare: their rows carry no change or colour, and the runs are ranked, "
        "coloured and put on the Pareto front by their throughput per accelerator."
    )
    assert budget_warning([node, _compared(8, 9000.0, accelerators=8)]) is None


def test_repeated_runs_of_one_configuration_show_their_spread() -> None:
    runs = [_compared(run_id, tps, accelerators=1) for run_id, tps in ((1, 100.0), (2, 110.0), (3, 90.0))]
    other = _compared(4, 500.0, accelerators=1, tp=2)
    assert spread_lines([*runs, other]) == [
        "Same configuration, 3 runs (#1, #2, #3): Total tok/s mean 100.0, CV 10.0 %, range 90.0 to 110.0."
    ]


def test_an_imported_block_counts_its_replicas() -> None:
    imported = _compared(5, 3019.19, accelerators=8, replicas=2, source="imported", tp=4)
    assert accelerator_text(imported.run, imported.results[0].result) == (
        "8 accelerators · 754.8 Total tok/s per accelerator"
    )
    assert node_total({"total_token_throughput": 10.0, "replicas": 2}, replicas=2, imported=True) == 10.0
    assert node_total({}, replicas=2, imported=True) is None


@pytest.mark.parametrize(
    "fields, expected",
    [({"accelerators": 8}, 8), ({"config": {"tp": 2}, "replicas": 4}, 8), ({"gpu_ids": [0, 1]}, 2)],
)
def test_accelerators_of_a_run(fields: dict, expected: int) -> None:
    assert accelerators_of(Run(source="perflab", **fields)) == expected
