"""Load curves on the simulator: a study whose objective is the highest load within SLOs sweeps
concurrency on each launch of a configuration, finds each curve's saturation point and SLO limit, and
shows both (chart data and report)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db.session import new_session
from perflab.report.charts import load_curve_data, report_charts
from perflab.report.from_study import study_report
from perflab.report.markdown import render_markdown
from perflab.study.progress import load_progress
from tests.fixtures.runs import SimHostFactory, write_hosts_file
from tests.fixtures.study_data import run_study

# With at most 2 sequences in a batch the engine saturates at 2 concurrent requests and queues the
# rest (TTFT at 16 is many times that at 2); with 16 the curve still rises at 16 and TTFT stays low.
# Steps run at a 200th of their simulated time with 256 output tokens. The bench times every request by
# the simulator's own clock, which sends a closed loop's next request when the one that freed its slot
# ended, so the time the client spends between two requests on a loaded machine is in no figure, and
# every point is sized to the 5 s of simulated time a result needs to be judged (perflab.runner.evidence).
# Every figure the bench reports is in the host's scaled time (the model's seconds divided by the time
# scale), and so are the SLOs: at 16 concurrent requests the P99 TTFT is 12.8 s of model time with 2
# sequences a batch (every request queues behind the running two) and 0.5 s with 16 (one batch of prompts
# behind the front end), so a TTFT SLO of 8 s of model time lies between them with room on both sides.
TIME_SCALE = 200
MODEL_SLOS_MS = {"p99_ttft_ms": 8000, "mean_tpot_ms": 400}  # in the model's time, at time scale 1
SPEC = """
name: load within SLO
model: Qwen/Qwen3-8B
hosts: [{host}]
baseline: {{engine: vllm, max_num_seqs: 2}}
gpus: 1
objective: max_load_within_slo
slos: {{{slos}}}
tuning_profile:
  name: curve
  title: Concurrency sweep
  dataset: random
  input_len: 512
  output_len: 256
  num_prompts: 50
  sweep: {{kind: max_concurrency, values: [1, 2, 16]}}
stages:
  - name: Max num seqs
    dimension: max_num_seqs
    candidates: [16]
"""


def scaled_slos(time_scale: float) -> dict[str, float]:
    """The SLOs in the time of a host running ``time_scale`` times faster than the model."""
    return {name: limit / time_scale for name, limit in MODEL_SLOS_MS.items()}


def slos_yaml(time_scale: float) -> str:
    """The SPEC's ``slos`` mapping (inside its braces) on a host at ``time_scale``."""
    return ", ".join(f"{name}: {limit:g}" for name, limit in scaled_slos(time_scale).items())


def slos_shown(time_scale: float) -> str:
    """The SLOs as the report names them, on a host at ``time_scale``."""
    return ", ".join(f"{name} ≤ {limit:g}" for name, limit in scaled_slos(time_scale).items())


@pytest.mark.slow
def test_sweep_finds_saturation_and_slo_limit_and_the_study_keeps_the_higher_limit(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path
) -> None:
    host = sim_host("curve-sim", kind="local", time_scale=TIME_SCALE)
    spec = SPEC.format(host=host.name, slos=slos_yaml(TIME_SCALE))
    study = run_study(runs_db, spec, write_hosts_file(tmp_path / "hosts.yaml", [host]))

    assert study.status == "done", study.state
    with new_session(runs_db) as session:
        progress = load_progress(session, study_id=study.id)
        report = study_report(session, study_id=study.id)
    plan = progress.plan
    # each configuration launched as its verdict needs; its latest launch stored every sweep point
    for candidate in (plan.baseline, plan.stages[0].candidates[0]):
        outcome = progress.outcome(candidate)
        assert [r.sweep_point["value"] for r in outcome.results] == [1, 2, 16]
        assert len(outcome.run.serve_commands) == 1
    baseline_curve = progress.outcome(plan.baseline).score.curve
    candidate_curve = progress.outcome(plan.stages[0].candidates[0]).score.curve
    assert baseline_curve.saturation.load == 2
    assert baseline_curve.slo_limit.load == 2
    assert not baseline_curve.points[-1].meets_slos
    assert candidate_curve.saturation is None and candidate_curve.peak.load == 16
    assert candidate_curve.slo_limit.load == 16
    # the objective is the highest load within the SLOs: 16 beats 2
    assert plan.baseline.value == 2.0
    assert plan.stages[0].winner.label == "max_num_seqs=16" and plan.best.value == 16.0

    # both marks are in the chart data and the report
    assert [title for title, _ in report.curves] == [
        "Baseline: Concurrency sweep",
        "max_num_seqs=16: Concurrency sweep",
    ]
    data = load_curve_data(report.curves[0][1])
    marks = dict(zip(data["load"], data["mark"], strict=True))
    assert "saturation" in marks[2.0] and "highest load within SLO" in marks[2.0]
    assert "peak throughput" in " ".join(marks.values())
    assert {"load_curve_1", "load_curve_2"} <= set(report_charts(report))
    markdown = render_markdown(report)
    assert "- Saturation: throughput reaches its plateau at 2 concurrent requests" in markdown
    assert f"- Highest load within the SLOs ({slos_shown(TIME_SCALE)}): 2 concurrent requests" in markdown
    assert f"- Highest load within the SLOs ({slos_shown(TIME_SCALE)}): 16 concurrent requests" in markdown
