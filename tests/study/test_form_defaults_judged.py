"""A study made from the new-study form's defaults on a simulated host (ShareGPT tuning at a tenth of
its prompts, the four validation profiles, the stages template) judges every tuning and validation
cell: each benchmark is sized to the floor of evidence, whatever the configuration's speed, so none is
too short and no candidate is left "neither kept nor beaten". The host runs 200 times faster than the
engine it simulates: the floor counts the seconds of the simulated clock that times every figure
(``perflab.runner.evidence.floor_args``), so the sizing is the same at any time scale and only the
wait is shorter."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.inventory import load_inventory
from perflab.runner.evidence import MIN_COMPLETED, MIN_DURATION_S, unjudged_reason
from perflab.study.coordinator import create_study
from perflab.study.headless import wait_for_study
from perflab.study.measure import is_tuning, study_runs
from tests.fixtures.runs import SimHostFactory, write_hosts_file
from tests.fixtures.study_data import FORM_VALIDATION, WHOLE_STUDY, form_defaults_spec


@pytest.mark.slow
@pytest.mark.timeout(1500)  # a whole study of the form's defaults, every launch sized to the floor
def test_a_study_from_the_forms_defaults_judges_every_tuning_and_validation_cell(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path
) -> None:
    host = sim_host("local-sim", kind="local", time_scale=200)
    hosts = write_hosts_file(tmp_path / "hosts.yaml", [host])
    spec = form_defaults_spec(host.name)
    study = create_study(runs_db, spec, inventory=load_inventory(hosts))
    started = time.monotonic()
    final = wait_for_study(
        runs_db, study.id, hosts_path=hosts, timeout_s=1500, poll_s=0.2, runner_options=WHOLE_STUDY
    )
    assert final.status == "done", (final.state.get("failure"), final.state.get("phase"))

    with new_session(runs_db) as session:
        runs = study_runs(session, study_id=study.id)
        results = [result for run in runs for result in crud.list_profile_results(session, run_id=run.id)]
        candidates = crud.list_candidates(session, study_id=study.id)
    tuning = spec.tuning()
    tuned = [result for result in results if is_tuning(result.profile_name, tuning)]
    validated = [result for result in results if result.profile_name in FORM_VALIDATION]
    assert tuned and {result.profile_name for result in validated} == set(FORM_VALIDATION)
    for result in tuned + validated:
        assert unjudged_reason(result.result) is None, (result.profile_name, result.result.get("too_short"))
        assert result.result["duration"] * host.time_scale >= MIN_DURATION_S
        assert result.result["completed"] >= MIN_COMPLETED
    assert all(candidate.decision != "too_short" for candidate in candidates)
    validation_rows = [candidate for candidate in candidates if candidate.role == "validation"]
    assert len(validation_rows) == 2 and all(candidate.run_id is not None for candidate in validation_rows)
    print(f"form-default study: {len(tuned)} tuning and {len(validated)} validation cells judged "
          f"in {time.monotonic() - started:.0f} s")  # fmt: skip
