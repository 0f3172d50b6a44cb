"""Names that carry HTML or markdown links, drawn on the Study page in chromium: shown as text, never a
working link, tag or script (a read-only viewer must not be sent to another site by a study's name)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Dialog, expect
from sqlmodel import select

from db import session as db_session
from db.models import Study, StudyCandidate
from perflab.markdown_text import WORD_JOINER
from tests.fixtures.streamlit_app import AppServer, local_sim_hosts_file, new_page, screenshot, settle
from tests.fixtures.study_data import StudyDatabase

pytestmark = pytest.mark.browser

LINK = "<a href='https://evil.example/login'>Log in again</a>"
MD_LINK = "[click](javascript:alert(1))"
IMAGE = "<img src=x onerror=alert(1)>"


def shown(text: str) -> str:
    """Text as a reader sees it: without the invisible word joiners that keep URLs from linking."""
    return text.replace(WORD_JOINER, "").strip()


def rename(url: str, study_id: int) -> str:
    """Give study ``study_id`` a hostile name, goal and first stage name; return that stage name."""
    stage = f"Engine {LINK}"
    with db_session.session_scope(db_session.get_engine(url)) as session:
        study = session.get(Study, study_id)
        study.name = f"{LINK} {MD_LINK}"
        spec = dict(study.spec)
        spec["name"] = study.name
        spec["goal"] = f"{IMAGE} goal"
        spec["stages"] = [dict(spec["stages"][0], name=stage), *spec["stages"][1:]]
        study.spec = spec
        session.add(study)
        for candidate in session.exec(select(StudyCandidate).where(StudyCandidate.study_id == study_id)):
            if candidate.stage_index == 1:
                candidate.stage_name = stage
                session.add(candidate)
    return stage


def test_html_in_study_names_is_text_on_the_study_page(
    start_app: Callable[..., AppServer], chromium: Browser, study_db: StudyDatabase, tmp_path: Path
) -> None:
    stage = rename(study_db.url, study_db.done)
    app = start_app(
        PERFLAB_DATABASE_URL=study_db.url,
        PERFLAB_HOSTS=str(local_sim_hosts_file(tmp_path)),
        PERFLAB_APP_WORKER="0",
    )
    page = new_page(chromium)
    dialogs: list[str] = []

    def on_dialog(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.goto(f"{app.url}/study?study={study_db.done}")
    settle(page, timeout_ms=120_000)
    title = page.get_by_role("heading", level=1)
    expect(title).to_contain_text("Log in again")
    assert shown(title.inner_text()) == f"Study {study_db.done}: {LINK} {MD_LINK}"
    expect(page.get_by_role("heading", name="Summary of Optimization Options")).to_be_visible()
    # the summary is a data grid (drawn on a canvas, never as HTML): it is there, its text out of reach
    expect(page.locator("[data-testid='stDataFrame']").first).to_be_visible()
    stage_heading = page.get_by_role("heading", level=3).filter(has_text="1. Engine")
    assert shown(stage_heading.inner_text()) == f"1. {stage}"
    assert page.locator("a[href*='evil.example'], a[href^='javascript:'], img[src='x']").count() == 0
    assert page.get_by_role("link", name="Log in again").count() == 0
    assert page.get_by_role("link", name="click").count() == 0
    assert dialogs == []
    screenshot(page, "study-html-names")
