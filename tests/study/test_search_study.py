"""A search stage run by the coordinator against a real database: proposals one at a time from the
stored trials, screening first, infeasible configurations told as such, the final pick, and a study
whose run the infrastructure failed mid-way (a worker died under it) ending with the same
recommendation and the same trials as an uninterrupted one with the same seed."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.report.export import report_files
from perflab.report.from_study import study_report
from perflab.study.coordinator import advance
from perflab.study.measure import study_runs
from tests.study.by_hand import drive, start

SPEC = """
name: searched
model: Qwen/Qwen3-8B
hosts: [gpu-a]
baseline: {engine: vllm, tp: 8}
tuning_profile: {name: tune, title: Tune, dataset: random, input_len: 128, output_len: 64, num_prompts: 50,
  max_concurrency: 4}
stages:
  - name: Batching and parallelism
    search:
      knobs: {max_num_seqs: [64, 128, 256, 512]}
      parallelism: [{tp: 1}, {tp: 2}, {tp: 4}, {tp: 8}]
      budget: {launches: 7}
      screening: 0.5
      startup_trials: 3
      seed: 3
      noise_cv_pct: 0
"""


def _value(config: dict[str, Any]) -> float | None:
    """A landscape with an interaction (wide batches pay off only with tensor parallelism) and a hole
    (TP1 with 512 sequences runs out of memory)."""
    tp, seqs = config["tp"], config.get("max_num_seqs") or 256
    if tp == 1 and seqs == 512:
        return None
    return 1000.0 + 10.0 * tp * min(seqs, 64 * tp) ** 0.5 - 3.0 * tp


def _run_one(engine: Engine, study_id: int, run_id: int, *, die_after_screening: bool = False) -> None:
    """Move a queued run as the runner does: a result per profile, the coordinator advancing between."""
    start(engine, run_id)
    position = 0
    while True:
        with new_session(engine) as session:
            run = crud.require_run(session, run_id=run_id)
            value = _value(run.config)
            if value is None:
                crud.set_run_status(
                    session,
                    run_id=run_id,
                    status="failed",
                    failure_class="oom",
                    failure_message="CUDA out of memory",
                )
                return
            if position >= len(run.profiles):
                crud.set_run_status(session, run_id=run_id, status="done")
                return
            result = {"completed": 20, "failed": 0, "total_token_throughput": value, "p99_ttft_ms": 100.0}
            crud.add_profile_result(
                session,
                run_id=run_id,
                profile=run.profiles[position],
                result=result,
                text_block=None,
                bench_mode="on-host",
            )
        position += 1
        if die_after_screening:
            with new_session(engine) as session:
                crud.set_run_status(session, run_id=run_id, status="failed", failure_class="worker_restarted")
            return
        advance(engine, study_id)


def _drive(engine: Engine, *, kill_nth: int | None = None) -> Any:
    """Drive the study to its end; the ``kill_nth`` run of the study dies after its first profile with
    ``worker_restarted`` (its worker was killed)."""
    started = []

    def run(study_id: int, run_id: int) -> None:
        started.append(run_id)
        _run_one(engine, study_id, run_id, die_after_screening=len(started) == kill_nth)

    return drive(engine, SPEC, run)


def test_a_search_study_proposes_screens_and_recommends(
    db_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    study = _drive(db_engine)
    study_id = study.id
    assert study.status == "done"
    with new_session(db_engine) as session:
        report = study_report(session, study_id=study_id)
        runs = study_runs(session, study_id=study_id)
    (search,) = report.searches
    assert search.stop == "budget: 7 launches of 7"
    # every launch of the stage counted: seven proposals, nothing past the budget
    assert (search.launches.proposals, search.launches.total, search.over_budget) == (7, 7, None)
    stage_runs = [
        launch
        for launch in report.launches
        if launch.stage == "Batching and parallelism" and launch.kind != "confirmation"
    ]
    assert len(stage_runs) == search.launches.total
    # the study's confirmation block launches the search's pick again: a launch of the study's, not
    # one of the search's budget
    block = [launch for launch in report.launches if launch.kind == "confirmation"]
    assert len(block) == (3 if study.state["confirmation"] is not None else 0)
    states = {trial.state for trial in search.trials if trial.repeat_of is None}
    assert states <= {"measured", "winner", "screened out", "infeasible", "measured before"}
    launched = [trial for trial in search.trials if trial.repeat_of is None]
    # the baseline, then one launch per distinct configuration of the launched trials (the baseline's
    # configuration, if proposed, reuses its runs), then a kept pick's confirmation: the baseline and
    # the pick again in a mirrored block (B P B or P B P)
    fingerprints = [run.config_fingerprint for run in runs]
    rest, confirming = fingerprints[1 : 1 + len(stage_runs)], fingerprints[1 + len(stage_runs) :]
    assert len(rest) == len(set(rest)) <= len(launched) and fingerprints[0] not in rest
    assert all(run.profiles[0]["name"] == "tune-screening" for run in runs[1 : 1 + len(stage_runs)])
    if study.state["confirmation"] is None:
        assert confirming == []
    else:
        assert len(confirming) == 3 and confirming == confirming[::-1] and fingerprints[0] in confirming
        assert len(set(confirming)) == 2 and set(confirming) <= set(fingerprints)
    # the recommendation: the best complete trial when it beats the baseline by the 1% minimum gain
    measured = [trial for trial in search.trials if trial.state in ("measured", "winner")]
    best = max(measured, key=lambda trial: trial.mean)
    if best.mean > study.state["baseline_value"] * 1.01:
        assert best.state == "winner" and study.state["best"].startswith(f"#{best.number} ")
        assert f"-tp {best.params['parallelism'][2:]}" in study.recommended_command
        assert f"--max-num-seqs {best.params['max_num_seqs']}" in study.recommended_command
    else:
        assert study.state["best"] == "Baseline"
    # the wide batch only pays with TP8 here, and TP1 with 512 sequences runs out of memory
    oom = [t for t in search.trials if t.params == {"max_num_seqs": 512, "parallelism": "TP1"}]
    assert all(t.state == "infeasible" and "out of memory" in t.note for t in oom)
    points = search.convergence
    assert [point["launches"] for point in points] == list(range(1, 8))
    bests = [point["best"] for point in points if point["best"] is not None]
    assert bests == sorted(bests)
    # fewer complete trials than the importances need: the report says so instead of ranking noise
    complete = sum(1 for trial in launched if trial.state in ("measured", "winner"))
    assert search.importances is None
    assert search.importance_note == f"not enough trials: {complete} complete, at least 10 needed"
    # the report: a table of every trial, why the search stopped, the pick, and the search's charts
    files = report_files(report)
    markdown = files["report.md"].decode()
    assert "Search over 16 configurations" in markdown
    assert "- Launched: 7 launches against a budget of 7 launches: 7 proposals" in markdown
    assert "- Stopped: budget: 7 launches of 7" in markdown
    assert f"- Which knobs mattered: not enough trials: {complete} complete" in markdown
    assert markdown.count("\n| ") - markdown.count("\n| ---") >= len(search.trials)
    assert "out of memory" in markdown or not oom
    assert "charts/search_convergence_1.png" in files and "charts/search_importance_1.png" not in files
    assert "each stage starts from the best configuration so far" not in markdown
    assert "The search of stage 1 measured" in markdown


def test_an_interrupted_search_ends_as_an_uninterrupted_one(
    db_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PERFLAB_STUDY_RETRY_DELAYS_S", "0,0")
    whole = _drive(db_engine)
    interrupted = _drive(db_engine, kill_nth=4)
    with new_session(db_engine) as session:
        runs = study_runs(session, study_id=interrupted.id)
    assert [run.failure_class for run in runs].count("worker_restarted") == 1
    assert interrupted.status == whole.status == "done"
    assert interrupted.recommended_command == whole.recommended_command
    # the same trials, stops and decisions; the confirmation block's order is each study's own (seeded
    # by the study), over the same configurations
    states = [dict(study.state["stage_state"]) for study in (whole, interrupted)]
    blocks = [state["study"].get("confirmation") for state in states]
    assert (blocks[0] is None) == (blocks[1] is None)
    if blocks[0] is not None:
        orders = [block["order"] for block in blocks]
        assert set(orders[0]) == set(orders[1]) and len(orders[0]) == len(orders[1])
        assert all(order == order[::-1] for order in orders)
        assert blocks[0]["before"] == blocks[1]["before"]
        states = [{**state, "study": {**state["study"], "confirmation": None}} for state in states]
    assert states[0] == states[1]
    with new_session(db_engine) as session:
        picks = [study_report(session, study_id=study.id).searches[0].pick for study in (whole, interrupted)]
    assert picks[0] == picks[1]
