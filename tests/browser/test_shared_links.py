"""Share links in chromium: a run or study link opened first on a freshly started server renders inside
the real app (navigation, sidebar), and with a shared-password login a viewer reads it, logs in to
act, and the run they queue records their name."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect
from sqlmodel import select

from db import session as db_session
from db.models import Run
from tests.fixtures.streamlit_app import (
    AppServer,
    click,
    local_sim_hosts_file,
    log_in,
    new_page,
    screenshot,
    settle,
)
from tests.fixtures.study_data import StudyDatabase
from tests.fixtures.ui_data import SeededDatabase

pytestmark = pytest.mark.browser

PASSWORD = "browser-shared-password"
NAVIGATION = ["Runs", "Run", "Compare", "Launch", "Datasets", "Hosts", "Studies", "Study"]


def open_first(
    start_app: Callable[..., AppServer], chromium: Browser, tmp_path: Path, url: str, path: str, **env: str
) -> tuple[AppServer, Page]:
    """A fresh server on database ``url`` (no worker) whose first page load is ``path``."""
    app = start_app(
        PERFLAB_DATABASE_URL=url,
        PERFLAB_HOSTS=str(local_sim_hosts_file(tmp_path)),
        PERFLAB_APP_WORKER="0",
        **env,
    )
    page = new_page(chromium)
    page.goto(app.url + path)
    settle(page)
    return app, page


def expect_app_shell(page: Page) -> None:
    navigation = page.get_by_test_id("stSidebarNav").get_by_role("link")
    expect(navigation).to_have_text([re.compile(f"{title}$") for title in NAVIGATION])
    expect(page.get_by_text("Database:")).to_be_visible()


def test_a_run_link_opened_first_on_a_fresh_server(
    start_app: Callable[..., AppServer], chromium: Browser, data_db: SeededDatabase, tmp_path: Path
) -> None:
    _, page = open_first(start_app, chromium, tmp_path, data_db.url, f"/run?run={data_db.runs.done}")
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"Run {data_db.runs.done}")
    expect(page.get_by_text("Serving Benchmark Result").first).to_be_visible()
    expect_app_shell(page)
    screenshot(page, "run-link-first")


def test_a_study_link_opened_first_on_a_fresh_server(
    start_app: Callable[..., AppServer], chromium: Browser, study_db: StudyDatabase, tmp_path: Path
) -> None:
    app, page = open_first(start_app, chromium, tmp_path, study_db.url, f"/study?study={study_db.done}")
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Study {study_db.done}: engine choice")
    expect(page.get_by_role("heading", name="Recommended serve command")).to_be_visible()
    expect_app_shell(page)
    screenshot(page, "study")
    page.goto(f"{app.url}/studies")
    settle(page)
    screenshot(page, "studies-with-data")


def test_a_viewer_reads_a_shared_run_and_logs_in_to_act(
    start_app: Callable[..., AppServer], chromium: Browser, data_db: SeededDatabase, tmp_path: Path
) -> None:
    password_file = tmp_path / "password"
    password_file.write_text(PASSWORD + "\n")
    _, page = open_first(
        start_app,
        chromium,
        tmp_path,
        data_db.url,
        f"/run?run={data_db.runs.done}",
        PERFLAB_AUTH="password",
        PERFLAB_PASSWORD_FILE=str(password_file),
    )
    expect(page.get_by_text("Serving Benchmark Result").first).to_be_visible()
    expect(page.get_by_role("button", name="Re-run")).to_be_disabled()
    screenshot(page, "login-read-only")

    log_in(page, "ana", PASSWORD)
    assert PASSWORD not in page.content()
    screenshot(page, "login-signed-in")
    click(page, "Re-run")
    expect(page.get_by_text("with the same host, config and profiles")).to_be_visible()
    with db_session.session_scope(db_session.get_engine(data_db.url)) as session:
        newest = session.exec(select(Run).order_by(Run.id.desc())).first()
        assert newest is not None and newest.id != data_db.runs.done and newest.queued_by == "ana"
