"""Password guessing in chromium against the real app (shared-password login, served on 0.0.0.0):
wrong passwords typed in several parallel sessions from one address count together, the address is
then locked out — the right password included, in old and new sessions alike — while a browser
connecting from another address (this machine's network address rather than loopback) logs in."""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.fixtures.streamlit_app import AppServer, click, local_sim_hosts_file, log_in, new_page, settle

pytestmark = pytest.mark.browser

PASSWORD = "throttle-shared-password"
MAX_FAILURES = 5
WAIT_PREFIX = "Too many wrong passwords: wait"
ATTEMPTS_PER_TRY = 10
VERDICT = re.compile(r"^(Wrong password|Too many wrong passwords)")


def try_password(page: Page, password: str) -> str:
    """Submit the sidebar login form; the error it shows. A try that must first wait (the growing
    delay) is repeated after the wait, so the result is always the verdict on this password."""
    sidebar = page.get_by_test_id("stSidebar")
    for _ in range(ATTEMPTS_PER_TRY):
        sidebar.get_by_label("Your name", exact=True).fill("mallory")
        sidebar.get_by_label("Password", exact=True).fill(password)
        click(page, "Log in")
        message = " ".join(sidebar.get_by_text(VERDICT).inner_text().split())
        if not message.startswith(WAIT_PREFIX):
            return message
        page.wait_for_timeout(1_000)
    raise AssertionError(f"still told to wait after {ATTEMPTS_PER_TRY} tries")


def non_loopback_address() -> str:
    """An address of this machine that is not loopback (a connection to it comes from it too)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing address
        except OSError:
            pytest.skip("this machine has no network address besides loopback")
        address = str(probe.getsockname()[0])
    if address.startswith("127."):
        pytest.skip("this machine has no network address besides loopback")
    return address


def open_session(browser: Browser, url: str) -> Page:
    page = new_page(browser)
    page.goto(url)
    settle(page)
    return page


def test_guesses_from_parallel_sessions_lock_out_their_address_only(
    start_app: Callable[..., AppServer], chromium: Browser, tmp_path: Path
) -> None:
    other_address = non_loopback_address()
    password_file = tmp_path / "password"
    password_file.write_text(PASSWORD + "\n")
    hosts = local_sim_hosts_file(tmp_path)
    app = start_app(
        address="0.0.0.0",
        PERFLAB_AUTH="password",
        PERFLAB_PASSWORD_FILE=str(password_file),
        PERFLAB_LOGIN_MAX_FAILURES=str(MAX_FAILURES),
        PERFLAB_DATABASE_URL=f"sqlite:///{tmp_path / 'perflab.db'}",
        PERFLAB_HOSTS=str(hosts),
        PERFLAB_APP_WORKER="0",
    )
    here = f"http://127.0.0.1:{app.port}/"
    sessions = [open_session(chromium, here) for _ in range(3)]

    verdicts = [try_password(sessions[index % 3], f"guess-{index}") for index in range(MAX_FAILURES)]

    assert verdicts == [
        "Wrong password (4 more wrong tries lock logins from your address).",
        "Wrong password (3 more wrong tries lock logins from your address).",
        "Wrong password (2 more wrong tries lock logins from your address).",
        "Wrong password (1 more wrong try lock logins from your address).",
        "Wrong password. Logins from your address are now locked for 15 min 0 s.",
    ]
    # the right password from this address is refused now, in an old session and in a new one
    for page in (sessions[2], open_session(chromium, here)):
        refusal = try_password(page, PASSWORD)
        assert refusal.startswith("Too many wrong passwords from your address (5 in 15 min 0 s): ")
        assert "logins from it are locked for another 1" in refusal
        expect(page.get_by_text("Signed in as")).to_have_count(0)

    # a browser connecting from another address (this machine's own, not loopback) is not affected
    elsewhere = open_session(chromium, f"http://{other_address}:{app.port}/")
    log_in(elsewhere, "ana", PASSWORD)
