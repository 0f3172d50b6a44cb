"""The access check in chromium: a server listening beyond loopback without ``PERFLAB_AUTH`` shows every
browser session, however early it connects, how to enable a login, and never opens its database."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.fixtures.streamlit_app import AppServer, local_sim_hosts_file, new_page, settle

pytestmark = pytest.mark.browser

PATHS = ["/launch", "/launch", "/datasets", "/runs", "/", "/launch", "/hosts", "/launch"]


def test_sessions_opened_while_an_exposed_server_starts_never_see_the_app(
    start_app: Callable[..., AppServer], chromium: Browser, tmp_path: Path
) -> None:
    database = tmp_path / "perflab.db"
    hosts = local_sim_hosts_file(tmp_path)
    app = start_app(
        address="0.0.0.0",
        PERFLAB_AUTH="",
        PERFLAB_DATABASE_URL=f"sqlite:///{database}",
        PERFLAB_HOSTS=str(hosts),
    )
    # every session connects before the first one has finished its first script run
    pages = [new_page(chromium) for _ in PATHS]
    for page, path in zip(pages, PATHS, strict=True):
        page.goto(app.url + path, wait_until="commit")
    for page, path in zip(pages, PATHS, strict=True):
        settle(page)
        expect(page.get_by_role("heading", level=1)).to_have_text("perflab needs a login here")
        expect(page.get_by_text("listens on the address 0.0.0.0")).to_be_visible()
        assert page.get_by_text("Launch a run").count() == 0, path
        # a later render of the same session is checked again
        page.reload()
        settle(page)
        expect(page.get_by_role("heading", level=1)).to_have_text("perflab needs a login here")
    assert not database.exists()
