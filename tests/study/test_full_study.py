"""A whole study on a simulated host, executed by a real worker: engine → quantization → parallelism →
batched tokens, validation on three profiles, every distinct configuration launched (again only with its
tuning profile, for its verdict, with the validation profiles only while none of its launches has run
them), and its report."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.report.export import write_report
from perflab.report.from_study import study_report
from perflab.report.markdown import render_markdown
from perflab.study.configs import serve_command
from perflab.study.progress import load_progress
from tests.fixtures.runs import SimHostFactory, write_hosts_file
from tests.fixtures.study_data import run_study

VALIDATION = ("val_short", "val_long", "val_gen")
SPEC = """
name: full study
model: Qwen/Qwen3-8B
hosts: [{host}]
baseline: {{engine: vllm}}
gpus: 2
goal: Highest total throughput for a chat workload.
tuning_profile:
  {{name: tune, title: ShareGPT-like, dataset: random, input_len: 256, output_len: 48, num_prompts: 50,
   max_concurrency: 4}}
validation_profiles:
  - {{name: val_short, title: Short Prompt, dataset: random, input_len: 128, output_len: 4, num_prompts: 20}}
  - {{name: val_long, title: Long Prompt, dataset: random, input_len: 2000, output_len: 16, num_prompts: 8}}
  - {{name: val_gen, title: Generation Heavy, dataset: random, input_len: 64, output_len: 48, num_prompts: 8}}
stages:
  - name: Engine
    dimension: engine
    candidates: [vllm, sglang]
  - name: Quantization
    dimension: model
    candidates: [Qwen/Qwen3-8B-FP8]
  - name: Parallelism
    candidates:
      - {{label: TP1 x2, set: {{replicas: 2}}}}
      - {{tp: 2}}
  - name: Batched tokens
    dimension: max_num_batched_tokens
    candidates: [2048]
"""


@pytest.mark.slow
def test_full_study_runs_every_distinct_configuration_once_and_reports(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path
) -> None:
    host = sim_host("study-sim", kind="local", time_scale=100)
    final = run_study(runs_db, SPEC.format(host=host.name), write_hosts_file(tmp_path / "hosts.yaml", [host]))

    assert final.status == "done", (final.state.get("failure"), final.state.get("phase"))
    assert final.state["gpus_per_node"] == 8 and final.state["accelerator"] == "H100"
    assert final.state["gpus"] == 2
    study = final
    with new_session(runs_db) as session:
        progress = load_progress(session, study_id=study.id)
        plan, runs = progress.plan, progress.runs
        rows = crud.list_candidates(session, study_id=study.id)
        results = {run.id: crud.list_profile_results(session, run_id=run.id) for run in runs}
        report = study_report(session, study_id=study.id)
        two_places = study_report(session, study_id=study.id, decimals=2)

    # every stage decided; the engine stage reused the baseline's run for its vLLM candidate
    assert [stage.name for stage in plan.stages] == [
        "Engine",
        "Quantization",
        "Parallelism",
        "Batched tokens",
    ]
    assert all(stage.decided for stage in plan.stages)
    vllm = plan.stages[0].candidates[0]
    assert vllm.decision == "reused" and vllm.measurement.run_id == plan.baseline.measurement.run_id
    decisions = {candidate.decision for stage in plan.stages for candidate in stage.candidates}
    assert decisions <= {"winner", "not_better", "within_noise", "reused", "failed", "disqualified"}
    # every measured decision carries its verdict, with its interval
    judged = [
        c for stage in plan.stages for c in stage.candidates if c.decision in ("not_better", "within_noise")
    ]
    assert all(c.verdict is not None and c.note.startswith(c.verdict.text()) for c in judged)

    # every distinct configuration launched, the baseline at least twice (beside its first round of
    # candidates); a configuration's launches after its first run the tuning profile only; every replica
    # started exactly once a launch
    fingerprints = {c.fingerprint for c in plan.candidates() if c.fingerprint is not None}
    assert len(fingerprints) == 5  # "TP1 x2" is the baseline on the 2-accelerator budget
    assert all(run.replicas * run.config["tp"] == 2 for run in runs)
    assert {run.config_fingerprint for run in runs} == fingerprints
    assert sum(1 for run in runs if run.config_fingerprint == plan.baseline.fingerprint) >= 2
    assert all(run.status == "done" for run in runs), [(r.id, r.failure_message) for r in runs]
    assert all(len(run.serve_commands) == run.replicas for run in runs)
    replicated = next(run for run in runs if run.replicas == 2)
    assert len(set(replicated.serve_commands)) == 2
    first_launch, validated = {}, set()
    for run in sorted(runs, key=lambda run: run.id):
        names = [profile["name"] for profile in run.profiles]
        if run.config_fingerprint in first_launch and names != ["tune"]:
            # a later launch (a round's reference, a confirmation) runs the tuning profile only, unless no
            # launch of the configuration has run every validation profile yet (its first dropped them when
            # it could no longer win): then they ride on it, or a launch of them alone validates the winner
            assert names in (["tune", *VALIDATION], list(VALIDATION)), (run.id, run.label, names)
            assert run.config_fingerprint not in validated, (run.id, run.label, "validated twice")
        if {result.profile_name for result in results[run.id]} >= set(VALIDATION):
            validated.add(run.config_fingerprint)
        first_launch.setdefault(run.config_fingerprint, run.id)

    # baseline and winner ran every validation profile: the baseline on its first launch, the winner on
    # its first or, when a close call dropped them there, on a launch of its own at the end
    stored = {(row.stage_index, row.label): row for row in rows}
    validation_index = len(plan.stages) + 1
    baseline_run = stored[(validation_index, "Baseline")].run_id
    best_run = stored[(validation_index, "Optimized")].run_id
    assert baseline_run == first_launch[plan.baseline.fingerprint]
    for run_id in {baseline_run, best_run}:
        assert [r.profile_name for r in results[run_id] if r.profile_name in VALIDATION] == list(VALIDATION)
    # a configuration that lost dropped its validation profiles (at most the one it had started)
    for run in runs:
        if run.id not in {baseline_run, best_run} and run.config_fingerprint not in _interim_winners(plan):
            assert len(results[run.id]) <= 2 and results[run.id][0].profile_name == "tune"
            assert [profile["name"] for profile in run.profiles] == ["tune"]

    # the database rows say the same, and the study recommends the winner's command
    assert stored[(0, "Baseline")].role == "baseline"
    assert stored[(0, "Baseline")].run_id == plan.baseline.measurement.run_id
    assert stored[(1, "vLLM")].decision == "reused"
    assert {row.label for row in rows if row.role == "validation"} == {"Baseline", "Optimized"}
    assert final.recommended_command == serve_command(plan.best.config)

    # the report: seed layout, every stage, validation blocks, charts and numbers in the zip
    assert report.recommended_command == final.recommended_command
    assert [row.case for row in report.comparison] == [
        "ShareGPT-like",
        "Short Prompt",
        "Long Prompt",
        "Generation Heavy",
    ]
    assert all(row.baseline is not None and row.optimized is not None for row in report.comparison)
    assert len(report.summary) == 4
    # percentages to one decimal by default, to two when asked (as seed 002 prints them)
    gain = next(row.gain for row in report.comparison if row.gain is not None)
    assert gain.text(report.decimals) in render_markdown(report)
    assert gain.text(2) in render_markdown(two_places) and two_places.decimals == 2
    (archive_path,) = write_report(report, tmp_path / "study.zip")
    with zipfile.ZipFile(io.BytesIO(archive_path.read_bytes())) as archive:
        names = set(archive.namelist())
        markdown = archive.read("report.md").decode()
        csv_lines = archive.read("results.csv").decode().strip().splitlines()
        assert archive.read("charts/comparison.png").startswith(b"\x89PNG")
    assert {"report.md", "results.csv", "results.json", "charts/comparison.png", "charts/stages.png"} <= names
    for heading in (
        "## Conclusion",
        '???+ tip "Serving Command"',
        "## Experimental Setup",
        "### 1. Engine",
        "### 4. Batched tokens",
        "### Summary of Optimization Options",
        "### Other Benchmark Cases",
        '??? info "Optimized benchmark results"',
    ):
        assert heading in markdown
    assert final.recommended_command in markdown
    assert "vllm bench serve --model Qwen/Qwen3-8B" in markdown
    assert "8 × NVIDIA H100 80GB HBM3 on host study-sim (simulated)" in markdown
    assert markdown.count("Serving Benchmark Result") >= 6 + 2 * len(VALIDATION)
    assert len(csv_lines) - 1 == sum(len(stored_results) for stored_results in results.values())


def _interim_winners(plan) -> set[str]:  # type: ignore[no-untyped-def]
    """Configurations that were the best so far at some point keep validating while they may win."""
    return {stage.winner.fingerprint for stage in plan.stages if stage.winner is not None}
