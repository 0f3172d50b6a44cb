"""The app shell with AppTest: every page registered under its URL path, each page drawing on an
empty database, empty and broken hosts files, and the sidebar's database, worker and queue status."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from db import crud
from db import session as db_session
from tests.fixtures.ui_data import SeededDatabase
from tests.ui.conftest import run_app, texts

PAGES = {
    "pages/runs.py": "Runs",
    "pages/run.py": "Run",
    "pages/compare.py": "Compare runs",
    "pages/launch.py": "Launch a run",
    "pages/datasets.py": "Datasets",
    "pages/hosts.py": "Hosts",
}


def test_pages_are_registered_under_their_url_paths(empty_db: str, app_env) -> None:  # type: ignore[no-untyped-def]
    app_env(empty_db)
    app = run_app()
    registered = {
        str(info.get("script_path", "")).rsplit("/", 1)[-1]: info.get("url_pathname")
        for info in app._registered_pages.values()
    }
    assert (
        registered.items()
        >= {
            "runs.py": "",
            "run.py": "run",
            "compare.py": "compare",
            "launch.py": "launch",
            "datasets.py": "datasets",
            "hosts.py": "hosts",
        }.items()
    )


@pytest.mark.parametrize(("page", "title"), list(PAGES.items()))
def test_every_page_draws_on_an_empty_database(empty_db: str, app_env, page: str, title: str) -> None:  # type: ignore[no-untyped-def]
    app_env(empty_db)
    app = run_app(page)
    assert not app.exception
    assert texts(app.title) == [title]


@pytest.mark.parametrize("page", list(PAGES))
def test_a_shared_link_opened_first_still_gets_the_shell(empty_db: str, app_env, page: str) -> None:  # type: ignore[no-untyped-def]
    # AppTest starts every run like a fresh server process, where Streamlit runs a page of pages/
    # without app.py; the page must draw the shell itself.
    app_env(empty_db)
    app = run_app(page)
    assert not app.exception
    assert f"Database: {db_session.public_name(empty_db)}" in " ".join(texts(app.sidebar.caption))
    assert any(text.startswith("No worker running") for text in texts(app.sidebar.warning))


@pytest.mark.parametrize(
    ("page", "empty_message"),
    [("pages/launch.py", "No hosts in "), ("pages/hosts.py", "No hosts yet.")],
)
def test_empty_and_broken_hosts_files(
    empty_db: str, app_env, tmp_path: Path, page: str, empty_message: str
) -> None:  # type: ignore[no-untyped-def]
    empty = tmp_path / "empty.yaml"
    empty.write_text("hosts: []\n")
    app_env(empty_db, empty)
    app = run_app(page)
    assert not app.exception
    assert any(text.startswith(empty_message) for text in texts(app.info))

    broken = tmp_path / "broken.yaml"
    broken.write_text("hosts:\n  - name: gpu-a\n    port: twenty\n  - name: b\n    transport: ssh\n")
    app_env(empty_db, broken)
    app = run_app(page)
    assert not app.exception
    [error] = texts(app.main.error)
    assert error.startswith("The hosts file cannot be used:")
    assert (
        "broken.yaml:3: host 'gpu-a' field 'port'" in error
        and "broken.yaml:4: host 'b' field 'address'" in error
    )


def test_a_broken_hosts_file_stops_the_new_study_form(empty_db: str, app_env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    broken = tmp_path / "broken.yaml"
    broken.write_text("hosts:\n  - name: gpu-a\n    port: twenty\n")
    app_env(empty_db, broken)
    app = run_app("pages/studies.py")
    assert not app.exception
    assert texts(app.main.error) == [
        "The hosts file cannot be used:\n\n- broken.yaml:3: host 'gpu-a' field 'port': must be an integer"
    ]
    assert not app.main.button


def test_sidebar_shows_database_worker_and_active_runs(data_db: SeededDatabase, app_env) -> None:  # type: ignore[no-untyped-def]
    with db_session.session_scope(db_session.get_engine(data_db.url)) as session:
        crud.register_worker(session, worker_id="worker-a", hostname="box", pid=42)
    app_env(data_db.url)
    app = run_app()
    assert not app.exception
    captions = texts(app.sidebar.caption)
    assert "Worker: 1 worker running" in captions
    assert "In-app worker off (PERFLAB_APP_WORKER=0)" in captions
    assert "Queued runs: 1 · in flight: 1 (benchmarking 1)" in captions
    links = texts(app.sidebar.markdown)
    queued = data_db.runs.queued
    assert (
        links[0] == f"[:material/schedule: queued · run {queued}](run?run={queued}) · local-sim (simulated)"
    )
    assert links[1].startswith(f"[:material/speed: benchmarking · run {data_db.runs.benchmarking}]")
    assert not app.sidebar.warning


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("PERFLAB_WORKER_STALE_S", "soon", "PERFLAB_WORKER_STALE_S='soon': expected a number of seconds"),
        ("PERFLAB_READY_TIMEOUT_S", "-5", "PERFLAB_READY_TIMEOUT_S='-5': must be > 0"),
    ],
)
def test_an_unusable_setting_stops_every_page_with_its_reason(
    empty_db: str, app_env, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:  # type: ignore[no-untyped-def]
    app_env(empty_db)
    monkeypatch.setenv(variable, value)
    app = run_app("pages/runs.py")
    assert not app.exception
    assert texts(app.error) == [f"perflab cannot start: {message}"]
    assert not app.dataframe


def test_the_sidebar_judges_workers_by_the_configured_silence(
    empty_db: str, app_env, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    with db_session.session_scope(db_session.get_engine(empty_db)) as session:
        crud.register_worker(session, worker_id="worker-a", hostname="box", pid=42)
    app_env(empty_db)
    time.sleep(0.2)
    monkeypatch.setenv("PERFLAB_WORKER_STALE_S", "0.1")
    app = run_app()
    assert not app.exception
    assert any(text.startswith("No worker running") for text in texts(app.sidebar.warning))
