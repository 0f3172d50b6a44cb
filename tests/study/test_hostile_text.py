"""Text a user wrote reaches the study page and report.md inert: a profile title, a stage and candidate
label and a hosts.yaml price label carrying a live link, an image fetch, HTML and a line break that
would start a heading are shown as text, wherever they are rendered (the page draws no user text as
HTML; markdown escapes it), and the currency's line break starts nothing either."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db.session import new_session
from perflab.cost.energy import NotMeasured
from perflab.cost.figures import CostFigures
from perflab.cost.prices import Price
from perflab.inventory import HostConfig, SimulateSpec
from perflab.report.costs import cost_side
from perflab.report.from_study import study_report
from perflab.report.markdown import render_markdown
from perflab.report.model import CostRow, Report
from perflab.study.coordinator import advance, create_study
from perflab.study.measure import study_runs
from perflab.study.spec import parse_spec
from tests.fixtures.runs import inventory_of, write_hosts_file
from tests.study.by_hand import measure_once
from tests.ui.conftest import app_env, hosts_file, run_app, texts  # noqa: F401  (fixtures reused)

LINK = "<a href='https://evil.example/login'>Log in</a>"
IMAGE = "![x](https://evil.example/pixel.png)"
HEADING = "# Injected"
TITLE = f"Chat {LINK} {IMAGE}\n{HEADING}"
LABEL = f"[Pay here](https://evil.example/pay)\n{HEADING}"
SPEC = f"""
name: hostile
model: Qwen/Qwen3-8B
hosts: [gpu-a]
baseline: {{engine: vllm}}
gpus: 1
tuning_profile:
  {{name: tune, title: {json.dumps(TITLE)}, dataset: random, input_len: 64, output_len: 8, num_prompts: 8}}
stages:
  - name: {json.dumps("Stage " + IMAGE)}
    candidates: [{{label: {json.dumps(LABEL)}, set: {{max_num_seqs: 4}}}}]
"""


HOST = HostConfig(
    name="gpu-a",
    transport="local",
    workdir="/tmp/gpu-a",
    simulate=SimulateSpec(accelerator="H100", count=8),
    price_per_accelerator_hour=2.0,
    price_label=f"{LINK}\n# H",
)


def outside_code(markdown: str) -> list[str]:
    """The lines of ``markdown`` outside fenced code blocks (code shows its text as it is)."""
    lines, fenced = [], False
    for line in markdown.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def assert_inert(lines: list[str]) -> None:
    text = "\n".join(lines)
    assert "<a href" not in text and "<img" not in text
    assert "](https://evil" not in text
    assert not any(line.strip() == HEADING for line in lines)


def test_report_markdown_escapes_cost_rows_with_hostile_labels_and_currencies() -> None:
    price = Price(2.0, "GBP\n## Injected", "host gpu-a", f"{LINK}\n{HEADING}")
    figures = CostFigures(
        price, 1, 0.5, 0.25, NotMeasured(f"window too short {IMAGE}\n{HEADING}"), total_tps=8000.0
    )
    row = CostRow(TITLE, cost_side([[figures]]), cost_side([[figures]]))
    report = Report("t", "m", "Total TPS", "tok/s", None, (), (), (), costs=(row,))
    lines = outside_code(render_markdown(report))
    assert_inert(lines)
    assert not any(line.startswith("## Injected") for line in lines)
    (cost_line,) = [line for line in lines if " cost |" in line]
    assert "&lt;a href=" in cost_line and "GBP ## Injected" in cost_line


def _drive(engine: Engine) -> int:
    study_id = create_study(engine, parse_spec(SPEC), inventory=inventory_of(HOST)).id
    for _ in range(6):
        advance(engine, study_id)
        with new_session(engine) as session:
            queued = [run for run in study_runs(session, study_id=study_id) if run.status == "queued"]
        for run in queued:
            value = 1000.0 if run.config.get("max_num_seqs") is None else 1200.0
            result = {"completed": 8, "failed": 0, "total_token_throughput": value, "mean_tpot_ms": 20.0}
            measure_once(engine, run.id, result)
    return study_id


def test_the_study_page_and_report_show_hostile_text_as_text(  # type: ignore[no-untyped-def]
    db_engine: Engine,
    database_url: str,
    app_env,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hosts = write_hosts_file(tmp_path / "hosts.yaml", [HOST])
    monkeypatch.setenv("PERFLAB_HOSTS", str(hosts))
    study_id = _drive(db_engine)
    with new_session(db_engine) as session:
        report = study_report(session, study_id=study_id)
    assert report.costs and report.costs[0].baseline.price.label == HOST.price_label
    assert_inert(outside_code(render_markdown(report)))

    app_env(database_url, hosts)
    app = run_app("pages/study.py", {"study": str(study_id)})
    assert not app.exception
    shown = [
        *texts(app.markdown),
        *texts(app.caption),
        *texts(app.header),
        *texts(app.subheader),
        *texts(app.title),
        *texts(app.main.warning),
        *texts(app.main.error),
    ]
    assert_inert(shown)
    assert any("&lt;a href=" in text for text in shown)
    # the cost row with the price label is a plain table cell
    comparison = next(frame.value for frame in app.dataframe if "Case" in frame.value.columns)
    assert any(LINK in str(cell) for cell in comparison["Baseline"])
