"""Tuning on today's traffic, end to end on a simulated host with seeded noise: a study whose tuning
profile is a multi-turn session workload keeps prefix caching on with a verdict, each configuration's
results carrying its prefix-cache hit rate; the same stage on independent random prompts finds nothing
to tell apart. Repetitions draw fresh prompts and record whether the cache was reset."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.models import Study
from db.session import new_session
from perflab.profiles import derived_seed
from perflab.study.measure import study_runs
from tests.fixtures.runs import SimHostFactory, sized_count, write_hosts_file
from tests.fixtures.study_data import form_spec, run_study

SPEC = """
name: prefix caching on {workload}
model: Qwen/Qwen3-8B
hosts: [{{host}}]
baseline: {{{{engine: vllm}}}}
gpus: 1
repeats: 2
relaunches: 2
max_launches: 3
min_gain_pct: 0
tuning_profile: {profile}
stages:
  - name: Prefix caching
    dimension: prefix_cache
    candidates: [false]
"""
SESSIONS = (
    "{{name: tune, title: Agentic, dataset: generated-shared-prefix, num_prompts: 60, max_concurrency: 8, "
    "output_len: 16, seed: 3, shared_prefix: {{num_groups: 2, system_prompt_len: 2048, question_len: 128, "
    "num_turns: 3}}}}"
)
IID = (
    "{{name: tune, title: Random, dataset: random, input_len: 2300, output_len: 16, num_prompts: 180, "
    "max_concurrency: 8, seed: 3}}"
)
NOISE = {"run_cv_pct": 2, "launch_cv_pct": 1, "seed": 5}
# Simulated time runs 200 times faster than real time: every figure is timed by the simulator's own
# clock, so what prefix caching saves is the same however little real time a step gets beside the
# simulator's CPU work, and every benchmark is sized to the floor of evidence in simulated seconds.
TIME_SCALE = 200


def run_workload_study(
    engine: Engine, sim_host: SimHostFactory, directory: Path, workload: str, profile: str
) -> Study:
    """The prefix-caching study of ``profile`` to its end on a simulated host with seeded noise."""
    directory.mkdir()
    host = sim_host(f"sim-{workload}", kind="local", time_scale=TIME_SCALE, noise=NOISE)
    spec = SPEC.format(workload=workload, profile=profile).format(host=host.name)
    final = run_study(engine, spec, write_hosts_file(directory / "hosts.yaml", [host]))
    assert final.status == "done", (final.state.get("failure"), final.state.get("phase"))
    return final


def _results(engine: Engine, study_id: int, candidate: str) -> tuple[list[dict], list[dict]]:
    """Every stored result of the baseline and of ``candidate`` (a candidate's label)."""
    with new_session(engine) as session:
        candidates = crud.list_candidates(session, study_id=study_id)
        (fingerprint,) = [row.config_fingerprint for row in candidates if row.label == candidate]
        baseline: list[dict] = []
        other: list[dict] = []
        for run in study_runs(session, study_id=study_id):
            side = other if run.config_fingerprint == fingerprint else baseline
            side.extend(result.result for result in crud.list_profile_results(session, run_id=run.id))
    return baseline, other


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_sessions_keep_prefix_caching_and_independent_prompts_cannot_tell(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path
) -> None:
    sessions = run_workload_study(runs_db, sim_host, tmp_path / "sessions", "sessions", SESSIONS)
    (verdict,) = sessions.state["verdicts"]
    assert verdict["label"] == "no enable_prefix_caching" and verdict["decision"] == "not_better", verdict
    assert verdict["outcome"] == "not_better" and verdict["gain_pct"] + verdict["half_width_pct"] < 0
    assert sessions.recommended_command == "vllm serve Qwen/Qwen3-8B"  # caching stays on
    on, off = _results(runs_db, sessions.id, verdict["label"])
    assert len(on) >= 4 and len(off) >= 4  # two launches of each, two repetitions on each
    assert all(result["prefix_cache_hit_rate"] > 50.0 for result in on)  # history and shared preambles
    assert all(
        result["prefix_cache_hit_rate"] is None and result["prefix_cache_queries"] == 0 for result in off
    )
    assert all(result["sessions"]["completed"] == sized_count(result, 60) for result in on + off)
    # each repetition on a launch is a fresh draw, and says what was done about the cache
    assert {result["dataset"]["seed"] for result in on} == {3, derived_seed(3, 1)}
    assert all(
        result["cache_reset"]["requested"] and "VLLM_SERVER_DEV_MODE=1" in result["cache_reset"]["reason"]
        for result in on
    )

    iid = run_workload_study(runs_db, sim_host, tmp_path / "iid", "iid", IID)
    (iid_verdict,) = iid.state["verdicts"]
    # Prefix caching changes nothing on prompts that share no prefix: the candidate is not kept (with this
    # seed the call is "within noise"; a launch a busy machine slowed can make it "not better", which is
    # as correct), and what separates the two is small beside what caching saves on sessions.
    assert iid_verdict["decision"] in ("within_noise", "not_better"), iid.state["verdicts"]
    assert abs(iid_verdict["gain_pct"]) < abs(verdict["gain_pct"]) / 3, (verdict, iid_verdict)
    assert iid.recommended_command == "vllm serve Qwen/Qwen3-8B"
    on, off = _results(runs_db, iid.id, iid_verdict["label"])
    assert all(result["prefix_cache_hit_rate"] < 1.0 for result in on)
    assert all(result["prefix_cache_hit_rate"] is None for result in off)


PREFIX_STAGE = "- name: Prefix caching\n  dimension: prefix_cache\n  candidates: [false]\n"


def test_the_new_study_form_offers_the_agentic_preset() -> None:
    spec = form_spec(tuning_profile="agentic", scale=0.1, stages_yaml=PREFIX_STAGE)
    tuning = spec.tuning()
    assert tuning.dataset == "generated-shared-prefix" and tuning.sessions
    assert (
        tuning.num_prompts == 26 and tuning.shared_prefix is not None and tuning.shared_prefix.num_turns == 4
    )
    assert [
        run.seed
        for run in form_spec(tuning_profile="agentic", repeats=3, stages_yaml=PREFIX_STAGE).tuning_runs()
    ] == [
        42,
        derived_seed(42, 1),
        derived_seed(42, 2),
    ]
