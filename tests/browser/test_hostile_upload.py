"""Hostile result files uploaded in chromium on the Runs page of the real app: each is one line of
error naming the file, nothing of it is stored, and the good file uploaded with them is imported."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.fixtures.streamlit_app import AppServer, click, local_sim_hosts_file, new_page, settle
from tests.team.test_bad_input import good_result
from tests.team.test_hostile_imports import HOSTILE

pytestmark = pytest.mark.browser

UPLOADED = ("deep_array.json", "huge_count.json", "nul_in_model.json")


def test_hostile_files_uploaded_in_the_browser(
    start_app: Callable[..., AppServer], chromium: Browser, tmp_path: Path
) -> None:
    database = tmp_path / "perflab.db"
    hosts = local_sim_hosts_file(tmp_path)
    app = start_app(
        PERFLAB_DATABASE_URL=f"sqlite:///{database}",
        PERFLAB_HOSTS=str(hosts),
        PERFLAB_APP_WORKER="0",
    )
    files = []
    for name in UPLOADED:
        path = tmp_path / name
        path.write_text(HOSTILE[name][0])
        files.append(str(path))
    good = tmp_path / "good.json"
    good.write_text(good_result(label="uploaded beside hostile files"))
    files.append(str(good))

    page = new_page(chromium)
    page.goto(app.url)
    settle(page)
    page.get_by_text("Import results").click()
    settle(page)  # the box draws its uploader when opened
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(files)
    expect(page.get_by_text(good.name)).to_be_visible()
    settle(page)
    click(page, "Import")

    errors = page.get_by_test_id("stAlertContainer").filter(has_text=".json:")
    expect(errors).to_have_count(len(UPLOADED) + 1)  # and the good file's success
    for name in UPLOADED:
        expect(page.get_by_text(f"{name}{HOSTILE[name][1]}")).to_be_visible()
    expect(page.get_by_text(f"{good.name}: imported 1 run")).to_be_visible()
    expect(page.get_by_text("Traceback")).to_have_count(0)
    with sqlite3.connect(database) as connection:
        stored = connection.execute("SELECT label FROM run").fetchall()
    assert stored == [("uploaded beside hostile files",)]
