"""One published gain per decision, everywhere: a study on a simulated host with seeded noise keeps a
large batching gain and decides a second stage; its page, its markdown report, ``results.json`` and
``results.csv`` show for each decision the gain it published with its interval — the comparison table,
the per-accelerator line, the Summary and the cost row the recommendation's, which, with one kept stage,
is that stage's decision (the same pair: one interval, not two)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db.session import new_session
from perflab.report.costs import cost_change_text
from perflab.report.export import results_csv, results_json
from perflab.report.from_study import study_report
from perflab.report.markdown import render_markdown
from perflab.report.published import published_gain
from tests.fixtures.runs import SimHostFactory, write_hosts_file
from tests.fixtures.study_data import run_study
from tests.ui.conftest import app_env, hosts_file, run_app, texts  # noqa: F401  (fixtures reused)

SPEC = """
name: published gains
model: Qwen/Qwen3-8B
hosts: [{host}]
baseline: {{engine: vllm, max_num_seqs: 2}}
gpus: 1
relaunches: 3
max_launches: 3
tuning_profile: {{name: tune, title: Chat, dataset: random, input_len: 128, output_len: 64, num_prompts: 120,
  max_concurrency: 16}}
stages:
  - name: Batching
    candidates: [{{max_num_seqs: 16}}]
  - name: Chunking
    dimension: max_num_batched_tokens
    candidates: [8192]
"""


@pytest.mark.slow
def test_page_report_json_and_csv_show_one_published_gain_per_decision(
    runs_db: Engine,
    sim_host: SimHostFactory,
    tmp_path: Path,
    app_env,  # type: ignore[no-untyped-def]  # noqa: F811
) -> None:
    host = sim_host(
        "published",
        kind="local",
        count=1,
        time_scale=200,
        noise={"run_cv_pct": 1, "launch_cv_pct": 1, "seed": 3},
        price_per_accelerator_hour=2.5,
    )
    hosts = write_hosts_file(tmp_path / "hosts.yaml", [host])
    final = run_study(runs_db, SPEC.format(host=host.name), hosts)
    assert final.status == "done", (final.state.get("failure"), final.state.get("phase"))
    url = runs_db.url.render_as_string(hide_password=False)
    app_env(url, hosts)  # the app, and the report's prices, read this hosts file
    with new_session(runs_db) as session:
        report = study_report(session, study_id=final.id)
    markdown = render_markdown(report)
    payload = json.loads(results_json(report))
    records = list(csv.DictReader(io.StringIO(results_csv(report))))
    app = run_app("pages/study.py", {"study": str(final.id)})
    assert not app.exception
    comparison, summary = (frame.value for frame in app.dataframe[:2])
    captions = texts(app.caption)
    decimals = report.decimals

    # every decision: the gain it published, with its interval, in the JSON and on its CSV rows
    assert report.verdicts
    for row, shown in zip(report.verdicts, payload["verdicts"], strict=True):
        gain = published_gain(row.verdict)
        assert shown["published"] == gain.to_json()
        rows = [
            record for record in records if (record["stage"], record["candidate"]) == (row.stage, row.label)
        ]
        assert rows
        assert [float(record["published_gain_pct"]) for record in rows] == pytest.approx(
            [gain.change * 100] * len(rows)
        )
        assert [float(record["published_half_width_pct"]) for record in rows] == pytest.approx(
            [gain.half_width * 100] * len(rows)
        )

    # each kept stage: its decision's published gain in the Summary of the report, the page and the JSON;
    # against the baseline, the kept stages' gains one after the other, the last the recommendation's
    kept = [stage for stage in report.stages if stage.winner is not None]
    assert kept, [(c.label, c.decision, c.note) for stage in report.stages for c in stage.candidates]
    for stage in kept:
        winner = next(candidate for candidate in stage.candidates if candidate.label == stage.winner)
        decision = published_gain(winner.verdict)
        # the study is done: every kept stage published its gain on its fresh confirmation launches
        assert decision.confirmed and not decision.adjusted and decision.half_width is not None
        assert decision.half_width * 100 == pytest.approx(winner.verdict.confirmed_half_width_pct)
        [summary_row] = [row for row in report.summary if row.option == stage.name]
        assert summary_row.improvement == decision
        text = decision.text(decimals)
        summary_line = next(line for line in markdown.splitlines() if line.startswith(f"| {stage.name} |"))
        assert f">{text}</span> |" in summary_line
        page_row = summary[summary["Optimization option"] == stage.name].iloc[0]
        assert page_row["Throughput improvement kept"] == text
        assert page_row["Best candidate against the baseline"] == summary_row.versus_baseline.text(decimals)
        [json_row] = [row for row in payload["summary"] if row["option"] == stage.name]
        assert json_row["improvement"] == decision.to_json()
        assert json_row["versus_baseline"] == summary_row.versus_baseline.to_json()
    last = next(row for row in report.summary if row.option == kept[-1].name)
    assert last.versus_baseline == report.published

    # the recommendation over the baseline: one figure and interval in the comparison table, the
    # per-accelerator line, the sentence under them, the page and the JSON
    published = report.published
    assert published is not None and published.decided and published.half_width is not None
    if len(kept) == 1:
        # the same pair as the kept stage's decision: its figure, not a second interval
        winner = next(candidate for candidate in kept[0].candidates if candidate.label == kept[0].winner)
        assert published == published_gain(winner.verdict)
        other = report.recommendation_verdict
        if abs(other.half_width_pct - winner.verdict.half_width_pct) >= 0.05:
            assert f"± {other.half_width_pct:.1f} %" not in markdown
            assert f"± {other.half_width_pct:.1f}%" not in markdown
    else:
        assert published == published_gain(report.recommendation_verdict)
    text = published.text(decimals)
    tuning = report.comparison[0]
    assert tuning.gain == published
    assert f"({text})</span><br>Mean TPOT(ms)" in markdown.split("## Optimization Objective")[0]
    assert comparison["Change"].iloc[0] == text
    assert payload["comparison"][0]["gain"] == payload["published"] == published.to_json()
    assert payload["recommendation_verdict"]["published"] == published.to_json()
    assert payload["recommendation_verdict"]["published"] == published.to_json()
    per_accelerator = next(
        line for line in markdown.splitlines() if line.startswith("Per accelerator (Chat)")
    )
    assert per_accelerator.endswith(f"({text}).")
    sentence = f"Gain over the baseline: {published.sentence(decimals)}."
    assert sentence in markdown and any(caption.startswith(sentence) for caption in captions)

    # the cost row follows from that gain: the same accelerators and price, so 1 ÷ (1 + gain) − 1, its
    # interval from the gain's; each side priced at its mean throughput, the comparison's Total TPS
    cost = report.costs[0]
    assert cost.baseline.total_tps == pytest.approx(tuning.baseline.total_tps)
    assert cost.optimized.total_tps == pytest.approx(tuning.optimized.total_tps)
    assert cost.optimized.cost_per_mtok == pytest.approx(2.5 / (tuning.optimized.total_tps * 3600) * 1e6)
    change = cost.change
    assert change.change == pytest.approx(1 / (1 + published.change) - 1)
    assert (change.low, change.high) == pytest.approx(
        (
            1 / (1 + published.change + published.half_width) - 1,
            1 / (1 + published.change - published.half_width) - 1,
        )
    )
    cost_text = cost_change_text(cost, decimals)
    assert f"({cost_text})" in markdown
    assert comparison["Change"].iloc[len(report.comparison)] == cost_text
    assert payload["costs"][0]["change"] == pytest.approx(change.change)
