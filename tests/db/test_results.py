"""Profile results, per-request records and samples."""

from __future__ import annotations

import math

import pytest
from sqlmodel import Session

from db import crud
from db.session import get_engine, new_session

RESULT = {
    "completed": 3,
    "failed": 1,
    "duration": 2.5,
    "total_token_throughput": 1234.5,
    "output_throughput": 600.25,
    "request_throughput": 1.2,
    "mean_ttft_ms": 10.0,
    "p99_ttft_ms": 30.0,
    "mean_tpot_ms": 5.5,
    "p95_tpot_ms": 7.0,
    "timeseries": [{"t": 0, "output_tokens": 10}],
    "requests": [
        {
            "index": 0,
            "start_s": 0.0,
            "ttft_ms": 9.0,
            "itl_ms": [5.0, 6.0],
            "e2el_ms": 20.0,
            "output_tokens": 3,
        },
        {"index": 1, "start_s": 0.1, "ttft_ms": 11.0, "itl_ms": [5.0], "e2el_ms": 16.0, "output_tokens": 2},
        {"index": 2, "start_s": 0.2, "error": "HTTP 500", "success": False},
        {"index": 3, "start_s": 0.3, "ttft_ms": 10.0, "itl_ms": [], "e2el_ms": 10.0, "output_tokens": 1},
    ],
}


def test_profile_result_headlines_records_and_positions(db_session: Session) -> None:
    run = crud.create_run(db_session, engine="vllm", model="m")
    first = crud.add_profile_result(
        db_session,
        run_id=run.id,
        profile={"name": "sharegpt", "num_prompts": 4},
        result=RESULT,
        text_block="== block ==",
        bench_mode="on-host",
    )
    second = crud.add_profile_result(
        db_session,
        run_id=run.id,
        profile={"name": "sweep"},
        result={"completed": 1},
        text_block=None,
        bench_mode="forwarded",
        sweep_point={"request_rate": 4},
    )
    assert (first.position, second.position) == (0, 1)
    stored = crud.list_profile_results(db_session, run_id=run.id)
    assert [result.profile_name for result in stored] == ["sharegpt", "sweep"]
    head = stored[0]
    assert (head.completed, head.failed, head.success_rate) == (3, 1, 0.75)
    assert (head.total_token_throughput, head.mean_tpot_ms, head.median_ttft_ms) == (1234.5, 5.5, None)
    assert "requests" not in head.result and head.result["p95_tpot_ms"] == 7.0
    assert stored[1].sweep_point == {"request_rate": 4} and stored[1].success_rate is None

    records = crud.list_request_records(db_session, profile_result_id=head.id)
    assert [record.index for record in records] == [0, 1, 2, 3]
    assert records[0].itl_ms == [5.0, 6.0] and records[0].success
    assert (records[2].success, records[2].error, records[2].ttft_ms) == (False, "HTTP 500", None)
    assert crud.first_results(db_session, run_ids=[run.id])[run.id].id == head.id


def test_a_studys_read_leaves_out_the_per_request_arrays_and_keeps_every_figure(db_session: Session) -> None:
    arrays = {
        "input_lens": [32, 32],
        "output_lens": [3, 2],
        "ttfts": [0.009, 0.011],
        "itls": [[0.005, 0.006], [0.005]],
        "errors": ["", ""],
        "server_queue_times": [0.001, None],
        "server_ttfts": [0.008, 0.010],
    }
    figures = {key: value for key, value in RESULT.items() if key != "requests"}
    runs = [crud.create_run(db_session, engine="vllm", model="m") for _ in range(2)]
    for run in reversed(runs):
        for name in ("tune", "tune-repeat2"):
            crud.add_profile_result(
                db_session,
                run_id=run.id,
                profile={"name": name},
                result={**RESULT, **arrays},
                text_block=None,
                bench_mode="on-host",
                sweep_point={"max_concurrency": 4},
            )
    read = crud.figures_of_runs(db_session, run_ids=[run.id for run in runs])
    assert [(result.run_id, result.position) for result in read] == [
        (runs[0].id, 0), (runs[0].id, 1), (runs[1].id, 0), (runs[1].id, 1)
    ]  # fmt: skip
    assert all(result.result == figures and list(result.result) == list(figures) for result in read)
    assert [result.profile_name for result in read[:2]] == ["tune", "tune-repeat2"]
    assert (read[0].output_throughput, read[0].sweep_point) == (600.25, {"max_concurrency": 4})
    # the same session still reads them whole where they are wanted (a download)
    (whole, _) = crud.list_profile_results(db_session, run_id=runs[0].id)
    assert whole.result == {**figures, **arrays}
    assert crud.figures_of_runs(db_session, run_ids=[]) == []


def test_a_result_holding_nan_is_read_whole_on_sqlite(sqlite_database_url: str) -> None:
    with new_session(get_engine(sqlite_database_url)) as session:
        run = crud.create_run(session, engine="vllm", model="m")
        result = {"completed": 1, "mean_itl_ms": math.nan, "itls": [[0.005]]}
        crud.add_profile_result(
            session, run_id=run.id, profile={"name": "tune"}, result=result, text_block=None, bench_mode=None
        )
        (read,) = crud.figures_of_runs(session, run_ids=[run.id])
    assert read.result["completed"] == 1 and math.isnan(read.result["mean_itl_ms"])


def test_bad_result_values_are_refused(db_session: Session) -> None:
    run = crud.create_run(db_session, engine="vllm", model="m")
    with pytest.raises(ValueError, match="total_token_throughput must be a number"):
        crud.add_profile_result(
            db_session,
            run_id=run.id,
            profile={},
            result={"total_token_throughput": "fast"},
            text_block=None,
            bench_mode=None,
        )
    with pytest.raises(crud.NotFound):
        crud.add_profile_result(
            db_session, run_id=10**9, profile={}, result={}, text_block=None, bench_mode=None
        )
    assert crud.list_profile_results(db_session, run_id=run.id) == []


def test_samples_in_time_order_by_source(db_session: Session) -> None:
    run = crud.create_run(db_session, engine="vllm", model="m")
    stored = crud.add_samples(
        db_session,
        run_id=run.id,
        samples=[
            {"t_s": 2.0, "source": "engine", "values": {"running": 4}},
            {"t_s": 1.0, "source": "engine", "values": {"running": 2}},
            {"t_s": 1.0, "source": "accelerator", "values": {"gpu0_util": 97}},
        ],
    )
    assert stored == 3
    assert [s.values["running"] for s in crud.list_samples(db_session, run_id=run.id, source="engine")] == [
        2,
        4,
    ]
    assert len(crud.list_samples(db_session, run_id=run.id)) == 3
    assert crud.count_samples(db_session, run_id=run.id) == 3
    with pytest.raises(ValueError, match="sample source"):
        crud.add_samples(db_session, run_id=run.id, samples=[{"t_s": 0, "source": "moon", "values": {}}])
