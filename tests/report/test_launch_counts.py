"""A study's launches as its page shows them: a candidate's row counts the launches its figures are the
mean of (a later launch that failed leaves them standing), and every launch says why it was made — the
baseline's launches beside the candidate's, the launches every configuration gets first."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.engines import EngineConfig
from perflab.report.from_study import study_report
from perflab.report.launches import LaunchPolicy
from perflab.study.measure import study_runs
from tests.study.by_hand import drive, measure_once

SPEC = """
name: launch counts
model: Qwen/Qwen3-8B
hosts: [gpu-a]
gpus: 1
relaunches: 2
baseline: {engine: vllm}
tuning_profile: {name: tune, title: Tune, dataset: random, input_len: 128, output_len: 64, num_prompts: 50,
  max_concurrency: 4}
stages:
  - name: Batching
    dimension: max_num_seqs
    candidates: [512]
"""


def _result(run_id: int) -> dict[str, Any]:
    throughput = 1000.0 + 7.0 * (run_id % 3)
    return {"completed": 50, "failed": 0, "total_token_throughput": throughput, "mean_tpot_ms": 30.0}


def test_candidate_rows_count_their_launches_and_every_launch_says_why(db_engine: Engine) -> None:
    study = drive(db_engine, SPEC, lambda _study, run_id: measure_once(db_engine, run_id, _result(run_id)))
    assert study.status == "done", study.state
    with new_session(db_engine) as session:
        runs = study_runs(session, study_id=study.id)
        measured = next(run for run in runs if run.config["max_num_seqs"] == 512)
        # a further launch of the candidate that its engine failed, after the study ended
        failed = crud.create_run(
            session,
            config=EngineConfig.model_validate(measured.config),
            host_name="gpu-a",
            profiles=measured.profiles,
            study_id=study.id,
        )
        for status in ("launching", "failed"):
            crud.set_run_status(session, run_id=failed.id, status=status)
        report = study_report(session, study_id=study.id)

    (candidate,) = report.stages[0].candidates
    assert candidate.figures is not None and candidate.figures.total_tps is not None
    assert candidate.launches == len(candidate.figures.runs) == 2

    # balanced rounds: the baseline once, then the candidate and the baseline beside it (R C R C R)
    reasons = [(launch.configuration, launch.kind, launch.reason) for launch in report.launches]
    label = "Batching · max_num_seqs=512"
    assert [(configuration, kind) for configuration, kind, _ in reasons[:5]] == [
        ("Baseline", "first"),
        (label, "first"),
        ("Baseline", "again"),
        (label, "again"),
        ("Baseline", "again"),
    ]
    assert reasons[0][2] == reasons[1][2] == "its first measurement"
    assert reasons[2][2].startswith("launch 2 of a reference (the baseline or a stage's winner): launched")
    assert reasons[3][2] == "launch 2 of the 2 each configuration gets before it is judged"
    assert reasons[4][2].startswith("launch 3 of a reference")


def test_each_reason_for_another_launch_is_said() -> None:
    policy = LaunchPolicy(
        relaunches=2,
        max_launches=4,
        references=frozenset({"base", "winner"}),
        searched=frozenset({"trial"}),
    )
    assert policy.reason("first", "cand", 1) == "its first measurement"
    assert policy.reason("validation", "base", 3).startswith("the validation profiles alone")
    assert policy.reason("again", "base", 2).startswith("launch 2 of a reference (the baseline or a stage's")
    assert policy.reason("again", "base", 3).startswith("launch 3 of a reference (the baseline or a stage's")
    assert policy.reason("again", "winner", 2).startswith("launch 2 of a reference")
    assert policy.reason("again", "cand", 2) == (
        "launch 2 of the 2 each configuration gets before it is judged"
    )
    assert policy.reason("again", "trial", 3) == "a finalist of the search, measured again for its final pick"
    assert policy.reason("again", "cand", 3) == (
        "launch 3: not decided yet (a close call, or too few launches for the study's spread to judge it), "
        "so measured again, up to 4 launches"
    )
