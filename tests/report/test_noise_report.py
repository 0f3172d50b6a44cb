"""The report of a study that measures its noise, end to end on a simulated host with seeded noise: the
comparison table shows the mean the decisions used (over every repetition and launch) and says so, the
validation profiles run on a configuration's first launch only and still fill "Other Benchmark Cases".
The validation profile has a seed of its own: with the tuning profile's (none, the bench's 0) its first
prompt would open with the tuning's, found cached, and the result would be flagged as riding that
cache (perflab.runner.evidence)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from statistics import fmean

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.report import render_markdown
from perflab.report.from_study import study_report
from perflab.report.markdown import summary_table
from perflab.report.model import Figures, Report, SummaryRow
from perflab.report.published import measured_gain
from perflab.study.progress import load_progress
from perflab.study.verdict import judge
from tests.fixtures.runs import SimHostFactory
from tests.fixtures.study_data import run_noisy_study

SPEC = """
name: noisy report
model: Qwen/Qwen3-8B
hosts: [{host}]
baseline: {{engine: vllm}}
gpus: 1
repeats: 2
relaunches: 2
max_launches: 2
tuning_profile: {{name: tune, title: Chat, dataset: random, input_len: 128, output_len: 64, num_prompts: 50,
  max_concurrency: 4}}
validation_profiles:
  - {{name: short_check, title: Short Prompt, dataset: random, input_len: 64, output_len: 64, num_prompts: 50,
    max_concurrency: 4, seed: 7}}
stages:
  - name: Batching
    candidates: [{{max_num_seqs: 4}}]
"""


@pytest.mark.parametrize(
    ("runs", "text"),
    [
        ((), None),
        ((1,), None),
        ((2,), "mean of 2 runs"),
        ((1, 1), "mean of 2 runs on 2 launches"),
        ((2, 2, 2), "mean of 6 runs on 3 launches"),
        ((2, 1), "mean of 3 runs on 2 launches (2+1)"),
    ],
)
def test_figures_say_what_they_are_the_mean_of(runs: tuple[int, ...], text: str | None) -> None:
    assert Figures(100.0, runs=runs).sample_text == text


def test_the_report_shows_the_decisions_mean_and_the_first_launchs_validation(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path
) -> None:
    final = run_noisy_study(
        runs_db, sim_host, tmp_path, SPEC, {"run_cv_pct": 3, "launch_cv_pct": 3, "seed": 11}
    )

    with new_session(runs_db) as session:
        progress = load_progress(session, study_id=final.id)
        report = study_report(session, study_id=final.id)
        validation_rows = {
            row.label: row.run_id
            for row in crud.list_candidates(session, study_id=final.id)
            if row.role == "validation"
        }
        runs = {
            run.id: [
                (result.profile_name, result.result)
                for result in crud.list_profile_results(session, run_id=run.id)
            ]
            for run in progress.runs
        }
    plan = progress.plan
    sides = {"baseline": plan.baseline, "optimized": plan.best}
    chat, short = report.comparison
    for side, candidate in sides.items():
        everything = [run for run in progress.runs if run.config_fingerprint == candidate.fingerprint]
        validated = validation_rows[side.capitalize()]
        # the validation profile ran once: on the baseline's first launch, on the winner's first or (when
        # a close call dropped it there) on a launch of the validation profiles alone
        assert sum(1 for run in everything if "short_check" in [name for name, _ in runs[run.id]]) == 1
        assert "short_check" in [name for name, _ in runs[validated]]
        launches = [run for run in everything if runs[run.id][0][0] == "tune"]
        assert len(launches) >= 2
        # each launch the mean of its repetitions, the configuration the mean of its launches
        expected = fmean(
            fmean(found["total_token_throughput"] for _, found in runs[run.id][:2]) for run in launches
        )
        figures = getattr(chat, side)
        assert figures.total_tps == pytest.approx(expected)
        assert figures.total_tps == pytest.approx(candidate.value)  # what the decision used
        assert figures.total_tps != pytest.approx(runs[launches[-1].id][0][1]["total_token_throughput"])
        assert figures.sample_text == f"mean of {2 * len(launches)} runs on {len(launches)} launches"
        # the validation side comes from the launch that ran it
        validation = getattr(short, side)
        (checked,) = [found for name, found in runs[validated] if name == "short_check"]
        assert validation.total_tps == pytest.approx(checked["total_token_throughput"])
        assert validation.sample_text is None
        section = getattr(report, f"{side}_validation")
        assert [block.case for block in section.blocks] == ["Short Prompt"]

    text = render_markdown(report)
    assert f"(mean of {2 * len(launches)} runs on {len(launches)} launches)" in text
    # each block says it is one run, and which mean the decision used
    baseline_launches = len(
        [run for run in progress.runs if run.config_fingerprint == plan.baseline.fingerprint]
    )
    assert (
        f"Judged on the mean of {2 * baseline_launches} runs on {baseline_launches} launches: "
        f"Total TPS {chat.baseline.tps_text}. "
        "Below: the latest launch's first run."
    ) in text
    # the conclusion gives the spread measured and every call no verdict could separate
    assert progress.spread is not None and report.spread.baseline == progress.spread
    assert f"Measured spread of the baseline: {progress.spread.text()}." in text
    undecided = [c for stage in plan.stages for c in stage.candidates if c.decision == "within_noise"]
    conclusion = text.split("## Optimization Objective")[0]
    assert ("Within noise, neither kept nor beaten" in conclusion) == bool(undecided)
    for candidate in undecided:
        assert candidate.verdict is not None
        assert f"{candidate.label} ({candidate.verdict.text()})" in conclusion
    # every configuration was measured, its energy too (the simulated engines' own count)
    assert [line for line in text.splitlines() if "not measured" in line] == []


def test_a_loss_reads_the_same_in_the_summary_and_in_the_verdict_beside_it() -> None:
    """94.3 against 100 is −5.7 % against the baseline and −5.7 % in the verdict beside it: one definition
    of a change, new ÷ old − 1, which the summary states wherever a verdict stands in it."""
    verdict = judge(
        [94.3, 94.3], [100.0, 100.0], higher_is_better=True, min_gain_pct=1.0, cv_pct=20.0, df=8.0
    )
    note = f"{verdict.text()}, neither kept nor beaten"
    row = SummaryRow("Batching", None, measured_gain(94.3, 100.0), note)
    report = Report("t", "m", "Total TPS", "tok/s", None, (), (), (row,))

    table = summary_table(report)

    assert table[2] == f"| Batching | - | -5.7% | {note} |" and verdict.text().startswith("-5.7 % ± ")
    assert table[-1].startswith("Every percentage is new ÷ old − 1 (0.943× is −5.7%).")
    plain = replace(report, summary=(replace(row, note="lower than previous"),))
    assert "new ÷ old" not in "\n".join(summary_table(plain))
