"""A study on a simulated H200 host, predicted before it is measured: with AIConfigurator installed
(the cached venv of ``.ci/install-aiconfigurator``) its page's result, report, JSON and CSV show every
configuration's predicted figures beside the measured and simulated ones; without it (this venv, which
never has it) they say in one line that no prediction is available, and the study runs as before."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.models import Study
from db.session import new_session
from perflab.inventory import load_inventory
from perflab.predict.installation import COMMAND_ENV
from perflab.predict.store import prediction_line, read_predictions
from perflab.report.export import report_json, results_csv
from perflab.report.from_study import study_report
from perflab.report.markdown import render_markdown
from perflab.report.model import Report
from perflab.study.coordinator import create_study
from perflab.study.headless import wait_for_study
from perflab.study.predicting import predict_study
from perflab.study.progress import StudyProgress, load_progress
from perflab.study.spec import parse_spec
from perflab.study.stored_predictions import stored_predictor
from tests.fixtures.runs import SimHostFactory, write_hosts_file
from tests.fixtures.study_data import FAST

SPEC = """
name: predicted study
model: Qwen/Qwen3-8B
hosts: [{host}]
baseline: {{engine: vllm}}
gpus: 2
tuning_profile: {{name: tune, title: Tune, dataset: random, input_len: 256, output_len: 64, num_prompts: 64}}
objective: output_throughput
stages:
  - name: Parallelism
    candidates: [{{tp: 2}}]
"""


def _run(engine: Engine, sim_host: SimHostFactory, directory: Path) -> tuple[Study, list[str], Report]:
    host = sim_host("h200-sim", kind="local", accelerator="H200", time_scale=100)
    hosts_file = write_hosts_file(directory / "hosts.yaml", [host])
    study = create_study(
        engine,
        parse_spec(SPEC.format(host=host.name), name="study.yaml"),
        inventory=load_inventory(hosts_file),
    )
    lines: list[str] = []

    def seen(progress: StudyProgress) -> None:
        line = prediction_line(progress.study.state)
        if line:
            lines.append(line)

    final = wait_for_study(
        engine,
        study.id,
        hosts_path=hosts_file,
        timeout_s=600,
        poll_s=0.2,
        runner_options=FAST,
        on_progress=seen,
    )
    assert final.status == "done", (final.state.get("failure"), final.state.get("phase"))
    with new_session(engine) as session:
        report = study_report(session, study_id=study.id)
    return final, lines, report


def test_without_aiconfigurator_a_study_says_in_one_line_that_nothing_is_predicted(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(COMMAND_ENV, raising=False)
    assert not (Path(sys.executable).parent / "aiconfigurator").exists(), "this venv must not have the extra"
    final, lines, report = _run(runs_db, sim_host, tmp_path)

    expected = (
        "No prediction: AIConfigurator is not installed (pip install 'perflab[predict]', or set "
        "PERFLAB_AICONFIGURATOR to its aisimulate or aiconfigurator command)"
    )
    assert lines and set(lines) == {expected}
    assert report.predictions is not None and report.predictions.line == expected
    assert report.predictions.rows == ()
    assert report_json(report)["predictions"] == {"line": expected, "progress": None, "rows": []}
    assert "No prediction: AIConfigurator is not installed" in render_markdown(report)
    assert "predicted_output_tps_per_gpu" not in results_csv(report)
    assert report.recommended_command  # the study went on without it


def test_with_aiconfigurator_each_configuration_shows_predicted_beside_measured(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path, with_aiconfigurator: Path
) -> None:
    final, lines, report = _run(runs_db, sim_host, tmp_path)

    assert any(line.startswith("predicting 1 of ") and "(AIConfigurator 0.12.0" in line for line in lines)
    section = report.predictions
    assert section is not None and section.progress is None
    assert section.line.startswith("Predicted by AIConfigurator 0.12.0 from its vLLM ")
    assert [row.label for row in section.rows] == ["Baseline", "tp=2"]
    for row in section.rows:
        assert row.predicted is not None and row.simulated is not None and row.note is None
        assert row.predicted.output_tps_per_gpu > 0 and row.predicted.mean_tpot_ms > 0
        assert row.measured.output_tps_per_gpu is not None and row.measured.output_tps_per_gpu > 0
        assert row.seconds is not None and row.seconds > 0
    # one model: the page's table, the markdown, the JSON and the CSV carry the same figures
    baseline = section.rows[0]
    shown = report_json(report)["predictions"]["rows"][0]
    assert shown["predicted_output_tps_per_gpu"] == baseline.predicted.output_tps_per_gpu
    assert shown["measured_output_tps_per_gpu"] == baseline.measured.output_tps_per_gpu
    markdown = render_markdown(report)
    assert "### Predictions" in markdown and f"{baseline.predicted.output_tps_per_gpu:,.0f}" in markdown
    tuning_rows = [row for row in report.records if row.get("profile") == "tune"]
    assert tuning_rows and all(row["predicted_output_tps_per_gpu"] for row in tuning_rows)
    assert "predicted_output_tps_per_gpu" in results_csv(report).splitlines()[0]

    # stored: nothing is predicted twice, and what the study stored is what the report shows
    assert predict_study(runs_db, final.id) == 0
    with new_session(runs_db) as session:
        stored = crud.get_study(session, study_id=final.id)
        again = study_report(session, study_id=final.id)
    assert stored is not None and again.predictions == section

    # the search's seam: a stored prediction answers as result fields; a configuration not predicted yet
    # answers None and is predicted next
    with new_session(runs_db) as session:
        plan = load_progress(session, study_id=final.id).plan
    lookup = stored_predictor(final.id, stored.state)
    assert plan.baseline.config is not None
    predicted = lookup(plan.baseline.config)
    found = read_predictions(stored.state).predictions[plan.baseline.config.fingerprint()]
    assert predicted is not None and predicted.source.startswith("AIConfigurator (vLLM ")
    assert predicted.values["output_throughput"] == pytest.approx(
        baseline.predicted.output_tps_per_gpu * found.gpus
    )
    unseen = plan.baseline.config.model_copy(update={"max_num_seqs": 8})
    assert lookup(unseen) is None
    assert predict_study(runs_db, final.id) == 1
