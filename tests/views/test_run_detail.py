"""The run page's read model and downloads on the stored test runs."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from sqlmodel import Session

from db import crud
from db import session as db_session
from perflab.views import cards, run_detail, run_export, run_progress
from tests.fixtures.ui_data import MODEL, SeededDatabase


def session_for(database: SeededDatabase) -> Session:
    return db_session.new_session(db_session.get_engine(database.url))


def test_finished_run_detail(seeded_database: SeededDatabase) -> None:
    with session_for(seeded_database) as session:
        detail = run_detail.load_run_detail(session, seeded_database.runs.done)
    assert detail is not None and detail.planned_command is None
    run = detail.run
    assert run.title == f"Run {run.id} · simulated vLLM TP2" and run.host_display == "local-sim (simulated)"
    assert [profile.title for profile in detail.profiles] == ["Paced 256→32", "Burst 128→16"]
    paced = detail.profiles[0]
    assert len(paced.records) == 60 and paced.records["success"].all()
    expected_tpot = (paced.records["e2el_ms"] - paced.records["ttft_ms"]) / (
        paced.records["output_tokens"] - 1
    )
    assert (paced.records["tpot_ms"] - expected_tpot).abs().max() < 1e-9
    assert set(paced.timeline.frame.columns) == {"t", "output_tokens_per_s", "requests_in_flight"}
    assert paced.text_block is not None and "Serving Benchmark Result" in paced.text_block
    assert set(detail.samples["source"]) == {"engine", "accelerator"}
    assert {"running", "waiting", "kv_cache_usage", "gpu", "utilization_pct"} <= set(detail.samples.columns)
    labels = [card.label for card in cards.metric_cards(paced.result)]
    assert labels[:3] == [
        "Total token throughput (tok/s)",
        "Output token throughput (tok/s)",
        "Request throughput (req/s)",
    ]


def test_replicated_cards_and_missing_run(seeded_database: SeededDatabase) -> None:
    with session_for(seeded_database) as session:
        detail = run_detail.load_run_detail(session, seeded_database.runs.replicated)
        assert run_detail.load_run_detail(session, 999999) is None
        assert run_detail.run_version(session, 999999) is None
    assert detail is not None
    result = detail.profiles[0].result
    [total] = [
        card for card in cards.metric_cards(result, replicas=2) if card.label.startswith("Total token")
    ]
    assert total.value == f"{result['total_token_throughput'] / 2:.2f}×2"
    assert total.help == f"node total {result['total_token_throughput']:.2f} over 2 replicas"


def test_queued_run_plans_its_command_and_versions_change(data_db: SeededDatabase) -> None:
    with session_for(data_db) as session:
        detail = run_detail.load_run_detail(session, data_db.runs.queued)
        assert detail is not None and detail.planned_command is not None
        assert detail.planned_command.command == f"vllm serve {MODEL} --enable-prefix-caching"
        before = run_detail.run_version(session, data_db.runs.benchmarking)
        crud.heartbeat_run(session, run_id=data_db.runs.benchmarking, progress={"done": 30, "total": 60})
        after_heartbeat = run_detail.run_version(session, data_db.runs.benchmarking)
        crud.add_samples(
            session,
            run_id=data_db.runs.benchmarking,
            samples=[{"t_s": 1.0, "source": "engine", "values": {}}],
        )
        after_sample = run_detail.run_version(session, data_db.runs.benchmarking)
        progress = run_progress.load_progress(session, data_db.runs.benchmarking)
        assert run_progress.load_progress(session, 999999) is None
    assert len({before, after_heartbeat, after_sample}) == 3
    assert progress is not None and progress.fraction == 0.5 and progress.profile is None
    assert progress.text() == "benchmarking · 30/60 requests, 0 in flight"


def test_text_block_fallbacks() -> None:
    assert run_detail.text_block_for("stored", {}) == "stored"
    assert run_detail.text_block_for(None, {"completed": 3}) is None
    full = {
        "completed": 2,
        "failed": 0,
        "duration": 1.0,
        "total_input_tokens": 10,
        "total_output_tokens": 4,
        "request_throughput": 2.0,
        "output_throughput": 4.0,
        "max_output_tokens_per_s": 4.0,
        "max_concurrent_requests": 2,
        "total_token_throughput": 14.0,
        "percentiles": [99],
        **{
            f"{stat}_{name}_ms": 1.0
            for stat in ("mean", "median", "p99")
            for name in ("ttft", "tpot", "itl", "e2el")
        },
    }
    block = run_detail.text_block_for(None, full)
    assert block is not None and "Total token throughput (tok/s):          14.00" in block


def test_definition_notes_say_how_input_tokens_and_peak_concurrency_were_counted() -> None:
    vllm_defaults = {
        "input_tokens_definition": "usage",
        "total_prompt_input_tokens": 1536,
        "peak_concurrency_definition": "per-second",
        "max_overlapping_requests": 8,
    }
    assert run_detail.definition_notes(vllm_defaults) == [
        "Total input tokens: the server's usage.prompt_tokens, chat template included (vLLM's definition); "
        "the prompts' own tokens: 1536.",
        "Peak concurrent requests: requests active during the fullest 1-second bucket (vLLM's definition); "
        "at one instant at most: 8.",
    ]
    perflab_own = {
        "input_tokens_definition": "prompt",
        "total_usage_input_tokens": 1668,
        "peak_concurrency_definition": "exact",
        "max_requests_per_second_bucket": 32,
    }
    assert run_detail.definition_notes(perflab_own) == [
        "Total input tokens: the prompts' own tokens (perflab's definition); the server's usage: 1668.",
        "Peak concurrent requests: the most requests in flight at one instant (perflab's definition); "
        "per 1-second bucket (vLLM's): 32.",
    ]
    assert run_detail.definition_notes({"total_input_tokens": 5}) == []  # an import that does not say


def test_downloads(seeded_database: SeededDatabase) -> None:
    with session_for(seeded_database) as session:
        detail = run_detail.load_run_detail(session, seeded_database.runs.done)
    assert detail is not None
    document = json.loads(run_export.run_json(detail))
    assert document["run"]["id"] == seeded_database.runs.done and document["run"]["host_name"] == "local-sim"
    assert [len(result["requests"]) for result in document["results"]] == [60, 40]
    assert document["results"][0]["profile"]["name"] == "paced"
    assert document["results"][0]["requests"][0]["itl_ms"]
    assert {sample["source"] for sample in document["samples"]} == {"engine", "accelerator"}
    table = pd.read_csv(io.StringIO(run_export.run_csv(detail)))
    assert list(table["profile"]) == ["Paced 256→32", "Burst 128→16"]
    assert {"run_id", "run_simulated", "total_token_throughput", "p99_ttft_ms", "success_rate"} <= set(
        table.columns
    )
    assert (table["success_rate"] == 100.0).all()


@pytest.mark.parametrize(
    ("status", "progress", "expected"),
    [
        (
            "launching",
            {"phase": "launching", "pulling": "vllm/vllm-openai:v0.11.0", "log_line": "Copying blob x"},
            "launching for 23.0 s · pulling vllm/vllm-openai:v0.11.0: Copying blob x",
        ),
        (
            "benchmarking",
            {"phase": "benchmarking", "downloading": "sharegpt.json", "log_line": "120 of 642 MiB"},
            "benchmarking · downloading sharegpt.json: 120 of 642 MiB",
        ),
    ],
    ids=["image-pull", "hub-dataset-fetch"],
)
def test_progress_names_what_is_fetched_and_its_last_line(
    db_session: Session, status: str, progress: dict[str, str], expected: str
) -> None:
    run = crud.create_run(db_session, host_name="h", status=status, profiles=[])
    crud.update_run(db_session, run_id=run.id, progress=progress)
    shown = run_progress.load_progress(db_session, run.id)
    assert shown is not None and shown.status_since is not None
    assert shown.text(now_s=shown.status_since.timestamp() + 23) == expected


@pytest.mark.parametrize(
    ("status", "progress", "expected"),
    [
        (
            "launching",
            {"replicas_ready": 1, "replicas": 2, "log_line": "Loading weights"},
            "launching for 23.0 s · loading the engine: 1 of 2 replicas ready",
        ),
        (
            "benchmarking",
            {"profile": "sharegpt", "profile_index": 0, "profiles": 2, "done": 0, "failed": 0, "total": 1000,
             "step": "starting the benchmark", "step_since": 1000.0},
            "benchmarking · profile sharegpt (1 of 2) · starting the benchmark for 12.0 s · "
            "0/1000 requests, 0 in flight",
        ),
        (
            "benchmarking",
            {"profile": "sharegpt", "done": 0, "failed": 0, "total": 1000, "in_flight": 0, "warmup_done": 3,
             "warmup_total": 10, "step": "warm-up", "step_since": 1008.0},
            "benchmarking · profile sharegpt · warm-up 3/10 for 4.0 s · 0/1000 requests, 0 in flight",
        ),
        (
            "benchmarking",
            {"profile": "sharegpt", "done": 968, "failed": 0, "total": 1000, "in_flight": 32,
             "elapsed_s": 60.0, "step": "draining", "step_since": 1009.0},
            "benchmarking · profile sharegpt · draining: every request sent, 32 still in flight for 3.0 s · "
            "968/1000 requests, 32 in flight · 1 min 0 s elapsed",
        ),
        (
            "benchmarking",
            {"profile": "sharegpt", "done": 1000, "failed": 0, "total": 1000, "in_flight": 0,
             "elapsed_s": 61.0, "step": "collecting the result", "step_since": 1002.0},
            "benchmarking · profile sharegpt · collecting the result for 10.0 s · 1000/1000 requests, "
            "0 in flight · 1 min 1 s elapsed",
        ),
    ],
    ids=["replicas-coming-up", "starting", "warm-up", "draining", "collecting"],
)  # fmt: skip
def test_progress_says_what_the_run_is_doing_and_for_how_long(
    db_session: Session, status: str, progress: dict[str, object], expected: str
) -> None:
    """Before the first request and after the last one the page still says what is going on, and for
    how long (at 1012 s on the worker's clock; a launching run since it began launching)."""
    run = crud.create_run(db_session, host_name="h", status="launching", profiles=[])
    if status == "benchmarking":
        for step in ("ready", "benchmarking"):
            crud.set_run_status(db_session, run_id=run.id, status=step)
    crud.update_run(db_session, run_id=run.id, progress=progress)
    shown = run_progress.load_progress(db_session, run.id)
    assert shown is not None and shown.status_since is not None
    now_s = shown.status_since.timestamp() + 23 if status == "launching" else 1012.0
    assert shown.text(now_s=now_s) == expected
