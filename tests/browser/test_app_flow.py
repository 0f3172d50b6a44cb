"""The whole app in Debian's chromium against ``streamlit run app.py``: upload a dataset, queue a run of
it on the simulated local host, watch it finish, open its share link in a fresh browser context, run
it again, compare both, download a chart as PNG. Every page is screenshotted, empty and with data, to
``test-artifacts/screenshots/`` for a reviewer."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from perflab.ui import SIDEBAR_REFRESH_S
from tests.fixtures.streamlit_app import AppServer, choose, click, fill, new_page, screenshot, settle

pytestmark = pytest.mark.browser

RUN_DONE_TIMEOUT_MS = 120_000
PROMPTS = [
    f"Prompt {index}: explain why batching raises throughput, in {index + 3} sentences."
    for index in range(24)
]
EMPTY_PAGES = {
    "runs": "No runs yet",
    "run": "Open run id",
    "compare": "Run ids to compare",
    "launch": "Launch a run",
    "datasets": "No datasets yet",
    "hosts": "Not probed yet",
    "studies": "No studies yet",
    "study": "No study given",
}


def hosts_file(directory: Path) -> Path:
    path = directory / "hosts.yaml"
    path.write_text(
        "hosts:\n"
        "  - name: local-sim\n"
        "    transport: local\n"
        f"    workdir: {directory / 'work'}\n"
        "    simulate: {accelerator: H100, count: 8, time_scale: 2, startup_scale: 200}\n"
    )
    return path


@pytest.fixture
def app(start_app: Callable[..., AppServer], tmp_path: Path) -> AppServer:
    return start_app(
        PERFLAB_DATABASE_URL=f"sqlite:///{tmp_path / 'perflab.db'}",
        PERFLAB_HOSTS=str(hosts_file(tmp_path)),
        PERFLAB_APP_WORKER="1",
        PERFLAB_AUTH="",
    )


def visit(page: Page, app: AppServer, path: str) -> None:
    page.goto(app.url + path)
    settle(page)


def wait_until_done(page: Page) -> None:
    """Wait on a run page until the run has finished (the page reloads itself as the run moves on)."""
    expect(page.get_by_text(re.compile(r"\bdone · host local-sim"))).to_be_visible(
        timeout=RUN_DONE_TIMEOUT_MS
    )
    settle(page)
    expect(page.get_by_text("Serving Benchmark Result")).to_be_visible()


def queue_dataset_run(page: Page, app: AppServer) -> None:
    visit(page, app, "/launch")
    # Launch starts with a profile picked, so its defaults can be queued; this run sends only the dataset.
    expect(page.get_by_role("button", name="Queue run", exact=True)).to_be_enabled()
    presets = page.get_by_test_id("stMultiSelect").filter(has_text="Presets (from the seed studies)")
    expect(presets.get_by_text("Throughput Profile", exact=False)).to_be_visible()
    presets.get_by_label("Clear all").click()
    settle(page)
    page.get_by_text("Custom profile", exact=True).click()
    page.get_by_text("Add a custom profile", exact=True).click()
    settle(page)
    choose(page, "Dataset", "prompts (jsonl")
    fill(page, "Prompts", str(len(PROMPTS)))
    fill(page, "Output tokens", "64")
    fill(page, "Request rate (req/s)", "8")
    fill(page, "Label (optional)", "browser test")
    fill(page, "Your name (optional)", "ana")
    screenshot(page, "launch-filled")
    click(page, "Queue run")
    # The note follows the run: a fast worker may have claimed it before the page draws the note.
    following = r"Run \d+ (is queued|is starting its engine|'s engine is ready|is benchmarking|is done)"
    expect(page.get_by_text(re.compile(following))).to_be_visible()


def test_upload_queue_watch_share_compare_download(app: AppServer, chromium: Browser, tmp_path: Path) -> None:
    page = new_page(chromium, clipboard=True)
    for name, marker in EMPTY_PAGES.items():
        visit(page, app, f"/{name}" if name != "runs" else "/")
        expect(page.get_by_text(marker).first).to_be_visible()
        screenshot(page, f"{name}-empty")

    upload = tmp_path / "prompts.jsonl"
    upload.write_text("".join(json.dumps({"prompt": prompt}) + "\n" for prompt in PROMPTS))
    visit(page, app, "/datasets")
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(upload))
    expect(page.get_by_text(upload.name)).to_be_visible()
    settle(page)
    fill(page, "Name", "prompts")
    click(page, "Store dataset")
    expect(page.get_by_text(f"Stored 'prompts': {len(PROMPTS)} prompts")).to_be_visible()
    screenshot(page, "datasets")

    queue_dataset_run(page, app)
    follow = page.get_by_role("link", name=re.compile(r"Open run \d+"))
    first_run = int(follow.inner_text().split()[-1])
    follow.click()
    expect(page).to_have_url(f"{app.url}/run?run={first_run}")
    settle(page)
    wait_until_done(page)
    expect(page.get_by_text("by ana")).to_be_visible()
    screenshot(page, "run")

    page.evaluate("navigator.clipboard.writeText('')")
    page.get_by_role("button", name="Copy link", exact=True).click()
    note = page.get_by_text("Link copied", exact=True)
    expect(note).to_be_visible()
    # The note fits beside the button on one line.
    button_box = page.get_by_role("button", name="Copy link", exact=True).bounding_box()
    note_box = note.bounding_box()
    assert button_box and note_box and note_box["height"] < button_box["height"]
    share = page.evaluate("navigator.clipboard.readText()")
    assert share == f"{app.url}/run?run={first_run}"
    viewer = new_page(chromium)
    viewer.goto(share)
    settle(viewer)
    expect(viewer.get_by_role("heading", level=1)).to_have_text(f"Run {first_run} · browser test")
    expect(viewer.get_by_text("Serving Benchmark Result")).to_be_visible()
    screenshot(viewer, "run-shared")
    viewer.context.close()

    click(page, "Re-run")
    second_run = first_run + 1
    expect(page.get_by_text(f"Queued run {second_run} with the same host")).to_be_visible()
    expect(page).to_have_url(f"{app.url}/run?run={second_run}")
    wait_until_done(page)

    visit(page, app, "/")
    expect(page.get_by_text("Runs 1–2 of 2 · page 1 of 1")).to_be_visible()
    screenshot(page, "runs")
    visit(page, app, "/compare")
    fill(page, "Run ids to compare", f"{first_run}, {second_run}")
    click(page, "Compare")
    page.get_by_text("Charts: per profile", exact=False).click()  # charts are drawn when asked for
    settle(page)
    expect(page.get_by_role("tab", name="Throughput vs latency")).to_be_visible()
    screenshot(page, "compare")
    with page.expect_download() as download_info:
        page.get_by_role("button", name="Download PNG").first.click()
    png = tmp_path / "chart.png"
    download_info.value.save_as(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 2000
    # the file stays served while its button is shown: a browser that fetches it late (many users, a
    # slow link) gets it after more than two clean-ups of Streamlit's media files, one of which ends
    # every script run, as each sidebar refresh does
    page.wait_for_timeout(1000 * (2 * SIDEBAR_REFRESH_S + 1))
    late = page.request.get(download_info.value.url)
    assert late.ok and late.body() == png.read_bytes()

    for name in ("launch", "hosts", "studies"):
        visit(page, app, f"/{name}")
        screenshot(page, name)
