"""The pages at 1024 × 768 in Debian's chromium, beside the sidebar: nothing a reader needs is cut.

- The Run page of a finished run: every headline metric's label and value reads whole (no ellipsis,
  no text running out of its box), and so does every button's label, Copy link's note included.
- The Runs page: the table's first visible columns tell a vLLM, an SGLang and a TensorRT-LLM run of
  one model apart without scrolling sideways (the run id aside).
- Launch, Compare and Hosts: every button's label reads whole.

Read from the DOM: an element whose content is wider than its box is cut."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from db import crud
from db import session as db_session
from perflab.bench.report import format_text_block
from perflab.engines import EngineConfig
from perflab.runner.bench_record import profile_json
from perflab.views.cards import metric_cards
from tests.fixtures.streamlit_app import AppServer, screenshot, settle
from tests.fixtures.ui_data import MODEL, PROFILES, Measured, SeededDatabase

pytestmark = pytest.mark.browser

WINDOW = {"width": 1024, "height": 768}
ENGINES = {"vllm": {"tp": 2}, "sglang": {"enable_prefix_caching": True}, "trtllm": {}}
# Elements whose content is wider than their box, with their text (nothing when every one fits).
CUT_JS = """
(selector) => [...document.querySelectorAll(selector)]
  .filter(element => element.offsetParent !== null)
  .filter(element => element.scrollWidth > element.clientWidth + 1)
  .map(element => element.textContent)
"""
BUTTON_LABELS = (
    '[data-testid="stMain"] button [data-testid="stMarkdownContainer"],'
    '[data-testid="stMain"] button p, .perflab-copy button, .perflab-copy span'
)
METRIC_TEXT = (
    '[data-testid="stMetricLabel"] [data-testid="stMarkdownContainer"],'
    '[data-testid="stMetricLabel"] p, [data-testid="stMetricValue"] [data-testid="stMarkdownContainer"],'
    '[data-testid="stMetricValue"] p'
)
# The data grid renders the cells of the columns in view (it draws on a canvas and keeps these
# cells for assistive technology): the first row of each is what a reader sees without scrolling.
VISIBLE_GRID_JS = """
() => {
  const table = document.querySelector('[data-testid="stDataFrame"] table[role="grid"]');
  const heads = [...table.querySelectorAll('th')];
  const columns = heads.map(head => head.getAttribute('aria-colindex'));
  const rows = [...table.querySelectorAll('tbody tr')].map(row =>
    columns.map(index => (row.querySelector(`td[aria-colindex="${index}"]`) || {}).textContent || ''));
  return {headers: heads.map(head => head.textContent), rows};
}
"""


def engine_runs(url: str, measured: Measured) -> dict[str, int]:
    """A finished run of MODEL on each of three engines, with the same first profile."""
    ids = {}
    with db_session.session_scope(db_session.get_engine(url)) as session:
        for engine, knobs in ENGINES.items():
            run = crud.create_run(
                session,
                config=EngineConfig(engine=engine, model=MODEL, **knobs),
                host_name="local-sim",
                simulated=True,
                accelerator="NVIDIA H100 80GB HBM3",
                profiles=[profile_json(PROFILES[0])],
            )
            crud.add_profile_result(
                session,
                run_id=run.id,
                profile=profile_json(PROFILES[0]),
                result=measured.results[0],
                text_block=format_text_block(measured.results[0]),
                bench_mode="on-host",
            )
            for status in ("launching", "ready", "benchmarking", "done"):
                crud.set_run_status(session, run_id=run.id, status=status)
            ids[engine] = run.id
    return ids


def cut(page: Page, selector: str) -> list[str]:
    return page.evaluate(CUT_JS, selector)


def open_page(page: Page, app: AppServer, path: str) -> None:
    page.goto(app.url + path)
    settle(page)
    page.wait_for_timeout(500)  # the grid draws after the script has ended


def test_headlines_buttons_and_the_runs_table_at_1024(
    data_db: SeededDatabase,
    measured: Measured,
    start_app: Callable[..., AppServer],
    chromium: Browser,
    tmp_path: Path,
) -> None:
    ids = engine_runs(data_db.url, measured)
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(f"hosts:\n  - {{name: local-sim, transport: local, workdir: {tmp_path / 'work'}}}\n")
    app = start_app(
        PERFLAB_DATABASE_URL=data_db.url, PERFLAB_HOSTS=str(hosts), PERFLAB_APP_WORKER="0", PERFLAB_AUTH=""
    )
    context = chromium.new_context(viewport=WINDOW)
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = context.new_page()

    open_page(page, app, f"/run?run={data_db.runs.done}")
    page.locator('[data-testid="stMetricLabel"]').first.wait_for(timeout=60_000)  # drawn late under load
    labels = page.locator('[data-testid="stMetricLabel"]').all_inner_texts()
    values = page.locator('[data-testid="stMetricValue"]').all_inner_texts()
    expected = metric_cards(measured.results[0])
    assert [label.strip() for label in labels[: len(expected)]] == [card.label for card in expected]
    assert [value.strip() for value in values[: len(expected)]] == [card.value for card in expected]
    assert cut(page, METRIC_TEXT) == []
    buttons = page.locator('[data-testid="stMain"] button').all_inner_texts()
    assert {"Copy link", "Re-run", "Prepare JSON", "Download CSV"} <= {
        text.strip().splitlines()[-1] for text in buttons if text.strip()
    }
    page.get_by_role("button", name="Copy link", exact=True).click()
    expect(page.get_by_text("Link copied", exact=True)).to_be_visible()
    assert cut(page, BUTTON_LABELS) == []
    screenshot(page, "run-1024")

    open_page(page, app, "/")
    page.wait_for_selector('[data-testid="stDataFrame"] table[role="grid"] td', state="attached")
    grid = page.evaluate(VISIBLE_GRID_JS)
    screenshot(page, "runs-1024")
    assert grid["headers"][:5] == ["Run", "Status", "Engine", "Knobs", "Profile"], grid["headers"]
    shown = {row[0]: tuple(row[1:]) for row in grid["rows"]}
    engine_rows = [shown[f"run?run={run_id}"] for run_id in ids.values()]
    assert len(set(engine_rows)) == 3, engine_rows  # told apart without the run id
    assert {row[grid["headers"].index("Engine") - 1] for row in engine_rows} == set(ENGINES)

    compared = f"{data_db.runs.done},{data_db.runs.replicated},{ids['sglang']}"
    for path in ("/launch", f"/compare?compare={compared}", "/hosts"):
        open_page(page, app, path)
        assert cut(page, BUTTON_LABELS) == [], path
        screenshot(page, "narrow" + path.split("?")[0].replace("/", "-"))
    context.close()
