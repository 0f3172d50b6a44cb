"""A study whose ShareGPT profile ran on perflab's ShareGPT-format sample publishes the ``vllm bench
serve`` command of that file, not of the ShareGPT dump it did not read; a study on the dump names the
dump."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import Session

from db import crud
from perflab.hub.catalog import sample_note
from perflab.hub.sample import SAMPLE_NAME
from perflab.inventory import load_inventory
from perflab.profiles import SHAREGPT_FILE
from perflab.report.from_study import study_report
from perflab.study.coordinator import advance, create_study
from perflab.study.measure import study_runs
from perflab.study.spec import parse_spec

SPEC = """
name: sharegpt study
model: Qwen/Qwen3-8B
hosts: [local-sim]
baseline: {engine: vllm}
gpus: 1
tuning_profile: sharegpt
stages:
  - name: Engine
    dimension: engine
    candidates: [sglang]
"""


@pytest.mark.parametrize(
    ("notes", "named", "not_named"), [(True, SAMPLE_NAME, SHAREGPT_FILE), (False, SHAREGPT_FILE, SAMPLE_NAME)]
)
def test_the_sharegpt_command_names_the_file_the_study_read(
    db_session: Session, tmp_path: Path, notes: bool, named: str, not_named: str
) -> None:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(f"hosts:\n  - {{name: local-sim, transport: local, workdir: {tmp_path / 'work'}}}\n")
    engine = db_session.get_bind()
    study = create_study(engine, parse_spec(SPEC), inventory=load_inventory(hosts))
    advance(engine, study.id)
    (baseline,) = study_runs(db_session, study_id=study.id)
    crud.add_profile_result(
        db_session,
        run_id=baseline.id,
        profile=baseline.profiles[0],
        result={
            "completed": 10,
            "failed": 0,
            "total_token_throughput": 1000.0,
            "notes": [sample_note("the hub could not be reached")] if notes else [],
        },
        text_block=None,
        bench_mode=None,
    )
    (command,) = [text for title, text in study_report(db_session, study_id=study.id).bench_commands]
    assert f"--dataset-path {named}" in command and not_named not in command
