"""What a newcomer reads in Debian's chromium: a session file uploaded on the Datasets page and previewed
turn by turn, Compare naming runs of another model instead of colouring their changes, a study page
whose words are explained and whose launches say why they were made, and the Studies list's times in
UTC. Each page is screenshotted to ``test-artifacts/screenshots/`` for a reviewer."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.test_vocabulary import GRID_CELLS_JS
from tests.fixtures.streamlit_app import AppServer, click, local_sim_hosts_file, new_page, screenshot, settle
from tests.fixtures.study_data import StudyDatabase
from tests.fixtures.ui_data import SeededDatabase

pytestmark = pytest.mark.browser

SESSIONS = [
    [
        {
            "messages": [
                {"role": "system", "content": "You are a coding agent."},
                {"role": "user", "content": "Plan."},
            ]
        },
        {"messages": [{"role": "tool", "content": "README.md setup.py"}], "output_len": 32},
    ],
    {"turns": [{"messages": [{"role": "user", "content": "Summarise the KV cache."}], "output_len": 64}]},
]


HEADER_JS = """
(name) => [...document.querySelectorAll('table[role="grid"] th')].some(cell => cell.textContent === name)
"""


def serve(start_app: Callable[..., AppServer], url: str, directory: Path) -> AppServer:
    """The app on database ``url`` with the simulated local host, no worker, no login."""
    return start_app(
        PERFLAB_DATABASE_URL=url,
        PERFLAB_HOSTS=str(local_sim_hosts_file(directory)),
        PERFLAB_APP_WORKER="0",
        PERFLAB_AUTH="",
    )


def grid_cells(page: Page, column: str) -> str:
    """The text of the page's data grids once one of them has drawn ``column``."""
    page.wait_for_function(HEADER_JS, arg=column, timeout=60_000)
    return str(page.evaluate(GRID_CELLS_JS))


def test_a_session_file_and_runs_of_another_model(  # type: ignore[no-untyped-def]
    data_db: SeededDatabase, start_app: Callable[..., AppServer], chromium: Browser, tmp_path: Path
) -> None:
    app = serve(start_app, data_db.url, tmp_path)
    page = new_page(chromium)
    upload = tmp_path / "agents.jsonl"
    upload.write_text("".join(json.dumps(conversation) + "\n" for conversation in SESSIONS))
    page.goto(app.url + "/datasets")
    settle(page)
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(upload))
    expect(page.get_by_text(upload.name).first).to_be_visible()
    settle(page)
    click(page, "Store dataset")
    expect(
        page.get_by_text("Stored 'agents.jsonl': 2 sessions of 3 turns, lengths estimated.")
    ).to_be_visible()
    expect(page.get_by_text("2 sessions, 3 turns: 1.5 turns per session on average")).to_be_visible()
    expect(page.get_by_text("Preview: the first sessions, turn by turn")).to_be_visible()
    screenshot(page, "datasets-sessions")

    done, seed = data_db.runs.done, data_db.runs.imported[0]
    page.goto(f"{app.url}/compare?compare={done},{seed}")
    settle(page)
    warning = page.get_by_text(re.compile(r"^These results are of different models: "))
    expect(warning).to_be_visible()
    expect(warning).to_contain_text("shown without colour, as neither better nor worse")
    screenshot(page, "compare-different-models")


def test_a_study_explains_its_words_and_its_launches(  # type: ignore[no-untyped-def]
    study_db: StudyDatabase, start_app: Callable[..., AppServer], chromium: Browser, tmp_path: Path
) -> None:
    app = serve(start_app, study_db.url, tmp_path)
    page = new_page(chromium)
    page.goto(f"{app.url}/study?study={study_db.done}")
    settle(page)
    page.get_by_text("What the words on this page mean", exact=True).click()
    for term in ("Total TPS", "CV", "df", "look", "spread of the verdicts", "detectable gain"):
        expect(page.get_by_text(re.compile(rf"^{term}: "))).to_be_visible()
    page.get_by_text(re.compile(r"^Launches \(\d+\)$")).click()
    settle(page)
    cells = grid_cells(page, "Why")  # the box's table, drawn once it is opened
    beside = "launch 2 of a reference (the baseline or a stage's winner): launched again beside the launches"
    assert "Why" in cells and beside in cells
    screenshot(page, "study-words-and-launches")

    page.goto(f"{app.url}/studies")
    settle(page)
    cells = grid_cells(page, "Created")
    assert "Created" in cells and " UTC" in cells and "+00:00" not in cells
    screenshot(page, "studies-list")
