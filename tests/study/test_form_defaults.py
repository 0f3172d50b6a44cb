"""A study made from the new-study form's defaults (ShareGPT tuning at a tenth of its prompts, the four
validation profiles, the stages template, its launches per configuration: one, up to four
on a close call) on a simulated local host with seeded noise:

- judges every tuning and validation cell: each benchmark is sized to the floor of evidence, whatever
  the configuration's speed, so none is too short and no candidate is left "neither kept nor beaten";
- decides with its noise: its page, its report and ``study show --json`` show the spread it used and
  where it came from, every verdict with its interval, and the true gain its host and design keep 4
  times in 5.

The host runs 200 times faster than the engine it simulates: the floor counts the seconds of the
simulated clock that times every figure (``perflab.runner.evidence.floor_args``), so the sizing is the
same at any time scale and only the wait is shorter."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.cli import main
from perflab.inventory import load_inventory
from perflab.report.from_study import study_report
from perflab.report.markdown import render_markdown
from perflab.runner.evidence import MIN_COMPLETED, MIN_DURATION_S, unjudged_reason
from perflab.study.coordinator import create_study
from perflab.study.decide import detectable_text
from perflab.study.headless import wait_for_study
from perflab.study.measure import is_tuning, study_runs
from tests.fixtures.runs import SimHostFactory, write_hosts_file
from tests.fixtures.study_data import FORM_VALIDATION, WHOLE_STUDY, form_defaults_spec
from tests.ui.conftest import app_env, hosts_file, open_page, texts  # noqa: F401  (fixtures reused)


@pytest.mark.slow
@pytest.mark.timeout(1500)  # a whole study of the form's defaults, every launch sized to the floor
def test_a_study_from_the_forms_defaults_judges_every_cell_and_decides_with_its_noise(
    runs_db: Engine,
    sim_host: SimHostFactory,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    open_page,  # type: ignore[no-untyped-def]  # noqa: F811
) -> None:
    host = sim_host(
        "local-sim", kind="local", time_scale=200, noise={"run_cv_pct": 2, "launch_cv_pct": 1, "seed": 4}
    )
    hosts = write_hosts_file(tmp_path / "hosts.yaml", [host])
    spec = form_defaults_spec(host.name)
    assert (spec.repeats, spec.relaunches, spec.max_launches) == (1, 1, 4)  # the form's defaults
    study = create_study(runs_db, spec, inventory=load_inventory(hosts))
    started = time.monotonic()
    final = wait_for_study(
        runs_db, study.id, hosts_path=hosts, timeout_s=1500, poll_s=0.2, runner_options=WHOLE_STUDY
    )
    assert final.status == "done", (final.state.get("failure"), final.state.get("phase"))

    # every tuning and validation cell is judged: none too short, no candidate left undecided
    with new_session(runs_db) as session:
        runs = study_runs(session, study_id=study.id)
        results = [result for run in runs for result in crud.list_profile_results(session, run_id=run.id)]
        candidates = crud.list_candidates(session, study_id=study.id)
    tuned = [result for result in results if is_tuning(result.profile_name, spec.tuning())]
    validated = [result for result in results if result.profile_name in FORM_VALIDATION]
    assert tuned and {result.profile_name for result in validated} == set(FORM_VALIDATION)
    for result in tuned + validated:
        assert unjudged_reason(result.result) is None, (result.profile_name, result.result.get("too_short"))
        assert result.result["duration"] * host.time_scale >= MIN_DURATION_S
        assert result.result["completed"] >= MIN_COMPLETED
    assert all(candidate.decision != "too_short" for candidate in candidates)
    validation_rows = [candidate for candidate in candidates if candidate.role == "validation"]
    assert len(validation_rows) == 2 and all(candidate.run_id is not None for candidate in validation_rows)
    elapsed_s = time.monotonic() - started

    # study show --json: the spread and its source, every verdict with its interval, the detectable gain
    url = runs_db.url.render_as_string(hide_password=False)
    assert main(["study", "--url", url, "show", str(study.id), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    spread = shown["spread"]
    assert spread["study"]["cv_pct"] is not None and spread["study"]["measured_df"] >= 1
    assert "measured today" in spread["study"]["text"] and spread["study"]["reuse"] == "not offered"
    assert spread["detectable_gain_pct"] is not None
    assert shown["verdicts"] and all(verdict["half_width_pct"] is not None for verdict in shown["verdicts"])
    assert all(" ± " in verdict["text"] and ", 95 %, " in verdict["text"] for verdict in shown["verdicts"])

    # the report: the same spread and detectable gain, each verdict beside its candidate
    with new_session(runs_db) as session:
        report = study_report(session, study_id=study.id)
    markdown = render_markdown(report)
    assert f"Spread of the verdicts: {spread['study']['text']}." in markdown
    detectable = detectable_text(spread["detectable_gain_pct"])
    assert f"{detectable[0].upper()}{detectable[1:]}." in markdown
    for verdict in shown["verdicts"]:
        assert verdict["text"] in markdown

    # the study page: the same sentences, and each verdict in its candidate's note
    app = open_page(url, "pages/study.py", {"study": str(study.id)})
    assert not app.exception
    page_text = " ".join(texts(app.markdown) + texts(app.caption))
    assert f"Spread of the verdicts: {spread['study']['text']}." in page_text
    assert f"{detectable[0].upper()}{detectable[1:]}." in page_text
    notes = " ".join(
        str(note) for frame in app.dataframe if "Note" in frame.value for note in frame.value["Note"]
    )
    for verdict in shown["verdicts"]:
        assert verdict["text"] in notes
    print(f"form-default study: {len(tuned)} tuning and {len(validated)} validation cells judged "
          f"in {elapsed_s:.0f} s")  # fmt: skip
