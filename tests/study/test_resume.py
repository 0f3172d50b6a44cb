"""A study survives its process being killed: a new worker recovers the orphaned run, the study
resumes where it was and completes without launching any finished configuration again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.study.headless import wait_for_study
from perflab.study.measure import study_runs
from perflab.study.progress import load_progress
from tests.fixtures.polling import wait_until
from tests.fixtures.runs import SimHostFactory, write_hosts_file
from tests.fixtures.study_data import FAST

REPO = Path(__file__).resolve().parents[2]
SPEC = """
name: resumable
model: Qwen/Qwen3-8B
hosts: [{host}]
baseline: {{engine: vllm}}
gpus: 1
# paced at 8 requests/s, so each tuning benchmark lasts a few seconds: long enough to be killed in
tuning_profile:
  {{name: tune, title: Tune, dataset: random, input_len: 128, output_len: 16, num_prompts: 50,
    request_rate: 8}}
validation_profiles:
  - {{name: check, title: Check, dataset: random, input_len: 64, output_len: 8, num_prompts: 10}}
stages:
  - name: Engine
    dimension: engine
    candidates: [sglang, trtllm]
  - name: Batched tokens
    dimension: max_num_batched_tokens
    candidates: [4096]
"""


def _wait_until(engine: Engine, condition, timeout_s: float = 60.0) -> int:  # type: ignore[no-untyped-def]
    """The id of the (one) study once ``condition(its runs)`` holds."""

    def study_id() -> int | None:
        with new_session(engine) as session:
            studies = crud.list_studies(session)
            runs = study_runs(session, study_id=studies[0].id) if studies else []
        return studies[0].id if runs and condition(runs) else None

    return wait_until(study_id, timeout_s, failure="the study's runs never met the condition")


@pytest.mark.slow
def test_a_killed_study_resumes_without_relaunching_finished_configurations(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = sim_host("resume-sim", kind="local", time_scale=100)
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [host])
    spec_file = tmp_path / "study.yaml"
    spec_file.write_text(SPEC.format(host=host.name))
    monkeypatch.setenv("PERFLAB_WORKER_STALE_S", "1.5")
    url = runs_db.url.render_as_string(hide_password=False)
    command = [sys.executable, "-m", "perflab", "study", "--url", url, "run", "--spec", str(spec_file)]
    command += ["--hosts", str(hosts_file), "--wait", "--poll", "0.2"]
    first = subprocess.Popen(
        command, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE
    )
    try:
        # let it finish the baseline and get the engine stage's runs going, then kill it outright
        study_id = _wait_until(
            runs_db,
            lambda runs: (
                any(run.status == "done" for run in runs)
                and any(run.status in ("ready", "benchmarking") for run in runs[1:])
            ),
        )
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    with new_session(runs_db) as session:
        before = {
            run.id: (run.status, run.config_fingerprint) for run in study_runs(session, study_id=study_id)
        }
        assert crud.get_study(session, study_id=study_id).status == "running"
    finished_before = {fingerprint for status, fingerprint in before.values() if status == "done"}
    interrupted = {fingerprint for status, fingerprint in before.values() if status != "done"}
    assert finished_before and interrupted

    final = wait_for_study(
        runs_db, study_id, hosts_path=hosts_file, timeout_s=180, poll_s=0.2, runner_options=FAST
    )

    assert final.status == "done", (final.state.get("failure"), final.state.get("phase"))
    with new_session(runs_db) as session:
        progress = load_progress(session, study_id=study_id)
        runs = study_runs(session, study_id=study_id)
    by_fingerprint: dict[str, list] = {}
    for run in runs:
        by_fingerprint.setdefault(run.config_fingerprint, []).append(run)
    # a launch that ended before the kill was never repeated: it still counts as one of its
    # configuration's launches (a configuration is launched again only when its verdict asks)
    for fingerprint in finished_before:
        done_before = [
            run_id for run_id, (status, f) in before.items() if status == "done" and f == fingerprint
        ]
        assert all(next(run for run in runs if run.id == run_id).status == "done" for run_id in done_before)
        assert progress.found[fingerprint].measurement.launches >= len(done_before)
    # the runs the kill interrupted were failed by the recovering worker, then run once more
    for run_id, (status, fingerprint) in before.items():
        if fingerprint in interrupted and status not in ("queued",):
            recovered = next(run for run in runs if run.id == run_id)
            if recovered.status == "failed":
                assert recovered.failure_class == "worker_restarted"
                assert by_fingerprint[fingerprint][-1].status == "done"
    fingerprints = {c.fingerprint for c in progress.plan.candidates() if c.fingerprint}
    assert set(by_fingerprint) == fingerprints
    assert all(stage.decided for stage in progress.plan.stages)
    assert all(run.status in ("done", "failed") for run in runs)
    # launches: the interrupted ones once more, and what the verdicts asked for (at most 4 a candidate)
    assert len(runs) <= 4 * len(fingerprints) + len(interrupted)
