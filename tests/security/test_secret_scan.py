"""No secret anywhere: a run on a password-authenticated SSH host whose engine needs an API key and a
hub token, queued and compared through the real app behind a shared-password login; then every page's
HTML and text, every download (run JSON/CSV, compare CSV/markdown), the report zip, every row of every
table and the app's and worker's log are scanned for the SSH password, the token, the API key and the
app password. A planted secret proves the scan finds one."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import pytest
import sqlalchemy as sa
from playwright.sync_api import Browser, Page, expect

from db import crud
from db import session as db_session
from perflab.inventory import load_inventory
from perflab.runner.evidence import MIN_COMPLETED
from perflab.transport import open_transport
from tests.fixtures.runs import sized_count
from tests.fixtures.streamlit_app import (
    REPO,
    AppServer,
    choose,
    click,
    fill,
    log_in,
    new_page,
    screenshot,
    settle,
)
from tests.security.conftest import PasswordSshd

pytestmark = pytest.mark.browser

HOST = "scan-host"
TOKEN = "hf_scanTOKEN4d8a1f0c9b7e6d5c4b3a2918"
API_KEY = "scan-api-key-7c41e09b"
APP_PASSWORD = "scan-app-password-52e1"
RUN_DONE_TIMEOUT_MS = 150_000
PROMPTS = 20


def hosts_file(directory: Path, server: PasswordSshd) -> Path:
    key_file = directory / "engine-key"
    key_file.write_text(API_KEY + "\n")
    path = directory / "hosts.yaml"
    path.write_text(
        f"""\
hosts:
  - name: {HOST}
    address: 127.0.0.1
    port: {server.port}
    user: {server.user}
    auth: {{password_env: PERFLAB_SCAN_SSH_PASSWORD, agent: false}}
    known_hosts: {server.known_hosts}
    workdir: {server.workdir}
    connect_timeout_s: 10
    secrets:
      HF_TOKEN: {{env: PERFLAB_SCAN_HF_TOKEN}}
      VLLM_API_KEY: {{file: {key_file}}}
      OPENAI_API_KEY: {{file: {key_file}}}
    simulate: {{accelerator: H100, count: 8, time_scale: 20, startup_scale: 200}}
"""
    )
    return path


def forms(value: str) -> set[str]:
    return {value, quote(value, safe=""), json.dumps(value)[1:-1]}


def scan(sources: dict[str, str], secrets: dict[str, str]) -> list[str]:
    """``<secret> in <source>`` for every secret (raw, URL- or JSON-escaped) found in a source."""
    return [
        f"{name} in {where}"
        for where, text in sources.items()
        for name, value in secrets.items()
        if any(form in text for form in forms(value))
    ]


def table_texts(url: str) -> dict[str, str]:
    """Every row of every table, all columns as text."""
    engine = sa.create_engine(url)
    metadata = sa.MetaData()
    metadata.reflect(engine)
    texts = {}
    with engine.connect() as connection:
        for table in metadata.sorted_tables:
            rows = connection.execute(table.select()).mappings().all()
            texts[f"table {table.name}"] = "\n".join(
                " | ".join(
                    value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
                    for value in row.values()
                )
                for row in rows
            )
    engine.dispose()
    return texts


def page_texts(page: Page, app: AppServer, path: str) -> dict[str, str]:
    """The page's HTML and visible text with every expander opened."""
    page.goto(app.url + path)
    settle(page)
    for expander in page.locator('[data-testid="stExpander"] summary').all():
        expander.click()
    settle(page)
    return {f"page {path} (html)": page.content(), f"page {path} (text)": page.inner_text("body")}


def download(page: Page, button: str) -> str:
    with page.expect_download() as info:
        page.get_by_role("button", name=button, exact=True).first.click()
    return Path(info.value.path()).read_text(encoding="utf-8")


def wait_until_done(page: Page) -> None:
    finished = page.get_by_text(re.compile(rf"\bdone · host {HOST}"))
    expect(finished).to_be_visible(timeout=RUN_DONE_TIMEOUT_MS)
    settle(page)


def queue_run(page: Page, app: AppServer) -> int:
    """Queue a run through the Launch page (reached by the navigation: a reload would start a new,
    logged-out session), trying a secret in its environment first."""
    page.get_by_test_id("stSidebarNav").get_by_role("link", name=re.compile("Launch$")).click()
    settle(page)
    choose(page, "Host", f"{HOST} (simulated)")
    env_box = page.get_by_label("Environment (NAME=value per line)", exact=True)
    env_box.fill(f"HF_TOKEN={TOKEN}")
    env_box.blur()
    settle(page)
    expect(
        page.get_by_text("env: HF_TOKEN is a secret and secrets are never stored with a run")
    ).to_be_visible()
    env_box.fill("VLLM_LOGGING_LEVEL=INFO")
    env_box.blur()
    settle(page)
    # Launch starts with a preset picked; this run sends only its small custom profile
    page.get_by_test_id("stMultiSelect").filter(has_text="Presets (from the seed studies)").get_by_label(
        "Clear all"
    ).click()
    settle(page)
    page.get_by_text("Custom profile", exact=True).click()
    page.get_by_text("Add a custom profile", exact=True).click()
    settle(page)
    fill(page, "Input tokens", "64")
    fill(page, "Output tokens", "16")
    fill(page, "Prompts", str(PROMPTS))
    click(page, "Queue run")
    link = page.get_by_role("link", name=re.compile(r"Open run \d+"))
    run_id = int(link.inner_text().split()[-1])
    link.click()
    expect(page).to_have_url(f"{app.url}/run?run={run_id}")
    return run_id


@pytest.fixture
def scan_env(password_sshd: PasswordSshd, tmp_path: Path) -> dict[str, str]:
    password_file = tmp_path / "app-password"
    password_file.write_text(APP_PASSWORD + "\n")
    return {
        "PERFLAB_DATABASE_URL": f"sqlite:///{tmp_path / 'perflab.db'}",
        "PERFLAB_HOSTS": str(hosts_file(tmp_path, password_sshd)),
        "PERFLAB_APP_WORKER": "1",
        "PERFLAB_AUTH": "password",
        "PERFLAB_PASSWORD_FILE": str(password_file),
        "PERFLAB_SCAN_SSH_PASSWORD": password_sshd.password,
        "PERFLAB_SCAN_HF_TOKEN": TOKEN,
    }


def test_no_secret_in_pages_downloads_exports_rows_or_logs(
    password_sshd: PasswordSshd,
    scan_env: dict[str, str],
    start_app: Callable[..., AppServer],
    chromium: Browser,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in scan_env.items():
        monkeypatch.setenv(name, value)
    secrets = {"SSH password": password_sshd.password, "HF token": TOKEN, "API key": API_KEY}
    secrets["app password"] = APP_PASSWORD
    host = load_inventory(scan_env["PERFLAB_HOSTS"]).get(HOST)
    with open_transport(host) as transport:
        seen = transport.run(["sh", "-c", 'printf "%s|%s" "$HF_TOKEN" "$VLLM_API_KEY"'], timeout=30)
    assert seen.stdout == f"{TOKEN}|{API_KEY}", "the host's commands get its secrets"

    app = start_app(**scan_env)
    page = new_page(chromium)
    page.goto(app.url + "/hosts")
    settle(page)
    log_in(page, "ana", APP_PASSWORD)
    click(page, "Probe")
    expect(page.get_by_text("NVIDIA H100").first).to_be_visible()

    first = queue_run(page, app)
    wait_until_done(page)
    click(page, "Re-run")
    second = first + 1
    expect(page).to_have_url(f"{app.url}/run?run={second}")
    wait_until_done(page)
    engine = db_session.get_engine(scan_env["PERFLAB_DATABASE_URL"])
    with db_session.session_scope(engine) as session:
        for run_id in (first, second):
            [result] = crud.list_profile_results(session, run_id=run_id)
            # every request of every round (PROMPTS a round, as many as the floor of evidence asks) was
            # answered: the engine's API key reached the bench
            measured = sized_count(result.result, PROMPTS)
            assert result.failed == 0 and result.completed == measured >= MIN_COMPLETED, result.result

    sources: dict[str, str] = {}
    for path in ("/", f"/run?run={first}", f"/run?run={second}", "/launch", "/datasets", "/hosts", "/studies",
                 "/study"):  # fmt: skip
        sources |= page_texts(page, app, path)
    page.goto(f"{app.url}/run?run={first}")
    settle(page)
    click(page, "Prepare JSON")
    sources["run JSON"] = download(page, "Download JSON")
    sources["run CSV"] = download(page, "Download CSV")
    sources |= page_texts(page, app, f"/compare?compare={first},{second}")
    screenshot(page, "secret-scan-compare")
    sources["compare CSV"] = download(page, "Download CSV")
    sources["compare markdown"] = download(page, "Download markdown")
    report = tmp_path / "report.zip"
    subprocess.run(
        [sys.executable, "-m", "perflab", "report", "--runs", f"{first},{second}", "--out", str(report)],
        cwd=REPO,
        env={**os.environ, **scan_env},
        check=True,
        capture_output=True,
    )
    with zipfile.ZipFile(io.BytesIO(report.read_bytes())) as archive:
        for member in archive.namelist():
            sources[f"report {member}"] = archive.read(member).decode("utf-8", "replace")
    assert {"report report.md", "report results.csv", "report results.json"} <= set(sources)
    sources |= table_texts(scan_env["PERFLAB_DATABASE_URL"])
    app.stop()
    sources["app and worker log"] = app.log_text()

    assert "Serving Benchmark Result" in sources[f"page /run?run={first} (text)"]
    assert "vllm serve" in sources["table run"] and "VLLM_LOGGING_LEVEL=INFO" in sources["run JSON"]
    assert scan(sources, secrets) == []

    with db_session.session_scope(engine) as session:
        crud.update_run(session, run_id=first, label=f"pasted {TOKEN}")
    planted = table_texts(scan_env["PERFLAB_DATABASE_URL"])
    assert scan(planted, secrets) == ["HF token in table run"]
    app = start_app(**scan_env)
    assert scan(page_texts(page, app, f"/run?run={first}"), secrets) == [
        f"HF token in page /run?run={first} (html)",
        f"HF token in page /run?run={first} (text)",
    ]
