"""A study that measures its noise, end to end on a simulated host with seeded noise: repetitions stored
as their own results, relaunches, the A B A B close call, and a candidate that changes nothing that
matters ending "within noise" with its interval and the spread it measured."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.study.measure import study_runs
from tests.fixtures.runs import SimHostFactory
from tests.fixtures.study_data import run_noisy_study

SPEC = """
name: noise
model: Qwen/Qwen3-8B
hosts: [{host}]
baseline: {{engine: vllm}}
gpus: 1
repeats: 2
relaunches: 2
max_launches: 3
tuning_profile: {{name: tune, title: Chat, dataset: random, input_len: 128, output_len: 64, num_prompts: 50,
  max_concurrency: 4}}
stages:
  - name: Memory
    candidates: [{{gpu_memory_utilization: 0.85}}]
"""


def test_a_candidate_that_changes_nothing_is_not_kept(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path
) -> None:
    final = run_noisy_study(
        runs_db, sim_host, tmp_path, SPEC, {"run_cv_pct": 2, "launch_cv_pct": 1, "seed": 5}
    )
    with new_session(runs_db) as session:
        runs = study_runs(session, study_id=final.id)
        results = {run.id: crud.list_profile_results(session, run_id=run.id) for run in runs}
        rows = {row.label: row for row in crud.list_candidates(session, study_id=final.id)}
    # every repetition is its own result; each configuration had its two launches and the close call more
    assert all(
        [result.profile_name for result in results[run.id]] == ["tune", "tune-repeat2"] for run in runs
    )
    launches = sorted(
        sum(1 for run in runs if run.config_fingerprint == row.config_fingerprint) for row in rows.values()
    )
    assert launches[0] >= 2 and launches[-1] <= 3  # two launches first, at most three (max_launches)
    candidate = rows["gpu_memory_utilization=0.85"]
    (verdict,) = final.state["verdicts"]
    # whatever the draws, a candidate that changes nothing is not kept, and its note carries its verdict
    assert candidate.decision in ("within_noise", "not_better") and verdict["outcome"] == candidate.decision
    assert candidate.note.startswith(verdict["text"])
    assert verdict["n_candidate"] in (2, 3) and verdict["n_reference"] >= 2
    spread = final.state["spread"]
    assert spread["launches"] >= 2 and spread["repetitions"] == 2 * spread["launches"]
    assert final.recommended_command == "vllm serve Qwen/Qwen3-8B"
