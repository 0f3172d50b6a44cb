"""One vocabulary for what has no value: every page of the app, drawn in Debian's chromium at 1024 × 768
over a database with every kind of run, the seed imports, a finished study, a queued one, a study
whose candidates are queued and launching, and a dataset whose prompts carry no output length — and
the study reports (markdown, CSV, JSON) — show no ``None``, no ``nan`` and no bare ``x`` multiplier
(``527.57x8``, ``8x H100``): a missing value reads ``—``, a waiting one its state, a multiple ``×``.

Text is read from the DOM: the page's text and the cells the data grids render. A data grid draws an
empty cell on its canvas, with the table's placeholder: the same pages run with AppTest show that
every table holding an empty cell draws it as ``—``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page
from sqlmodel import select

from db import crud
from db import session as db_session
from db.models import ProfileResult
from perflab.datasets import parse_upload, store_dataset
from perflab.inventory import load_inventory
from perflab.report.export import report_files
from perflab.report.from_study import study_report
from perflab.study.coordinator import advance, create_study
from perflab.study.measure import study_runs
from perflab.study.spec import parse_spec
from perflab.views.hosts import probe_and_store
from tests.fixtures.streamlit_app import AppServer, screenshot, settle
from tests.fixtures.study_data import DONE_SPEC, StudyDatabase
from tests.fixtures.ui_data import Measured, StoredRuns, fill_database
from tests.ui.conftest import run_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WINDOW = {"width": 1024, "height": 768}
NOT_A_VALUE = re.compile(r"\bNone\b|\bnan\b", re.IGNORECASE)
BARE_X = re.compile(r"(?<![\w.])\d+(?:\.\d+)?x(?=\d|\s)")
GRID_CELLS_JS = """
() => [...document.querySelectorAll('table[role="grid"] th, table[role="grid"] td')]
  .map(cell => cell.textContent).join('\\n')
"""
SIMULATED_HOSTS = """\
hosts:
  - name: local-sim
    transport: local
    workdir: {workdir}
    simulate: {{accelerator: H100, count: 8}}
"""
PROMPTS = b'{"prompt": "Why does batching raise throughput?"}\n{"prompt": "Name three kinds of cache."}\n'


@dataclass(frozen=True)
class Scene:
    """The database's runs and studies, the stored dataset and the hosts file."""

    url: str
    runs: StoredRuns
    studies: tuple[int, ...]
    hosts: Path


def in_progress_study(engine, hosts: Path, done_study: int) -> int:  # type: ignore[no-untyped-def]
    """A study whose baseline is measured (with the finished study's baseline result) and whose next
    candidate is launching: the stage lists candidates that wait."""
    study = create_study(
        engine, parse_spec(DONE_SPEC.replace("engine choice", "in progress")), inventory=load_inventory(hosts)
    )
    advance(engine, study.id)
    with db_session.session_scope(engine) as session:
        (baseline,) = study_runs(session, study_id=study.id)
        measured = study_runs(session, study_id=done_study)[0]
        for status in ("launching", "ready", "benchmarking"):
            crud.set_run_status(session, run_id=baseline.id, status=status)
        for result in session.exec(select(ProfileResult).where(ProfileResult.run_id == measured.id)):
            crud.add_profile_result(
                session,
                run_id=baseline.id,
                profile=result.profile,
                result=result.result,
                text_block=result.text_block,
                bench_mode=result.bench_mode,
            )
        crud.set_run_status(session, run_id=baseline.id, status="done")
    advance(engine, study.id)
    with db_session.session_scope(engine) as session:
        crud.set_run_status(session, run_id=study_runs(session, study_id=study.id)[-1].id, status="launching")
    return study.id


@pytest.fixture
def scene(study_db: StudyDatabase, measured: Measured, tmp_path: Path) -> Iterator[Scene]:
    """The database described above, its simulated host probed (8 H100s)."""
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(SIMULATED_HOSTS.format(workdir=tmp_path / "work"))
    runs = fill_database(study_db.url, measured)
    engine = db_session.get_engine(study_db.url)
    progressing = in_progress_study(engine, hosts, study_db.done)
    with db_session.session_scope(engine) as session:
        store_dataset(session, parse_upload("questions.jsonl", PROMPTS), PROMPTS, name="questions")
        (host,) = load_inventory(hosts)
        probe_and_store(session, host)
    yield Scene(study_db.url, runs, (study_db.done, study_db.queued, progressing), hosts)


def page_text(page: Page) -> str:
    """What the page shows as text: its DOM text and the cells its data grids draw."""
    return page.inner_text("body") + "\n" + page.evaluate(GRID_CELLS_JS)


def problems(text: str) -> list[str]:
    """Each ``None``, ``nan`` or bare-``x`` multiplier with the line it is on."""
    lines = text.splitlines()
    return [line.strip() for line in lines if NOT_A_VALUE.search(line) or BARE_X.search(line)]


def page_paths(scene: Scene) -> list[str]:
    """Every page, with the runs and studies of ``scene``."""
    runs = scene.runs
    return [
        "/",
        "/?columns=all",
        *(f"/run?run={run_id}" for run_id in (runs.done, runs.replicated, runs.failed, runs.benchmarking)),
        f"/run?run={runs.queued}",
        *(f"/run?run={run_id}" for run_id in runs.imported[:4]),
        f"/compare?compare={runs.done},{runs.replicated},{runs.imported[0]},{runs.failed}",
        "/launch",
        "/datasets",
        "/hosts",
        "/studies",
        *(f"/study?study={study_id}" for study_id in scene.studies),
    ]


def test_no_page_or_report_shows_none_nan_or_a_bare_x(
    scene: Scene, start_app: Callable[..., AppServer], chromium: Browser
) -> None:
    app = start_app(
        PERFLAB_DATABASE_URL=scene.url,
        PERFLAB_HOSTS=str(scene.hosts),
        PERFLAB_APP_WORKER="0",
        PERFLAB_AUTH="",
    )
    paths = page_paths(scene)
    context = chromium.new_context(viewport=WINDOW)
    page = context.new_page()
    found: dict[str, list[str]] = {}
    for path in paths:
        page.goto(app.url + path)
        settle(page)
        page.wait_for_timeout(500)  # the data grids draw their cells after the script ends
        shown = problems(page_text(page))
        if shown:
            found[path] = shown
            screenshot(page, "vocabulary" + re.sub(r"\W+", "-", path))
    context.close()

    with db_session.session_scope(db_session.get_engine(scene.url)) as session:
        for study_id in scene.studies:
            files = report_files(study_report(session, study_id=study_id), charts=False)
            for name, content in files.items():
                text = content.decode("utf-8")
                if name.endswith(".json"):
                    text = json.dumps(json.loads(text), indent=1)
                    text = text.replace("null", "")  # JSON's own word for a missing value
                shown = problems(text)
                if shown:
                    found[f"report of study {study_id}: {name}"] = shown
    assert not found, json.dumps(found, indent=1, ensure_ascii=False)


def test_every_table_draws_an_empty_cell_as_a_dash(scene: Scene, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFLAB_DATABASE_URL", scene.url)
    monkeypatch.setenv("PERFLAB_HOSTS", str(scene.hosts))
    monkeypatch.setenv("PERFLAB_APP_WORKER", "0")
    monkeypatch.setenv("PERFLAB_AUTH", "")
    undashed: dict[str, list[str]] = {}
    for path in page_paths(scene):
        name, _, query = path.lstrip("/").partition("?")
        params = dict(part.split("=", 1) for part in query.split("&") if part)
        app = run_app(f"pages/{name or 'runs'}.py", params)
        assert not app.exception, (path, app.exception)
        for table in app.dataframe:
            frame = table.value
            shown = frame.columns if not list(table.proto.column_order) else list(table.proto.column_order)
            empty = [column for column in shown if column in frame and frame[column].isna().any()]
            if empty and table.proto.placeholder != "—":
                undashed.setdefault(path, []).extend(empty)
    assert not undashed, undashed
