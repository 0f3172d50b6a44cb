"""A study whose search weighs prefill/decode splits against aggregated layouts explains its choice: on a
swept tuning profile under mean TPOT and TTFT limits, driven through the coordinator against a real
database, its result names the layout chosen, the trade of the best split against the best aggregated
layout (at each one's objective point) and the verdict between them, or why one side met no SLO, with
its figures; the markdown report, ``study show --json``'s data and the CSV carry the same choice. The
baseline's three launches (``relaunches: 3``) give the study's verdicts a spread of two degrees of
freedom; with one, no gain a single launch shows is kept."""

from __future__ import annotations

import csv
import io
import random
import re
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.report.export import report_json, results_csv
from perflab.report.from_study import study_report
from perflab.report.markdown import render_markdown
from perflab.study.coordinator import advance
from tests.study.by_hand import drive, start

SPLIT_31 = "{prefill: {workers: 3, tp: 2}, decode: {workers: 1, tp: 2}, transfer_backend: mooncake}"
SPLIT_11 = "{prefill: {workers: 1, tp: 4}, decode: {workers: 1, tp: 4}, transfer_backend: mooncake}"
SPEC = """
name: layouts
model: Qwen/Qwen3-32B
hosts: [gpu-a]
gpus: 8
baseline: {{engine: sglang, tp: 8}}
objective: output_throughput
relaunches: 3
slos: {{mean_tpot_ms: {tpot}, mean_ttft_ms: 2000}}
tuning_profile: {{name: tune, title: Long prompts, dataset: random, input_len: 4000, output_len: 500,
  num_prompts: 100, sweep: {{kind: request_rate, values: [2, 6]}}}}
stages:
  - name: Serving layout
    search:
      parallelism: [{{tp: 4}}, {{tp: 8}}, {{disaggregation: {split_31}}}, {{disaggregation: {split_11}}}]
      budget: {{launches: 4}}
      screening: 1.0
      startup_trials: 4
      seed: 1
      noise_cv_pct: 1
"""
# per layout, per request rate: (mean TPOT ms, mean TTFT ms, output tokens/s of the node)
LANDSCAPE = {
    "TP8": {2.0: (9.0, 100.0, 1000.0), 6.0: (13.0, 150.0, 2900.0)},
    "TP4": {2.0: (10.0, 150.0, 1000.0), 6.0: (12.5, 200.0, 3300.0)},
    "3P1D": {2.0: (7.0, 200.0, 1000.0), 6.0: (8.0, 260.0, 2950.0)},
    "1P1D": {2.0: (6.0, 180.0, 990.0), 6.0: (7.0, 3000.0, 2800.0)},
}
NOISE_CV = 0.01


def _layout(config: dict[str, Any]) -> str:
    split = config.get("disaggregation")
    if split:
        return f"{split['prefill']['workers']}P{split['decode']['workers']}D"
    return f"TP{config['tp']}"


def _run(engine: Engine, study_id: int, run_id: int) -> None:
    """A queued run measured as the runner stores a sweep: one result per request rate of each profile,
    its throughput with seeded 1 % noise per run."""
    start(engine, run_id)
    noise = random.Random(run_id).gauss(0.0, NOISE_CV)
    with new_session(engine) as session:
        run = crud.require_run(session, run_id=run_id)
        landscape = LANDSCAPE[_layout(run.config)]
        for profile in run.profiles:
            sweep = profile.get("sweep") or {}
            values = sweep.get("values") or [2.0]
            for index, rate in enumerate(values):
                tpot, ttft, output = landscape[float(rate)]
                result = {
                    "completed": 100,
                    "failed": 0,
                    "duration": 60.0,
                    "mean_tpot_ms": tpot,
                    "mean_ttft_ms": ttft,
                    "output_throughput": output * (1.0 + noise),
                    "total_token_throughput": output * 9.0 * (1.0 + noise),
                }
                point = (
                    {"kind": sweep["kind"], "value": rate, "index": index, "points": len(values)}
                    if sweep
                    else None
                )
                crud.add_profile_result(
                    session,
                    run_id=run_id,
                    profile=profile,
                    result=result,
                    text_block=None,
                    bench_mode="on-host",
                    sweep_point=point,
                )
        crud.set_run_status(session, run_id=run_id, status="done")
    advance(engine, study_id)


def _study(engine: Engine, tpot: float):  # type: ignore[no-untyped-def]
    spec = SPEC.format(tpot=tpot, split_31=SPLIT_31, split_11=SPLIT_11)
    study = drive(engine, spec, lambda study_id, run_id: _run(engine, study_id, run_id))
    assert study.status == "done", study.state
    with new_session(engine) as session:
        return study_report(session, study_id=study.id)


@pytest.mark.timeout(300)
def test_under_a_tight_tpot_the_report_names_the_split_it_chose_and_its_verdict(runs_db: Engine) -> None:
    report = _study(runs_db, 12)
    (choice,) = report.layouts
    assert choice.chosen == "disaggregated 3P1D (P TP2, D TP2)" and choice.chose_split
    assert report.best is not None and "3P1D" in report.best
    split, aggregated = choice.split, choice.aggregated
    assert split is not None and aggregated is not None
    # each side at its objective point: the split meets both limits at 6 req/s, every aggregated layout
    # only at 2 req/s (its TPOT breaks 12 ms at 6), the 1P1D split only at 2 req/s (its TTFT breaks 2 s)
    assert split.figures is not None and (split.figures.tpot_ms, split.figures.ttft_ms) == (8.0, 260.0)
    assert split.figures.tokens_per_s_per_gpu == pytest.approx(2950.0 / 8, rel=0.04)
    assert aggregated.layout in ("aggregated TP8", "aggregated TP4 ×2") and aggregated.figures is not None
    assert aggregated.figures.tokens_per_s_per_gpu == pytest.approx(1000.0 / 8, rel=0.04)
    assert choice.verdict is not None and choice.verdict.outcome == "better"
    assert choice.trade is not None and choice.trade.startswith(
        f"disaggregated 3P1D (P TP2, D TP2) against {aggregated.layout}: TPOT "
    )
    assert re.search(r"\(disaggregated 3P1D \(P TP2, D TP2\) by [23]\.\d\d×\)$", choice.trade)
    text = choice.text()
    assert text.startswith("Serving layout: chose disaggregated 3P1D (P TP2, D TP2). Disaggregated 3P1D")
    assert f"Verdict on the split against the aggregated layout: {choice.verdict.text()} (better)." in text

    # the same choice in every rendering
    assert text in render_markdown(report).replace("\\", "")
    data = report_json(report)
    assert data["layouts"] == [choice.to_dict()]
    assert data["layouts"][0]["best_split"]["mean_tpot_ms"] == 8.0
    rows = list(csv.DictReader(io.StringIO(results_csv(report), newline="")))
    chosen_rows = [row for row in rows if row["layout"] == "disaggregated 3P1D (P TP2, D TP2)"]
    assert chosen_rows and all(row["layout_choice"] == text for row in chosen_rows)
    other = [row for row in rows if row["layout"] == "disaggregated 1P1D (P TP4, D TP4)"]
    assert other and all(row["layout_choice"] == "" for row in other)


@pytest.mark.timeout(300)
def test_under_a_loose_tpot_the_aggregated_layout_wins_and_the_report_says_by_how_much(
    runs_db: Engine,
) -> None:
    report = _study(runs_db, 30)
    (choice,) = report.layouts
    # TP4 ×2 is the faster aggregated layout; whether its gain over the baseline is kept is the verdict's
    assert choice.chosen in ("aggregated TP4 ×2", "aggregated TP8") and not choice.chose_split
    assert choice.aggregated is not None and choice.aggregated.layout == "aggregated TP4 ×2"
    assert choice.split is not None and choice.split.layout == "disaggregated 3P1D (P TP2, D TP2)"
    assert choice.verdict is not None and choice.verdict.outcome != "better"
    assert choice.trade is not None and "(aggregated TP4 ×2 by 1.1" in choice.trade


@pytest.mark.timeout(300)
def test_a_side_that_meets_no_slo_is_said_with_its_figures(runs_db: Engine) -> None:
    report = _study(runs_db, 6.5)
    (choice,) = report.layouts
    # only the 1P1D split meets 6.5 ms, at 2 req/s; no aggregated layout does at any load
    assert choice.chosen == "disaggregated 1P1D (P TP4, D TP4)"
    assert choice.verdict is None and choice.trade is None
    (why,) = choice.why_not
    assert why == (
        "No aggregated layout met the SLOs; the best, aggregated TP4 ×2: no load meets the SLOs "
        "(mean_tpot_ms ≤ 6.5, mean_ttft_ms ≤ 2000); its figures: TPOT 10.0 ms, TTFT 150 ms, "
        f"{choice.aggregated.figures.tokens_per_s_per_gpu:.0f} tokens/s/GPU."
    )
    assert choice.aggregated.figures.tokens_per_s_per_gpu == pytest.approx(1000.0 / 8, rel=0.04)
