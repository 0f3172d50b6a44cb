"""The coordinator against a real database (SQLite and PostgreSQL): what it queues, records, trims,
retries, and how pause, resume, cancel and the lease behave. Runs are moved along here the way the
runner moves them (statuses and stored results), so each rule is checked step by step."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.models import Run
from db.session import new_session
from perflab.inventory import HostConfig, Inventory, SimulateSpec
from perflab.runner.evidence import marked
from perflab.study.coordinator import (
    StudyStateError,
    advance,
    advance_studies,
    cancel_study,
    create_study,
    measure_missing,
    pause_study,
    resume_study,
)
from perflab.study.hosts import StudyHostError
from perflab.study.measure import study_runs
from perflab.study.spec import StudySpecError, parse_spec

SPEC = """
name: coordinated
model: Qwen/Qwen3-8B
hosts: [gpu-a, gpu-b]
baseline: {engine: vllm}
tuning_profile: {name: tune, title: Tune, dataset: random, input_len: 128, output_len: 64, num_prompts: 50,
  max_concurrency: 4}
validation_profiles:
  - {name: check, title: Check, dataset: random, input_len: 64, output_len: 8, num_prompts: 10}
stages:
  - name: Engine
    dimension: engine
    candidates: [vllm, sglang, trtllm]
  - name: Batched tokens
    dimension: max_num_batched_tokens
    candidates: [4096]
"""


def _host(name: str, accelerator: str = "H100", count: int = 8) -> HostConfig:
    simulate = SimulateSpec(accelerator=accelerator, count=count)
    return HostConfig(name=name, transport="local", workdir=f"/tmp/{name}", simulate=simulate)


INVENTORY = Inventory(path=Path("hosts.yaml"), hosts=(_host("gpu-a"), _host("gpu-b")))


def _result(total: float, completed: int = 10, failed: int = 0) -> dict[str, Any]:
    return {"completed": completed, "failed": failed, "total_token_throughput": total, "mean_tpot_ms": 20.0}


def _benchmark(engine: Engine, run_id: int, total: float, **counts: int) -> None:
    """Take a queued run through launch to benchmarking and store its tuning result."""
    with new_session(engine) as session:
        for status in ("launching", "ready", "benchmarking"):
            crud.set_run_status(session, run_id=run_id, status=status)
        run = crud.require_run(session, run_id=run_id)
        crud.add_profile_result(
            session,
            run_id=run_id,
            profile=run.profiles[0],
            result=_result(total, **counts),
            text_block=None,
            bench_mode="on-host",
        )


def _finish(engine: Engine, run_id: int, status: str = "done", **fields: Any) -> None:
    with new_session(engine) as session:
        crud.set_run_status(session, run_id=run_id, status=status, **fields)


def _runs(engine: Engine, study_id: int) -> list[Run]:
    with new_session(engine) as session:
        return study_runs(session, study_id=study_id)


def _past_the_baseline(engine: Engine, study_id: int) -> list[Run]:
    """Queue the baseline, measure it at 1000 tok/s, end that launch, measure its second launch (its
    spread) at 1010 tok/s, queue the engine stage; the study's runs but the baseline's second launch."""
    advance(engine, study_id)
    (baseline,) = _runs(engine, study_id)
    _benchmark(engine, baseline.id, 1000.0)
    _finish(engine, baseline.id)
    advance(engine, study_id)
    second = _runs(engine, study_id)[-1]
    assert (second.config_fingerprint, [p["name"] for p in second.profiles]) == (
        baseline.config_fingerprint,
        ["tune"],
    )
    _benchmark(engine, second.id, 1010.0)
    advance(engine, study_id)
    return [run for run in _runs(engine, study_id) if run.id != second.id]


# A spread an earlier study measured on these hosts (1 % per launch on 1,000 degrees of freedom): with it
# the candidates here, far apart, are decided on their first launch, as these rules' tests want.
EARLIER_SPREAD = {"cv_pct": 1.0, "df": 1000, "study_id": 99, "matched": {"engine_version": "unknown"}}


@pytest.fixture
def study_id(db_engine: Engine) -> int:
    study = create_study(db_engine, parse_spec(SPEC), inventory=INVENTORY, queued_by="tester")
    with new_session(db_engine) as session:
        crud.update_study(session, study_id=study.id, state={**study.state, "prior_spread": EARLIER_SPREAD})
    return study.id


def test_the_baseline_is_queued_once_with_every_profile(db_engine: Engine, study_id: int) -> None:
    plan = advance(db_engine, study_id)
    assert plan is not None and plan.status == "running"
    advance(db_engine, study_id)
    (run,) = _runs(db_engine, study_id)
    assert (run.status, run.host_name, run.engine, run.queued_by) == ("queued", "gpu-a", "vllm", "tester")
    assert [profile["name"] for profile in run.profiles] == ["tune", "check"]
    assert run.label == "coordinated · Baseline"
    with new_session(db_engine) as session:
        study = crud.get_study(session, study_id=study_id)
        (row,) = crud.list_candidates(session, study_id=study_id)
    assert study.status == "running" and study.state["phase"] == "measuring the baseline"
    assert (row.role, row.run_id, row.status, row.decision) == ("baseline", run.id, "queued", None)


def test_a_stage_is_queued_over_the_hosts_reusing_the_baseline(db_engine: Engine, study_id: int) -> None:
    runs = _past_the_baseline(db_engine, study_id)
    second = _runs(db_engine, study_id)[1]  # the baseline's second launch, whose run the stage reuses
    # that launch is still running: the other host gets the next run first
    assert [(run.engine, run.host_name) for run in runs[1:]] == [("sglang", "gpu-b"), ("trtllm", "gpu-a")]
    with new_session(db_engine) as session:
        rows = crud.list_candidates(session, study_id=study_id)
    engine_rows = [(row.label, row.decision, row.run_id, row.status) for row in rows if row.stage_index == 1]
    assert engine_rows == [
        ("vLLM", "reused", second.id, "reused"),
        ("SGLang", None, runs[1].id, "queued"),
        ("TensorRT-LLM", None, runs[2].id, "queued"),
    ]


def test_losers_drop_validation_and_the_winner_keeps_it(db_engine: Engine, study_id: int) -> None:
    _, sglang, trtllm = _past_the_baseline(db_engine, study_id)
    _benchmark(db_engine, trtllm.id, 900.0)
    advance(db_engine, study_id)
    # TensorRT-LLM cannot win any more (below the baseline); SGLang still might
    runs = {run.id: run for run in _runs(db_engine, study_id)}
    assert [p["name"] for p in runs[trtllm.id].profiles] == ["tune"]
    assert [p["name"] for p in runs[sglang.id].profiles] == ["tune", "check"]
    _benchmark(db_engine, sglang.id, 1300.0)
    plan = advance(db_engine, study_id)
    assert plan.stages[0].winner.label == "SGLang"
    newest = _runs(db_engine, study_id)[-1]
    assert (newest.engine, newest.config["max_num_batched_tokens"]) == ("sglang", 4096)
    with new_session(db_engine) as session:
        rows = {row.label: row for row in crud.list_candidates(session, study_id=study_id)}
    assert (rows["SGLang"].decision, rows["SGLang"].objective_value) == ("winner", 1300.0)
    # the verdicts on the study's spread (the earlier study's, pooled with the baseline's two launches)
    assert rows["SGLang"].note.startswith("+29.4 % adjusted for selection (measured +29.4 % ± ")
    assert rows["SGLang"].note.endswith(", 95 %, 1 vs 2) over Baseline")
    assert rows["TensorRT-LLM"].note.startswith("-10.4 % ± ")
    assert rows["TensorRT-LLM"].note.endswith(", 95 %, 1 vs 2: not better, skipped")


def _age(engine: Engine, run_id: int, seconds: float) -> None:
    """Move a finished run's end ``seconds`` into the past (as if that much time had gone by)."""
    with new_session(engine) as session:
        run = crud.require_run(session, run_id=run_id)
        run.finished_at = run.finished_at - timedelta(seconds=seconds)
        session.add(run)
        session.commit()


def _rows(engine: Engine, study_id: int) -> dict[str, Any]:
    with new_session(engine) as session:
        return {row.label: row for row in crud.list_candidates(session, study_id=study_id)}


def _study(engine: Engine, study_id: int) -> Any:
    with new_session(engine) as session:
        return crud.get_study(session, study_id=study_id)


def test_engine_failures_are_results_infrastructure_failures_are_retried_with_backoff(
    db_engine: Engine, study_id: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PERFLAB_STUDY_RETRY_DELAYS_S", "30,60")
    baseline, sglang, trtllm = _past_the_baseline(db_engine, study_id)
    _finish(
        db_engine,
        sglang.id,
        "failed",
        failure_class="oom",
        failure_message="torch.OutOfMemoryError: CUDA out of memory.",
    )
    _finish(
        db_engine, trtllm.id, "failed", failure_class="worker_restarted", failure_message="worker restarted"
    )
    advance(db_engine, study_id)
    _finish(db_engine, _runs(db_engine, study_id)[1].id)  # the baseline's second launch is done too
    # within the backoff nothing is queued, and the candidate is neither failed nor decided
    assert len(_runs(db_engine, study_id)) == 4
    row = _rows(db_engine, study_id)["TensorRT-LLM"]
    assert (row.status, row.decision) == ("retrying", None)
    _age(db_engine, trtllm.id, 31)
    advance(db_engine, study_id)
    runs = _runs(db_engine, study_id)
    assert len(runs) == 5 and runs[-1].config_fingerprint == trtllm.config_fingerprint
    # the second delay is longer; after the third attempt the configuration is unmeasured, never failed
    _finish(db_engine, runs[-1].id, "failed", failure_class="port_in_use", failure_message="port 8000 taken")
    _age(db_engine, runs[-1].id, 31)
    advance(db_engine, study_id)
    assert len(_runs(db_engine, study_id)) == 5
    _age(db_engine, runs[-1].id, 30)
    advance(db_engine, study_id)
    last = _runs(db_engine, study_id)[-1]
    assert last.id != runs[-1].id and last.engine == "trtllm"
    _finish(
        db_engine,
        last.id,
        "failed",
        failure_class="host_unreachable",
        failure_message="host 'gpu-a': refused",
    )
    plan = advance(db_engine, study_id)

    assert (
        plan.status == "incomplete"
        and [run.engine for run in _runs(db_engine, study_id)].count("trtllm") == 3
    )
    rows = _rows(db_engine, study_id)
    assert (rows["SGLang"].decision, rows["SGLang"].note) == (
        "failed",
        "torch.OutOfMemoryError: CUDA out of memory.",
    )
    assert (rows["TensorRT-LLM"].decision, rows["TensorRT-LLM"].status) == ("unmeasured", "unmeasured")
    reason = "not measured (infrastructure): host_unreachable: host 'gpu-a': refused"
    assert rows["TensorRT-LLM"].note == reason
    study = _study(db_engine, study_id)
    assert study.status == "incomplete" and study.finished_at is not None
    assert study.recommended_command is None
    assert study.state["unmeasured"] == [{"stage": "Engine", "label": "TensorRT-LLM", "reason": reason}]
    assert study.state["phase"] == "incomplete: 1 candidate(s) could not be measured"
    assert advance(db_engine, study_id) is None

    # measuring the missing candidates: a fresh run at once, and the study goes on from there
    with pytest.raises(StudyStateError, match="only an incomplete study has missing candidates"):
        measure_missing(db_engine, create_study(db_engine, parse_spec(SPEC), inventory=INVENTORY).id)
    assert measure_missing(db_engine, study_id).status == "running"
    advance(db_engine, study_id)
    retried = _runs(db_engine, study_id)[-1]
    assert retried.engine == "trtllm" and retried.status == "queued"
    assert _rows(db_engine, study_id)["TensorRT-LLM"].decision is None
    _benchmark(db_engine, retried.id, 1500.0)
    plan = advance(db_engine, study_id)
    assert plan.stages[0].winner.label == "TensorRT-LLM" and len(plan.stages) == 2
    assert _study(db_engine, study_id).status == "running" and _study(db_engine, study_id).finished_at is None


def test_a_failed_baseline_fails_the_study(db_engine: Engine, study_id: int) -> None:
    advance(db_engine, study_id)
    (baseline,) = _runs(db_engine, study_id)
    _finish(
        db_engine,
        baseline.id,
        "failed",
        failure_class="unsupported_hardware",
        failure_message="RuntimeError: no",
    )
    advance(db_engine, study_id)
    with new_session(db_engine) as session:
        study = crud.get_study(session, study_id=study_id)
    assert study.status == "failed" and study.finished_at is not None
    assert study.state["failure"] == "the baseline failed: RuntimeError: no"
    assert advance(db_engine, study_id) is None


def test_a_baseline_the_infrastructure_keeps_from_being_measured_leaves_the_study_incomplete(
    db_engine: Engine, study_id: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PERFLAB_STUDY_RETRY_DELAYS_S", "0")
    advance(db_engine, study_id)
    for failure_class in ("host_unreachable", "connection_lost"):
        _finish(
            db_engine,
            _runs(db_engine, study_id)[-1].id,
            "failed",
            failure_class=failure_class,
            failure_message="gone",
        )
        plan = advance(db_engine, study_id)
    assert len(_runs(db_engine, study_id)) == 2 and plan.status == "incomplete" and plan.failure is None
    study = _study(db_engine, study_id)
    reason = "not measured (infrastructure): connection_lost: gone"
    assert study.status == "incomplete" and study.state["failure"] is None
    assert study.state["unmeasured"] == [{"stage": "Baseline", "label": "Baseline", "reason": reason}]


def test_pause_stops_queuing_resume_continues_cancel_stops_runs(db_engine: Engine, study_id: int) -> None:
    advance(db_engine, study_id)
    (baseline,) = _runs(db_engine, study_id)
    pause_study(db_engine, study_id)
    _benchmark(db_engine, baseline.id, 1000.0)
    _finish(db_engine, baseline.id)
    advance(db_engine, study_id)
    # paused: the baseline's second launch, which its spread needs, is not queued
    assert len(_runs(db_engine, study_id)) == 1
    with new_session(db_engine) as session:
        assert crud.get_study(session, study_id=study_id).status == "paused"
    assert resume_study(db_engine, study_id).status == "running"
    with pytest.raises(StudyStateError, match="only a paused study can be resumed"):
        resume_study(db_engine, study_id)
    assert advance_studies(db_engine) == 1
    second = _runs(db_engine, study_id)[-1]
    assert len(_runs(db_engine, study_id)) == 2 and second.engine == "vllm"
    _benchmark(db_engine, second.id, 1010.0)
    advance(db_engine, study_id)
    with new_session(db_engine) as session:
        rows = crud.list_candidates(session, study_id=study_id)
    assert [row.decision for row in rows if row.stage_index == 1] == ["reused", None, None]
    assert len(_runs(db_engine, study_id)) == 4
    cancel_study(db_engine, study_id)
    statuses = [(run.engine, run.status, run.cancel_requested) for run in _runs(db_engine, study_id)]
    assert statuses == [
        ("vllm", "done", False),
        ("vllm", "benchmarking", True),
        ("sglang", "cancelled", True),
        ("trtllm", "cancelled", True),
    ]
    assert advance(db_engine, study_id) is None
    with pytest.raises(StudyStateError, match="study .* is cancelled"):
        pause_study(db_engine, study_id)


def test_another_process_holding_the_lease_is_left_alone(db_engine: Engine, study_id: int) -> None:
    assert advance(db_engine, study_id, holder="one") is not None
    with new_session(db_engine) as session:
        study = crud.get_study(session, study_id=study_id)
        assert "lease" not in study.state
        crud.update_study(
            session,
            study_id=study_id,
            state={**study.state, "lease": {"holder": "other", "until": "2999-01-01T00:00:00+00:00"}},
        )
    assert advance(db_engine, study_id, holder="one") is None
    with new_session(db_engine) as session:
        study = crud.get_study(session, study_id=study_id)
        crud.update_study(
            session,
            study_id=study_id,
            state={**study.state, "lease": {"holder": "other", "until": "2000-01-01T00:00:00+00:00"}},
        )
    assert advance(db_engine, study_id, holder="one") is not None


def test_hosts_are_checked_when_the_study_is_created(db_engine: Engine) -> None:
    spec = parse_spec(SPEC)
    with pytest.raises(StudyHostError, match="no host named 'gpu-b'"):
        create_study(db_engine, spec, inventory=Inventory(path=Path("hosts.yaml"), hosts=(_host("gpu-a"),)))
    mixed = Inventory(path=Path("hosts.yaml"), hosts=(_host("gpu-a"), _host("gpu-b", "A100")))
    with pytest.raises(StudyHostError, match=r"one accelerator type.*'gpu-a' \(H100\), 'gpu-b' \(A100\)"):
        create_study(db_engine, spec, inventory=mixed)
    small = Inventory(path=Path("hosts.yaml"), hosts=(_host("gpu-a", count=2), _host("gpu-b", count=2)))
    wide = parse_spec(SPEC.replace("baseline: {engine: vllm}", "baseline: {engine: vllm, tp: 4}"))
    with pytest.raises(
        StudySpecError, match="TP4 needs 4 accelerators per replica, more than the study.s budget of 2"
    ):
        create_study(db_engine, wide, inventory=small)
    with new_session(db_engine) as session:
        assert crud.list_studies(session) == []


def test_a_launch_too_short_to_judge_is_measured_again_never_decided_on(
    db_engine: Engine, study_id: int
) -> None:
    """A candidate whose tuning result came back too short to judge (one measured before the runner
    sized its benchmarks) is neither kept nor beaten on it: it gets a new launch, whose judged result
    alone decides."""
    _, sglang, trtllm = _past_the_baseline(db_engine, study_id)
    short = marked({"completed": 20, "failed": 0, "duration": 1.1, "total_token_throughput": 5000.0})
    with new_session(db_engine) as session:
        for status in ("launching", "ready", "benchmarking"):
            crud.set_run_status(session, run_id=sglang.id, status=status)
        crud.add_profile_result(
            session,
            run_id=sglang.id,
            profile=sglang.profiles[0],
            result=short,
            text_block=None,
            bench_mode=None,
        )
    _finish(db_engine, sglang.id)
    _benchmark(db_engine, trtllm.id, 900.0)
    _finish(db_engine, trtllm.id)
    _finish(db_engine, _runs(db_engine, study_id)[1].id)
    advance(db_engine, study_id)

    again = _runs(db_engine, study_id)[-1]
    assert again.config_fingerprint == sglang.config_fingerprint and again.status == "queued"
    assert _rows(db_engine, study_id)["SGLang"].decision is None
    _benchmark(db_engine, again.id, 1500.0)
    _finish(db_engine, again.id)
    advance(db_engine, study_id)
    row = _rows(db_engine, study_id)["SGLang"]
    assert row.decision in ("winner", "kept") and row.objective_value == pytest.approx(1500.0)
