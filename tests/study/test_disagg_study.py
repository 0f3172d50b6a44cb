"""A study that weighs prefill/decode splits against aggregated layouts, run for real on a simulated
4 × H200 host by a real worker: its search launches aggregated configurations and splits (each split's
workers behind the real sglang-router, every request prefill → decode), scores them on a swept tuning
profile under mean TPOT and TTFT limits, ends, and its report names the layout it chose with the trade of
the best split against the best aggregated layout and the verdict between them, in every rendering."""

from __future__ import annotations

import csv
import io
import re
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db.session import new_session
from perflab.report.export import report_json, results_csv
from perflab.report.from_study import study_report
from perflab.report.markdown import render_markdown
from perflab.study.progress import load_progress
from tests.fixtures.runs import SimHostFactory, write_hosts_file
from tests.fixtures.study_data import run_study

SPEC = """
name: aggregated or disaggregated
model: Qwen/Qwen3-8B
hosts: [{host}]
baseline: {{engine: sglang, tp: 2}}
gpus: 4
objective: output_throughput
slos: {{mean_tpot_ms: 1000, mean_ttft_ms: 10000}}
tuning_profile: {{name: tune, title: Long prompts, dataset: random, input_len: 1500, output_len: 24,
  num_prompts: 60, sweep: {{kind: request_rate, values: [6, 20], stop_when_flat: false}}}}
stages:
  - name: Serving layout
    search:
      parallelism:
        - {{tp: 1}}
        - {{tp: 4}}
        - {{disaggregation: {{prefill: {{workers: 2, tp: 1}}, decode: {{workers: 1, tp: 2}},
            transfer_backend: mooncake}}}}
      budget: {{launches: 3}}
      screening: 1.0
      startup_trials: 3
      seed: 0
      max_measurements: 2
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_study_of_splits_and_aggregated_layouts_reports_its_choice(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path
) -> None:
    pytest.importorskip("sglang_router")
    path = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
    host = sim_host(
        "pd-study",
        kind="local",
        accelerator="H200",
        count=4,
        time_scale=5,
        startup_scale=1000,
        env={"PATH": path},
    )
    hosts = write_hosts_file(tmp_path / "hosts.yaml", [host])
    final = run_study(runs_db, SPEC.format(host=host.name), hosts, timeout_s=840)
    assert final.status == "done", (final.state.get("failure"), final.state.get("phase"))
    with new_session(runs_db) as session:
        progress = load_progress(session, study_id=final.id)
        report = study_report(session, study_id=final.id)

    # the split was launched as workers behind the router, every request prefill → decode
    split_runs = [run for run in progress.runs if run.config.get("disaggregation")]
    assert split_runs and all(run.status == "done" for run in progress.runs)
    for run in split_runs:
        names = [entry["name"] for entry in run.remote_state["processes"]]
        assert names == ["prefill-0", "prefill-1", "decode-0", "router"]
        run_dir = Path(run.remote_state["run_dir"])
        sent = {
            room
            for worker in ("prefill-0", "prefill-1")
            for room in re.findall(r"KV sent room=(\d+)", (run_dir / f"{worker}.log").read_text())
        }
        received = re.findall(r"KV received room=(\d+)", (run_dir / "decode-0.log").read_text())
        assert received and sorted(received) == sorted(sent)

    # the report names the choice, the trade and the verdict, whichever side the study chose
    (choice,) = report.layouts
    assert report.best is not None
    chosen = progress.plan.best.config
    assert chosen is not None and choice.chosen.endswith(
        "2P1D (P TP1, D TP2)" if chosen.disaggregation else f"TP{chosen.tp} ×{chosen.replicas}"
    )
    assert choice.split is not None and choice.split.layout == "disaggregated 2P1D (P TP1, D TP2)"
    assert choice.aggregated is not None and choice.aggregated.layout.startswith("aggregated TP")
    assert choice.trade is not None and choice.trade.startswith(
        f"disaggregated 2P1D (P TP1, D TP2) against {choice.aggregated.layout}: TPOT "
    )
    assert choice.verdict is not None and choice.verdict.n_candidate >= 1
    text = choice.text()
    assert text.startswith(f"Serving layout: chose {choice.chosen}. Disaggregated 2P1D")
    assert text in render_markdown(report).replace("\\", "")
    assert report_json(report)["layouts"] == [choice.to_dict()]
    rows = list(csv.DictReader(io.StringIO(results_csv(report), newline="")))
    assert {row["layout_choice"] for row in rows if row["layout"] == choice.split.layout} == {text}
