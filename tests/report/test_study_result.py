"""One study result, four renderings: a noisy search study, driven through the coordinator against a
real database, is built into its result once; its markdown report, ``study show --json``, the CSV and
the study page are each checked against that result, and every figure the report publishes is
recomputed from the CSV alone.

The search (budget 4 launches) confirms its finalists on launches of their own, which takes it past its
budget; its trials' launches drop their validation profile, so the winner gets a launch of the
validation profile alone before the study is done. Every launch is counted, and the count equals the
stage's stored runs."""

from __future__ import annotations

import csv
import io
import json
import random
import re
from collections import defaultdict
from statistics import fmean
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.cli import main
from perflab.report.export import report_json, results_csv
from perflab.report.from_study import study_report
from perflab.report.markdown import render_markdown
from perflab.study.coordinator import advance
from perflab.study.finalists import MAX_FINALISTS
from perflab.study.measure import study_runs
from perflab.study.progress import STAGE_STATE
from perflab.study.study_plan import STUDY_RECORD
from tests.study.by_hand import drive, start
from tests.ui.conftest import app_env, hosts_file, open_page, preformatted  # noqa: F401  (fixtures reused)

SPEC = """
name: noisy search
model: Qwen/Qwen3-8B
hosts: [gpu-a]
gpus: 2
baseline: {engine: vllm, tp: 2, max_num_seqs: 32}
tuning_profile: {name: tune, title: Tune, dataset: random, input_len: 128, output_len: 64, num_prompts: 50,
  max_concurrency: 4}
validation_profiles:
  - {name: short, title: Short Prompt, dataset: random, input_len: 64, output_len: 4, num_prompts: 8}
stages:
  - name: Batching
    search:
      knobs: {max_num_seqs: [64, 128, 256]}
      parallelism: [{tp: 1}, {tp: 2}]
      budget: {launches: 4}
      screening: 0.5
      startup_trials: 2
      seed: 1
      max_measurements: 3
"""
NOISE_CV = 0.03
SEARCH_STAGE = "Batching"


def _throughput(config: dict[str, Any], run_id: int, profile: str) -> float:
    """A landscape (wider batches and TP2 pay) with seeded 3 % noise per run and profile."""
    true = 1000.0 + 150.0 * config["tp"] + 2.0 * (config.get("max_num_seqs") or 32)
    noise = random.Random(f"{run_id}:{profile}").gauss(0.0, NOISE_CV)
    return true * (1.0 + noise)


def _run(engine: Engine, study_id: int, run_id: int) -> None:
    """Move a queued run as the runner does, a result per profile, the coordinator advancing between;
    a search trial's launch drops its validation profile once measured (as a launch that cannot win
    would)."""
    start(engine, run_id)
    position = 0
    while True:
        with new_session(engine) as session:
            run = crud.require_run(session, run_id=run_id)
            if position >= len(run.profiles):
                crud.set_run_status(session, run_id=run_id, status="done")
                return
            profile = run.profiles[position]
            value = _throughput(run.config, run_id, profile["name"])
            result = {"completed": 20, "failed": 0, "total_token_throughput": value, "mean_tpot_ms": 30.0}
            crud.add_profile_result(
                session, run_id=run_id, profile=profile, result=result, text_block=None, bench_mode="on-host"
            )
            if profile["name"] == "tune" and run.profiles[0]["name"] == "tune-screening":
                crud.update_run(session, run_id=run_id, profiles=run.profiles[: position + 1])
        position += 1
        advance(engine, study_id)


def _csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text, newline="")))


def _means_from_csv(rows: list[dict[str, str]], profile: str) -> dict[str, float]:
    """Each configuration's mean of ``profile`` as the study computes it: each launch the mean of its
    complete runs, the configuration the mean of its launches."""
    launches: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row["profile"] == profile:
            launches[row["fingerprint"]][row["run_id"]].append(float(row["total_token_throughput"]))
    return {
        fingerprint: fmean(fmean(values) for values in runs.values())
        for fingerprint, runs in launches.items()
    }


@pytest.fixture
def noisy_search(db_engine: Engine) -> int:
    study = drive(db_engine, SPEC, lambda study_id, run_id: _run(db_engine, study_id, run_id))
    assert study.status == "done", study.state
    return study.id


def test_one_result_four_renderings_and_every_figure_from_the_csv(  # type: ignore[no-untyped-def]
    db_engine: Engine,
    database_url: str,
    noisy_search: int,
    open_page,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    study_id = noisy_search
    with new_session(db_engine) as session:
        report = study_report(session, study_id=study_id)  # built once
        runs = study_runs(session, study_id=study_id)
    (search,) = report.searches
    markdown = render_markdown(report)
    rows = _csv_rows(results_csv(report))

    # the JSON of `study show --json` is the result's
    assert main(["study", "--url", database_url, "show", str(study_id), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown == json.loads(json.dumps(report_json(report), default=str))

    # the CSV holds every stored result of every run, and only those
    with new_session(db_engine) as session:
        stored = sum(len(crud.list_profile_results(session, run_id=run.id)) for run in runs)
    assert len(rows) == stored == len(report.records)
    assert {int(row["run_id"]) for row in rows} == {run.id for run in runs}

    # launches: counted from the stage's stored runs, past the budget and saying why
    trial_fingerprints = {row["fingerprint"] for row in rows if row["stage"] == SEARCH_STAGE}
    stage_runs = [run for run in runs if run.config_fingerprint in trial_fingerprints]
    kinds = {row["run_id"]: row["launch_kind"] for row in rows if row["fingerprint"] in trial_fingerprints}
    # the study's confirmation block launches the pick again once the stages are decided: launches of
    # the study's, not of the search's budget
    with new_session(db_engine) as session:
        state = crud.get_study(session, study_id=study_id).state
    block = state[STAGE_STATE][STUDY_RECORD].get("confirmation") or {"order": []}
    confirming = [fingerprint for fingerprint in block["order"] if fingerprint in trial_fingerprints]
    assert list(kinds.values()).count("confirmation") == len(confirming)
    count = search.launches
    assert count.total == len(stage_runs) - len(confirming) == len(kinds) - len(confirming)
    assert (count.proposals, count.remeasurements, count.validation) == (
        list(kinds.values()).count("first"),
        list(kinds.values()).count("again"),
        list(kinds.values()).count("validation"),
    )
    # the pick's validation profiles ride on its confirmation launch (once more after the stages)
    assert count.proposals == 4 and count.remeasurements > 0 and count.validation == 0
    assert search.over_budget.startswith(
        f"{count.total} launches against a budget of 4, {count.total - 4} past it"
    )
    assert f"- Past the budget: {search.over_budget}" in markdown
    assert shown["searches"][0]["launches"]["total"] == count.total

    # every candidate's mean, and every trial's mean and screening value, from the CSV
    tune = _means_from_csv(rows, "tune")
    screening = _means_from_csv(rows, "tune-screening")
    candidates = [candidate for stage in report.stages for candidate in stage.candidates]
    for candidate in candidates:
        if candidate.value is not None:
            assert candidate.value == pytest.approx(tune[candidate.fingerprint])
    for trial, candidate in zip(search.trials, report.stages[0].candidates, strict=True):
        if trial.mean is not None:
            assert trial.mean == pytest.approx(tune[candidate.fingerprint])
            assert len(trial.samples) == len(
                {
                    row["run_id"]
                    for row in rows
                    if row["fingerprint"] == candidate.fingerprint and row["profile"] == "tune"
                }
            )
            assert f"| {trial.mean:.2f} | {len(trial.samples)} |" in markdown
        if trial.screening is not None:
            assert trial.screening == pytest.approx(screening[candidate.fingerprint])
            assert f"| {trial.screening:.2f} |" in markdown
    # each trial has one state, the same in the stage's table and the search's
    for trial, candidate in zip(search.trials, report.stages[0].candidates, strict=True):
        assert trial.state == candidate.state
    # each note carries only its own verdict: no two trials share an interval
    intervals = [candidate.note for candidate in candidates if candidate.note and " ± " in candidate.note]
    assert len(intervals) <= MAX_FINALISTS  # the finalists', each its own decision against the baseline
    verdicts = [found for note in intervals for found in re.findall(r"[-+][\d.]+ % ± [\d.,]+ %[^;)]*", note)]
    assert len(verdicts) == len(set(verdicts))

    # the comparison table: the baseline's and the winner's means, tuning and validation alike
    baseline_fp = next(row["fingerprint"] for row in rows if row["stage"] == "Baseline")
    winner = next(candidate for candidate in report.stages[0].candidates if candidate.state == "winner")
    validation = _means_from_csv(rows, "short")
    (tuning_row, short_row) = report.comparison
    assert tuning_row.baseline.total_tps == pytest.approx(tune[baseline_fp])
    assert tuning_row.optimized.total_tps == pytest.approx(tune[winner.fingerprint])
    assert short_row.baseline.total_tps == pytest.approx(validation[baseline_fp])
    assert short_row.optimized.total_tps == pytest.approx(validation[winner.fingerprint])
    for figures in (tuning_row.baseline, tuning_row.optimized, short_row.baseline, short_row.optimized):
        assert f"Total TPS: {figures.total_tps:.2f}" in markdown
    assert f"({tuning_row.optimized.sample_text})" in markdown
    # winner and baseline ran their validation profile before the study was done
    assert [block.case for block in report.baseline_validation.blocks] == ["Short Prompt"]
    assert [block.case for block in report.optimized_validation.blocks] == ["Short Prompt"]
    # the winner's validation rode on its confirmation launch: no launch of the validation profile alone
    assert not [launch for launch in report.launches if launch.kind == "validation"]
    assert [row for row in rows if row["fingerprint"] == winner.fingerprint and row["profile"] == "short"]
    # the caveats are a search's
    assert "each stage starts from the best configuration so far" not in markdown
    assert "The search of stage 1 measured" in markdown

    # the study page draws the same figures
    app = open_page(database_url, "pages/study.py", {"study": str(study_id)})
    assert not app.exception
    frames = {tuple(frame.value.columns): frame.value for frame in app.dataframe}
    comparison = next(frame for columns, frame in frames.items() if columns[0] == "Case")
    assert comparison["Baseline"].iloc[0].startswith(f"Total TPS {tuning_row.baseline.tps_text}")
    assert comparison["Optimized"].iloc[1].startswith(f"Total TPS {short_row.optimized.tps_text}")
    trials = next(frame for columns, frame in frames.items() if columns[0] == "Trial")
    assert list(trials["State"]) == [trial.state for trial in search.trials]
    assert [texts for texts in app.caption if "past it" in str(texts.value)]
    assert report.recommended_command in preformatted(app)


def test_the_final_pick_launches_its_rounds_beside_the_baseline_in_mirrored_order(
    db_engine: Engine, noisy_search: int
) -> None:
    with new_session(db_engine) as session:
        study = crud.get_study(session, study_id=noisy_search)
        runs = study_runs(session, study_id=noisy_search)
    baseline = runs[0].config_fingerprint
    # the final pick's launches: after the search's proposals (screened first), before the study's
    # confirmation block and any launch of the validation profiles alone
    last_proposal = max(i for i, run in enumerate(runs) if run.profiles[0]["name"] == "tune-screening")
    block = len(study.state[STAGE_STATE][STUDY_RECORD]["confirmation"]["order"])
    tuning = [
        run.config_fingerprint for run in runs[last_proposal + 1 :] if run.profiles[0]["name"] == "tune"
    ]
    pick = tuning[: len(tuning) - block]
    assert pick and pick[0] == baseline, pick
    # rounds: the baseline first in odd rounds (B F1 F2 F3), last in even ones (F3 F2 F1 B)
    rounds: list[list[str]] = []
    rest = list(pick)
    while rest:
        odd = len(rounds) % 2 == 0
        if odd:  # up to the next baseline, or a finalist launched twice (the mirrored round begins)
            assert rest[0] == baseline, pick
            end = next(
                (i for i, found in enumerate(rest[1:], 1) if found == baseline or found in rest[1:i]),
                len(rest),
            )
        else:
            end = rest.index(baseline) + 1
        rounds.append(rest[:end])
        rest = rest[end:]
    first = rounds[0][1:]
    assert len(first) == len(set(first)) >= 1 and baseline not in first
    for number, launches in enumerate(rounds, 1):
        finalists = [found for found in launches if found != baseline]
        assert launches.count(baseline) == 1, rounds
        ranked = sorted(finalists, key=first.index)
        assert finalists == (ranked if number % 2 == 1 else ranked[::-1]), rounds
