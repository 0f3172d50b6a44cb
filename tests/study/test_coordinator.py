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
from perflab.study.hosts import ENGINE_VERSIONS, StudyHostError
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


def _host(name: str, accelerator: str = "H100", count: int = 8, **versions: str) -> HostConfig:
    simulate = SimulateSpec(accelerator=accelerator, count=count, versions=versions)
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
    """Queue the baseline, measure it at 1000 tok/s and end that launch; the engine stage's first round
    is then queued (its candidates, then the baseline again once they are measured): the study's runs."""
    advance(engine, study_id)
    (baseline,) = _runs(engine, study_id)
    _benchmark(engine, baseline.id, 1000.0)
    _finish(engine, baseline.id)
    advance(engine, study_id)
    return _runs(engine, study_id)


def _round(engine: Engine, study_id: int, values: dict[str, float]) -> list[Run]:
    """Measure and end the queued runs by engine (``values``); advance; the runs queued next."""
    for run in _runs(engine, study_id):
        if run.status == "queued" and run.engine in values:
            _benchmark(engine, run.id, values[run.engine])
            _finish(engine, run.id)
    before = {run.id for run in _runs(engine, study_id)}
    advance(engine, study_id)
    return [run for run in _runs(engine, study_id) if run.id not in before]


# A spread an earlier study measured on these hosts (1 % per launch on 1,000 degrees of freedom): pooled in
# once today's launches give 3 degrees of freedom and show they vary no more than it allows.
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
    baseline, *runs = _past_the_baseline(db_engine, study_id)
    # both hosts are free: the first round's candidates spread over them
    assert [(run.engine, run.host_name) for run in runs] == [("sglang", "gpu-a"), ("trtllm", "gpu-b")]
    with new_session(db_engine) as session:
        rows = crud.list_candidates(session, study_id=study_id)
    engine_rows = [(row.label, row.decision, row.run_id, row.status) for row in rows if row.stage_index == 1]
    assert engine_rows == [
        ("vLLM", "reused", baseline.id, "reused"),
        ("SGLang", None, runs[0].id, "queued"),
        ("TensorRT-LLM", None, runs[1].id, "queued"),
    ]


def test_rounds_launch_the_reference_after_its_candidates_and_decide_side_by_side(
    db_engine: Engine, study_id: int
) -> None:
    _, sglang, trtllm = _past_the_baseline(db_engine, study_id)
    _benchmark(db_engine, trtllm.id, 900.0)
    advance(db_engine, study_id)
    # while SGLang is measured nothing more is launched; TensorRT-LLM, measured, is no contender yet
    runs = {run.id: run for run in _runs(db_engine, study_id)}
    assert len(runs) == 3
    assert [p["name"] for p in runs[trtllm.id].profiles] == ["tune"]
    assert [p["name"] for p in runs[sglang.id].profiles] == ["tune", "check"]
    _finish(db_engine, trtllm.id)
    # the round's candidates measured: the baseline again, the tuning profile alone
    (reference,) = _round(db_engine, study_id, {"sglang": 1300.0})
    assert (reference.engine, [p["name"] for p in reference.profiles]) == ("vllm", ["tune"])
    rows = _rows(db_engine, study_id)
    assert rows["SGLang"].decision is None
    assert rows["SGLang"].note == "1 launch measured, one measurement, noise unknown yet"
    # the second round: the candidates in the reverse order, then the baseline
    again = _round(db_engine, study_id, {"vllm": 1010.0})
    assert [(run.engine, [p["name"] for p in run.profiles]) for run in again] == [
        ("trtllm", ["tune"]),
        ("sglang", ["tune"]),
    ]
    (reference,) = _round(db_engine, study_id, {"sglang": 1310.0, "trtllm": 905.0})
    assert reference.engine == "vllm"
    rows = _rows(db_engine, study_id)
    # before the baseline's launch only a stop: TensorRT-LLM is not better on 2 launches against 2
    assert rows["TensorRT-LLM"].decision == "not_better"
    assert rows["TensorRT-LLM"].note.endswith(", 95 %, 2 vs 2: not better, skipped")
    assert rows["SGLang"].decision is None
    plan_runs = _round(db_engine, study_id, {"vllm": 1005.0})
    rows = _rows(db_engine, study_id)
    assert (rows["SGLang"].decision, rows["SGLang"].objective_value) == ("winner", 1305.0)
    assert rows["SGLang"].note.startswith("+29.9 % adjusted for selection, to be confirmed on fresh launches")
    assert rows["SGLang"].note.endswith(", 95 %, 2 vs 3) over Baseline")
    newest = plan_runs[-1]
    assert (newest.engine, newest.config["max_num_batched_tokens"]) == ("sglang", 4096)
    with new_session(db_engine) as session:
        stored = crud.get_study(session, study_id=study_id).state["stage_state"]
    assert stored["1"]["decided"]["2"]["decision"] == "not_better" and stored["1"]["winner"] == 1
    assert stored["study"]["stages"]["1"]["winner"] == rows["SGLang"].config_fingerprint


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
    # within the backoff nothing is queued, and the candidate is neither failed nor decided
    assert len(_runs(db_engine, study_id)) == 3
    row = _rows(db_engine, study_id)["TensorRT-LLM"]
    assert (row.status, row.decision) == ("retrying", None)
    _age(db_engine, trtllm.id, 31)
    advance(db_engine, study_id)
    runs = _runs(db_engine, study_id)
    assert len(runs) == 4 and runs[-1].config_fingerprint == trtllm.config_fingerprint
    # the second delay is longer; after the third attempt the configuration is unmeasured, never failed
    _finish(db_engine, runs[-1].id, "failed", failure_class="port_in_use", failure_message="port 8000 taken")
    _age(db_engine, runs[-1].id, 31)
    advance(db_engine, study_id)
    assert len(_runs(db_engine, study_id)) == 4
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
    # measured at last: its round goes on with the baseline's launch
    (reference,) = _round(db_engine, study_id, {"trtllm": 1500.0})
    assert reference.engine == "vllm" and _rows(db_engine, study_id)["TensorRT-LLM"].decision is None
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
    # paused: the engine stage's candidates are not queued
    assert len(_runs(db_engine, study_id)) == 1
    with new_session(db_engine) as session:
        assert crud.get_study(session, study_id=study_id).status == "paused"
    assert resume_study(db_engine, study_id).status == "running"
    with pytest.raises(StudyStateError, match="only a paused study can be resumed"):
        resume_study(db_engine, study_id)
    assert advance_studies(db_engine) == 1
    with new_session(db_engine) as session:
        rows = crud.list_candidates(session, study_id=study_id)
    assert [row.decision for row in rows if row.stage_index == 1] == ["reused", None, None]
    assert len(_runs(db_engine, study_id)) == 3
    _benchmark(db_engine, _runs(db_engine, study_id)[1].id, 1200.0)
    cancel_study(db_engine, study_id)
    statuses = [(run.engine, run.status, run.cancel_requested) for run in _runs(db_engine, study_id)]
    assert statuses == [
        ("vllm", "done", False),
        ("sglang", "benchmarking", True),
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


def test_a_study_keeps_the_engine_versions_its_hosts_share(db_engine: Engine) -> None:
    spec = parse_spec(SPEC)
    same = Inventory(
        path=Path("hosts.yaml"), hosts=(_host("gpu-a", vllm="0.17.1"), _host("gpu-b", vllm="0.17.1"))
    )
    assert create_study(db_engine, spec, inventory=same).state[ENGINE_VERSIONS] == {"vllm": "0.17.1"}
    # hosts at different releases (or a simulated host at its engine's own) leave the engine out
    apart = Inventory(
        path=Path("hosts.yaml"), hosts=(_host("gpu-a", vllm="0.17.1"), _host("gpu-b", vllm="0.24.0"))
    )
    assert create_study(db_engine, spec, inventory=apart).state[ENGINE_VERSIONS] == {}
    # a real host's versions are those of its last probe
    probed = HostConfig(name="gpu-b", transport="local", workdir="/tmp/gpu-b")
    with new_session(db_engine) as session:
        crud.record_probe(
            session,
            name="gpu-b",
            reachable=True,
            probe={"accelerators": [{"name": "H100"}] * 8, "engines": {"vllm": "0.17.1", "sglang": "0.5.9"}},
        )
    mixed = Inventory(path=Path("hosts.yaml"), hosts=(_host("gpu-a", vllm="0.17.1"), probed))
    state = create_study(db_engine, spec, inventory=mixed).state
    assert state[ENGINE_VERSIONS] == {"sglang": "0.5.9", "vllm": "0.17.1"}


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
    advance(db_engine, study_id)

    again = _runs(db_engine, study_id)[-1]
    assert again.config_fingerprint == sglang.config_fingerprint and again.status == "queued"
    assert _rows(db_engine, study_id)["SGLang"].decision is None
    # the judged launch completes the first round: the baseline's launch beside it follows, then the
    # rounds go on as for any candidate, the short launch in none of them
    (reference,) = _round(db_engine, study_id, {"sglang": 1500.0})
    assert reference.engine == "vllm"
    assert _rows(db_engine, study_id)["SGLang"].decision is None
    _round(db_engine, study_id, {"vllm": 1010.0})
    (reference,) = _round(db_engine, study_id, {"sglang": 1510.0, "trtllm": 905.0})
    _round(db_engine, study_id, {"vllm": 1005.0})
    row = _rows(db_engine, study_id)["SGLang"]
    assert row.decision == "winner" and row.objective_value == pytest.approx(1505.0)
