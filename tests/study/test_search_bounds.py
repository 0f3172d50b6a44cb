"""A search cannot stall the fleet: a stage with no buildable point (TP3 on a budget of 2 accelerators)
fails the study with the reason within one advance, every proposal counted whatever its outcome, while
a worker keeps claiming other runs; a seed past NumPy's range is refused when the spec is read, on its
line; ``study show`` reads such a study at once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.cli import main
from perflab.engines.config import EngineConfig
from perflab.inventory import load_inventory
from perflab.runner.profile_spec import parse_profile
from perflab.runner.submit import submit_run
from perflab.study.coordinator import advance, create_study
from perflab.study.measure import study_runs
from perflab.study.search import MAX_WITHOUT_LAUNCH
from perflab.study.spec import StudySpecError, parse_spec
from perflab.worker import Worker
from tests.fixtures.runs import SimHostFactory, inventory_of, write_hosts_file
from tests.fixtures.study_data import FAST
from tests.study.by_hand import measure_once

SPEC = """
name: unbuildable search
model: Qwen/Qwen3-8B
hosts: [{host}]
baseline: {{engine: vllm}}
gpus: 2
tuning_profile: {{name: tune, title: Tune, dataset: random, input_len: 64, output_len: 64, num_prompts: 50,
  max_concurrency: 4}}
stages:
  - name: Batching
    search:
      knobs: {{max_num_batched_tokens: {{low: 1024, high: 1048576}}}}
      parallelism: [{{tp: 3}}]
      budget: {{launches: 8}}
      seed: {seed}
"""
DEADLINE_S = 180.0


def test_a_seed_past_numpys_range_is_refused_on_its_line() -> None:
    with pytest.raises(StudySpecError) as refused:
        parse_spec(SPEC.format(host="gpu-a", seed=2**40), name="study.yaml")
    assert refused.value.problems == ["study.yaml:15: stages[0].search.seed: must be <= 4294967295"]
    with pytest.raises(StudySpecError) as refused:  # past 64 bits, the reader refuses it first
        parse_spec(SPEC.format(host="gpu-a", seed=10**20), name="study.yaml")
    (problem,) = refused.value.problems
    assert problem.startswith("study.yaml:15: ")


def test_a_search_with_no_buildable_point_fails_within_one_advance(
    db_engine: Engine, sim_host: SimHostFactory, capsys: pytest.CaptureFixture[str], database_url: str
) -> None:
    host = sim_host("gpu-a", kind="local", count=8)
    spec = parse_spec(SPEC.format(host=host.name, seed=0))
    study_id = create_study(db_engine, spec, inventory=inventory_of(host)).id
    advance(db_engine, study_id)
    with new_session(db_engine) as session:
        (baseline,) = study_runs(session, study_id=study_id)
    measure_once(db_engine, baseline.id, {"completed": 8, "failed": 0, "total_token_throughput": 1000.0})
    advance(db_engine, study_id)  # one advance: the search proposes, nothing can be built, it stops
    with new_session(db_engine) as session:
        study = crud.get_study(session, study_id=study_id)
        runs = study_runs(session, study_id=study_id)
    assert study.status == "failed" and len(runs) == 1
    failure = study.state["failure"]
    assert failure.startswith("stage 1 (Batching): no configuration of its space can be built (")
    assert failure.endswith(
        f"({MAX_WITHOUT_LAUNCH} proposals): needs 3 accelerators (tp×dp×replicas) but a node has 2"
    )
    # every proposal counted: the search stopped after the bound, not after a point was built
    record = study.state["stage_state"]["1"]
    trials = record["trials"]
    assert len(trials) == MAX_WITHOUT_LAUNCH and all(trial["refused"] for trial in trials)
    assert record["stop"].startswith(f"the last {MAX_WITHOUT_LAUNCH} proposals launched nothing")
    assert main(["study", "--url", database_url, "show", str(study_id), "--timeout", "30"]) == 0
    assert "failed: stage 1 (Batching): no configuration of its space can be built" in capsys.readouterr().out


def test_a_worker_keeps_claiming_runs_while_such_a_study_fails(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path
) -> None:
    host = sim_host("gpu-b", kind="local", count=8)
    hosts = write_hosts_file(tmp_path / "hosts.yaml", [host])
    study_id = create_study(
        runs_db, parse_spec(SPEC.format(host=host.name, seed=0)), inventory=load_inventory(hosts)
    ).id
    worker = Worker(runs_db, inventory_path=hosts, poll_interval_s=0.2, runner_options=FAST)
    worker.start()
    try:
        deadline = time.monotonic() + DEADLINE_S
        other = None
        while time.monotonic() < deadline:
            with new_session(runs_db) as session:
                study = crud.get_study(session, study_id=study_id)
                baseline = next(iter(study_runs(session, study_id=study_id)), None)
                finished = other is not None and crud.require_run(session, run_id=other.id).status == "done"
            if other is None and baseline is not None and baseline.status == "done":
                # the study's next advance is the search's: queue another run now
                config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B")
                profile = parse_profile("random:in=32,out=4,n=4")
                other = submit_run(runs_db, host_name=host.name, config=config, profiles=[profile])
            if finished and study.status == "failed":
                break
            time.sleep(0.2)
    finally:
        worker.stop()
    assert other is not None, "the baseline never finished"
    assert study.status == "failed" and "no configuration of its space can be built" in study.state["failure"]
    with new_session(runs_db) as session:
        assert crud.require_run(session, run_id=other.id).status == "done"
