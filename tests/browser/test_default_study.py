"""The Studies page's default form, submitted unchanged in Debian's chromium, runs to a finished study
with a report on the simulated local host; with the Hugging Face hub unreachable (as in CI) its
ShareGPT profile runs on the shipped sample, and the page says so. The short validation runs last
less than a second: their run page is screenshotted to show the charts stay readable."""

from __future__ import annotations

import re
import socket
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.fixtures.streamlit_app import AppServer, click, new_page, screenshot, settle

# The study takes about 4 minutes alone on 2 cores, each of its 14 runs spending seconds on launching,
# prompts and storing around benchmarks shorter than a second; in the whole suite on the same 2 cores,
# 2.5 times as long. The limit only stops a study that hangs.
pytestmark = [pytest.mark.browser, pytest.mark.timeout(1500)]

STUDY_DONE_TIMEOUT_MS = 1_200_000


def closed_endpoint() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture
def app(start_app: Callable[..., AppServer], tmp_path: Path) -> AppServer:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(
        "hosts:\n"
        "  - name: local-sim\n"
        "    transport: local\n"
        f"    workdir: {tmp_path / 'work'}\n"
        "    simulate: {accelerator: H100, count: 8, time_scale: 20, startup_scale: 200}\n"
    )
    return start_app(
        PERFLAB_DATABASE_URL=f"sqlite:///{tmp_path / 'perflab.db'}",
        PERFLAB_HOSTS=str(hosts),
        PERFLAB_APP_WORKER="1",
        PERFLAB_AUTH="",
        PERFLAB_HF_ENDPOINT=closed_endpoint(),
        PERFLAB_HUB_CACHE=str(tmp_path / "hub"),
    )


def test_the_default_study_form_runs_to_a_report(app: AppServer, chromium: Browser) -> None:
    page = new_page(chromium)
    page.goto(app.url + "/studies")
    settle(page)
    expect(page.get_by_label("Name", exact=True)).to_have_value("Qwen3-8B on local-sim", timeout=30_000)
    screenshot(page, "studies-default-form")
    click(page, "Create study")
    expect(page.get_by_text(re.compile(r"Study \d+ queued: Qwen3-8B on local-sim"))).to_be_visible()
    page.get_by_role("link", name=re.compile(r"Follow study \d+")).click()
    settle(page)
    expect(page.get_by_text(re.compile(r"done · model Qwen/Qwen3-8B"))).to_be_visible(
        timeout=STUDY_DONE_TIMEOUT_MS
    )
    settle(page)
    expect(page.get_by_text("ShareGPT profiles ran on perflab's ShareGPT-format sample")).to_be_visible()
    expect(page.get_by_role("heading", name="Recommended serve command")).to_be_visible()
    expect(page.get_by_text("Not decided yet")).to_have_count(0)
    click(page, "Prepare report (zip)")
    with page.expect_download() as download_info:
        page.get_by_role("button", name="Download report (zip)").click()
    with zipfile.ZipFile(download_info.value.path()) as report:
        assert {"report.md", "results.csv", "results.json"} <= set(report.namelist())
        assert any(name.startswith("charts/") and name.endswith(".png") for name in report.namelist())
    screenshot(page, "study-default-done")

    # The baseline (run 1) also ran the validation profiles; the short preset lasts well under a second.
    page.goto(f"{app.url}/run?run=1")
    settle(page)
    expect(page.get_by_text("ShareGPT-format sample used instead of the ShareGPT dump").first).to_be_visible()
    page.get_by_role("tab", name="Short Prompt").click()
    settle(page)
    page.get_by_role("tab", name="Throughput and requests in flight").click()
    settle(page)
    expect(page.get_by_test_id("stVegaLiteChart")).to_be_visible()
    screenshot(page, "run-shorter-than-a-second")
