"""Links printed by commands open the running app: started on a port of its own (not the 8501 of its
settings file) and opened once in Debian's chromium, the app records where it is served, and
``perflab run --queue`` on the same database prints the run page on that port. Once the app has
stopped, commands fall back to the settings file's port; ``PERFLAB_APP_URL`` overrides both."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from perflab import app_address, settings
from perflab.cli import main
from tests.fixtures.streamlit_app import AppServer, local_sim_hosts_file, new_page, settle

pytestmark = pytest.mark.browser
RECORD_TIMEOUT_S = 60.0


def test_commands_print_links_to_the_port_the_app_runs_on(
    start_app: Callable[..., AppServer],
    chromium: Browser,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    database = tmp_path / "perflab.db"
    url = f"sqlite:///{database}"
    hosts = local_sim_hosts_file(tmp_path)
    app = start_app(
        PERFLAB_DATABASE_URL=url, PERFLAB_HOSTS=str(hosts), PERFLAB_APP_WORKER="0", PERFLAB_AUTH=""
    )
    assert app.port != 8501
    page = new_page(chromium)
    page.goto(app.url + "/hosts")
    settle(page)
    # The first script run records the address; on a loaded machine it may start after the page settled.
    deadline = time.monotonic() + RECORD_TIMEOUT_S
    while app_address.recorded(url) is None and time.monotonic() < deadline:
        time.sleep(0.2)

    monkeypatch.setenv("PERFLAB_DATABASE_URL", url)
    monkeypatch.setenv("PERFLAB_HOSTS", str(hosts))
    monkeypatch.delenv("PERFLAB_APP_URL", raising=False)
    argv = ["run", "--host", "local-sim", "--engine", "vllm", "--model", "m", "--profile", "short", "--queue"]
    assert main(argv) == 0
    assert capsys.readouterr().out == f"queued run 1: {app.url}/run?run=1\n"  # http://127.0.0.1:PORT

    monkeypatch.setenv("PERFLAB_APP_URL", "https://perf.example/lab/")
    assert settings.run_page_url(1) == "https://perf.example/lab/run?run=1"
    monkeypatch.delenv("PERFLAB_APP_URL")
    app.stop()
    assert app_address.recorded(url) is None  # it answers no more
    assert settings.run_page_url(1) == "http://localhost:8501/run?run=1"  # .streamlit/config.toml


def test_a_record_is_read_only_while_its_app_answers_on_this_machine(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'perflab.db'}"
    assert app_address.record_path(url) == tmp_path / "perflab.db.app"
    assert app_address.record_path("postgresql://u@db/perflab") is None
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        app_address.record(url, f"http://127.0.0.1:{port}/lab")
        assert app_address.recorded(url) == f"http://127.0.0.1:{port}/lab"
    assert app_address.recorded(url) is None  # nothing answers there any more
    record = app_address.record_path(url)
    assert record is not None
    record.write_text('{"url": "http://127.0.0.1:1", "host": "another-machine"}')
    assert app_address.recorded(url) is None
    record.write_text("not json")
    assert app_address.recorded(url) is None
    assert (
        app_address.served_url(address="0.0.0.0", port=8502, base_path="/lab/") == "http://localhost:8502/lab"
    )
    assert app_address.served_url(address="10.0.0.5", port=80, base_path="") == "http://10.0.0.5:80"
