"""The runs page query: filters, sorting by run columns and headline figures, paging, counts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import Session

from db import crud
from db.models import utcnow

ENGINES = ("vllm", "sglang", "trtllm")
HOSTS = ("a100-node", "h100-node")


@pytest.fixture
def runs(db_session: Session) -> list[dict]:
    """30 runs: engines and hosts round-robin, every third one without results, one imported."""
    start = utcnow() - timedelta(hours=1)
    made = []
    for n in range(30):
        run = crud.create_run(
            db_session,
            engine=ENGINES[n % 3],
            model="Qwen/Qwen3-14B" if n % 2 else "meta-llama/Llama-3.1-8B_Instruct",
            host_name=HOSTS[n % 2],
            accelerator="8× H100 80GB" if n % 2 else "8× A100 80GB",
            status="done" if n % 5 else "failed",
            source="imported" if n == 7 else "perflab",
            created_at=start + timedelta(minutes=n),
        )
        throughput = None
        if n % 3:
            throughput = 1000.0 + 37 * ((n * 7) % 30)
            crud.add_profile_result(
                db_session,
                run_id=run.id,
                profile={"name": "sharegpt"},
                result={"total_token_throughput": throughput, "mean_tpot_ms": 100.0 - n},
                text_block=None,
                bench_mode=None,
            )
            crud.add_profile_result(
                db_session,
                run_id=run.id,
                profile={"name": "second"},
                result={"total_token_throughput": 1.0},
                text_block=None,
                bench_mode=None,
            )
        made.append({"id": run.id, "n": n, "throughput": throughput})
    return made


def test_default_order_is_newest_first_with_paging(db_session: Session, runs: list[dict]) -> None:
    first = crud.list_runs(db_session, limit=10)
    second = crud.list_runs(db_session, limit=10, offset=10)
    last = crud.list_runs(db_session, limit=10, offset=25)
    assert first.total == second.total == last.total == 30
    ids_newest_first = [run["id"] for run in reversed(runs)]
    assert [row.id for row in first.rows + second.rows] == ids_newest_first[:20]
    assert [row.id for row in last.rows] == ids_newest_first[25:]


def test_sort_by_first_result_figure_puts_runs_without_results_last(
    db_session: Session, runs: list[dict]
) -> None:
    page = crud.list_runs(db_session, sort="total_token_throughput", limit=30)
    with_results = sorted(
        (run for run in runs if run["throughput"] is not None), key=lambda r: -r["throughput"]
    )
    expected_values = [run["throughput"] for run in with_results]
    values = [row.figures["total_token_throughput"] for row in page.rows]
    assert values[: len(expected_values)] == expected_values
    assert values[len(expected_values) :] == [None] * (30 - len(expected_values))
    ascending = crud.list_runs(db_session, sort="total_token_throughput", descending=False, limit=30)
    assert [row.figures["total_token_throughput"] for row in ascending.rows][
        : len(expected_values)
    ] == sorted(expected_values)
    assert page.rows[0].profile_name == "sharegpt"


def test_filters_combine(db_session: Session, runs: list[dict]) -> None:
    expected = {r["id"] for r in runs if r["n"] % 3 == 0 and r["n"] % 2 == 1 and r["n"] % 5}
    page = crud.list_runs(db_session, engine="vllm", host="h100-node", status="done", limit=100)
    assert {row.id for row in page.rows} == expected and page.total == len(expected)

    qwen = crud.list_runs(db_session, model_text="qwen3", limit=100)
    assert qwen.total == 15 and all(row.model == "Qwen/Qwen3-14B" for row in qwen.rows)
    assert crud.list_runs(db_session, model_text="8B_", limit=100).total == 15
    assert crud.list_runs(db_session, model_text="%", limit=100).total == 0
    assert crud.list_runs(db_session, engine=["sglang", "trtllm"], limit=100).total == 20
    assert crud.list_runs(db_session, accelerator="8× A100 80GB", limit=100).total == 15
    imported = crud.list_runs(db_session, source="imported")
    assert [row.id for row in imported.rows] == [runs[7]["id"]]


def test_filter_choices_and_bad_arguments(db_session: Session, runs: list[dict]) -> None:
    choices = crud.run_filter_choices(db_session)
    assert choices["engine"] == sorted(ENGINES)
    assert choices["host"] == sorted(HOSTS)
    assert choices["status"] == ["done", "failed"]
    with pytest.raises(ValueError, match="cannot sort runs by"):
        crud.list_runs(db_session, sort="config")
    with pytest.raises(ValueError, match="limit"):
        crud.list_runs(db_session, limit=0)
