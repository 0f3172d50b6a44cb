"""A study whose objective is cost per 1M tokens, on the simulator: it keeps the cheapest configuration
that meets its SLOs, priced at each curve's SLO limit, and its report carries cost rows (markdown, CSV,
JSON). Every result carries its energy from the simulated engine's own count over its simulated time,
however short its wall-clock window (the runner's power samples, taken by the wall clock, cover few of
the sweep's points at this time scale)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db.session import new_session
from perflab.cost.energy import SIMULATED_COUNTER
from perflab.inventory import HOSTS_FILE_ENV
from perflab.report.export import results_csv, results_json
from perflab.report.from_study import study_report
from perflab.report.markdown import render_markdown
from perflab.study.progress import load_progress
from tests.fixtures.runs import SimHostFactory, write_hosts_file
from tests.fixtures.study_data import run_study
from tests.study.test_load_curve_study import SPEC as LOAD_CURVE_SPEC
from tests.study.test_load_curve_study import TIME_SCALE, slos_shown, slos_yaml

PRICE = 2.5
SPEC = LOAD_CURVE_SPEC.replace("name: load within SLO", "name: cheapest within SLO").replace(
    "objective: max_load_within_slo", "objective: cost_per_mtok"
)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_cost_study_recommends_the_cheapest_configuration_within_its_slos(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = sim_host(
        "cost-sim",
        kind="local",
        count=1,
        time_scale=TIME_SCALE,
        price_per_accelerator_hour=PRICE,
        price_label="example price",
    )
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [host])
    monkeypatch.setenv(HOSTS_FILE_ENV, str(hosts_file))
    study = run_study(runs_db, SPEC.format(host=host.name, slos=slos_yaml(TIME_SCALE)), hosts_file)

    assert study.status == "done", study.state
    with new_session(runs_db) as session:
        progress = load_progress(session, study_id=study.id)
        report = study_report(session, study_id=study.id)
    plan = progress.plan
    expected = {}
    for candidate in (plan.baseline, plan.stages[0].candidates[0]):
        outcome = progress.outcome(candidate)
        limit = outcome.score.curve.slo_limit
        at_limit = next(r for r in outcome.results if r.sweep_point["value"] == limit.load)
        # one accelerator at 2.5 per hour over the tokens of an hour at the SLO limit's throughput
        expected[candidate.label] = PRICE / (at_limit.total_token_throughput * 3600) * 1e6
        assert outcome.score.value == pytest.approx(expected[candidate.label])  # its latest launch
        # the configuration's value: the mean of its launches' values, the latest one of them
        values = candidate.measurement.values
        assert expected[candidate.label] == pytest.approx(values[-1])
        assert candidate.value == pytest.approx(sum(values) / len(values))
        # the runner placed each result's benchmark window on the samples' clock, as long as it ran by the
        # wall clock; the simulated engine, paced by the wall clock, never ran ahead of it
        for result in outcome.results:
            start, end = result.result["sample_window_s"]
            sent, received = result.result["bench_clock_window_s"]
            assert 0 <= start < end and end - start == pytest.approx(received - sent, abs=0.002)
            assert result.result["timing_source"] == "simulated" and end - start >= result.duration - 0.002
    assert plan.stages[0].winner is not None, plan.stages[0].candidates[0].note
    assert plan.stages[0].winner.label == "max_num_seqs=16"
    assert plan.best.value < plan.baseline.value
    assert "--max-num-seqs 16" in report.recommended_command

    [row] = report.costs
    assert row.at == slos_shown(TIME_SCALE)
    # the cost change is the published gain of the decision on cost (how much cheaper), negated
    assert report.published is not None and report.published.decided
    assert row.change.change == pytest.approx(-report.published.change)
    # each side is priced at its throughput at the SLO limit, the mean over its launches (each launch's
    # value is the cost at its own throughput there), not at the mean of the launches' costs
    for side, candidate in ((row.baseline, plan.baseline), (row.optimized, plan.best)):
        throughputs = [PRICE / (value * 3600) * 1e6 for value in candidate.measurement.values]
        mean_throughput = sum(throughputs) / len(throughputs)
        assert side.total_tps == pytest.approx(mean_throughput)
        assert side.cost_per_mtok == pytest.approx(PRICE / (mean_throughput * 3600) * 1e6)
    markdown = render_markdown(report)
    assert "Minimize Cost per 1M tokens." in markdown
    lines = markdown.splitlines()
    cost_line = next(line for line in lines if line.startswith("| **Concurrency sweep** cost"))
    assert f"{row.change.change * 100:+.1f}% $ per 1M tokens" in cost_line and "lightgreen" in cost_line
    assert "(example price) per 1M tokens" in cost_line
    assert " output tokens per joule" in cost_line and "energy not measured" not in markdown
    assert "| Optimization Option | Cost Change |" in markdown

    records = list(csv.DictReader(io.StringIO(results_csv(report))))
    assert {record["currency"] for record in records} == {"USD"}
    # every result's energy is the simulated engine's own count (the simulator's power model on its clock)
    assert {record["energy_method"] for record in records} == {SIMULATED_COUNTER}
    assert all(float(record["output_tokens_per_joule"]) > 0 for record in records)
    payload = json.loads(results_json(report))
    assert payload["costs"][0]["optimized_cost_per_mtok"] == pytest.approx(row.optimized.cost_per_mtok)
