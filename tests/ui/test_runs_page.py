"""The Runs page (the app's default page) with AppTest: empty, filled, filters, sort, paging,
selection → compare, and importing results with per-file errors."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy.engine import make_url

from db import session as db_session
from tests.fixtures.ui_data import IMPORT_FILES, SEED_FILES, SeededDatabase
from tests.ui.conftest import texts

SEED_002 = next(path for path in SEED_FILES if path.name.startswith("002"))


def test_empty_database_says_how_to_start(empty_db: str, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(empty_db)
    assert not app.exception
    assert texts(app.title) == ["Runs"]
    assert any("No runs yet" in text for text in texts(app.info))
    assert not app.dataframe
    sidebar = " ".join(texts(app.sidebar.caption))
    assert f"Database: {db_session.public_name(empty_db)}" in sidebar
    # Every viewer sees the sidebar: the database's kind and name, never where it lives on the server.
    url = make_url(empty_db)
    if url.get_backend_name() == "sqlite":
        assert "Database: SQLite · " in sidebar
        assert url.database not in sidebar and str(Path(url.database).parent) not in sidebar
    else:
        assert "Database: PostgreSQL · " in sidebar
        assert f"{url.host}:{url.port}" not in sidebar and f"{url.username}@" not in sidebar
    assert "Queued runs: 0 · in flight: 0" in sidebar
    assert any("No worker running" in text for text in texts(app.sidebar.warning))


def test_every_run_is_listed_with_its_facts(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(data_db.url)
    assert not app.exception
    runs = data_db.runs
    total = len(runs.imported) + 5
    assert f"Runs 1–50 of {total} · page 1 of 2" in texts(app.caption)
    table = app.dataframe[0].value
    assert list(table.index[:5]) == [runs.queued, runs.benchmarking, runs.failed, runs.replicated, runs.done]
    done = table.loc[runs.done]
    assert done["Host"] == "local-sim (simulated)" and done["Source"] == "perflab · simulated"
    assert (done["Engine"], done["Model"], done["Knobs"], done["Profile"]) == (
        "vllm",
        "Qwen/Qwen3-8B",
        "tp=2",
        "paced",
    )
    assert done["Total tok/s"] > 0 and done["Mean TTFT (ms)"] > 0 and done["Run"] == f"run?run={runs.done}"
    assert table.loc[runs.replicated, "Replicas"] == 2 and done["Replicas"] == 1
    assert table.loc[runs.failed, "Status"] == "failed"
    # A run without a result: its figures are empty and read "—", not "None"; its profile is the one
    # it plans.
    assert table.loc[runs.failed, ["Total tok/s", "Mean TTFT (ms)"]].isna().all()
    assert table.loc[runs.queued, "Profile"] == "burst" and table.loc[runs.benchmarking, "Profile"] == "paced"
    element = app.dataframe[0].proto
    assert element.placeholder == "—"
    # What tells runs apart comes first, then the throughput; the compact set shows just that.
    assert list(table.columns[:8]) == [
        "Run",
        "Status",
        "Engine",
        "Knobs",
        "Profile",
        "Model",
        "Total tok/s",
        "Total tok/s per accelerator",
    ]
    # the simulated engine's results report a prefix-cache hit rate: the compact set shows it too
    assert table.loc[runs.done, "Prefix-cache hit (%)"] >= 0
    assert list(element.column_order) == [*table.columns[:8], "Prefix-cache hit (%)"]
    config = json.loads(element.columns)
    assert "replicas" in config["Replicas"]["help"] and "replicas" in config["Knobs"]["help"]
    app.selectbox(key="runs_columns").select("all").run()
    assert list(app.dataframe[0].proto.column_order) == list(table.columns)
    assert app.query_params["columns"] == "all"
    sidebar = " ".join(texts(app.sidebar.caption))
    assert "Queued runs: 1 · in flight: 1 (benchmarking 1)" in sidebar


def test_filters_sort_and_paging(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(data_db.url)
    app.multiselect(key="runs_engine").select("sglang").run()
    engines = set(app.dataframe[0].value["Engine"])
    assert engines == {"sglang"}
    app.multiselect(key="runs_engine").unselect("sglang").run()
    app.selectbox(key="runs_source").select("perflab · simulated hosts").run()
    assert sorted(app.dataframe[0].value.index) == sorted(
        [
            data_db.runs.done,
            data_db.runs.replicated,
            data_db.runs.failed,
            data_db.runs.benchmarking,
            data_db.runs.queued,
        ]
    )
    app.selectbox(key="runs_source").select("imported").run()
    app.text_input(key="runs_model").input("qwen3-14b").run()
    models = set(app.dataframe[0].value["Model"])
    assert models and all("Qwen3-14B" in model for model in models)

    app.text_input(key="runs_model").input("no-such-model").run()
    assert texts(app.info) == ["No runs match these filters."] and not app.dataframe
    app.text_input(key="runs_model").input("").run()
    app.selectbox(key="runs_sort").select("Total tok/s").run()
    figures = app.dataframe[0].value["Total tok/s"].dropna()
    assert list(figures) == sorted(figures, reverse=True) and len(figures) > 10
    app.selectbox(key="runs_order").select("ascending").run()
    figures = app.dataframe[0].value["Total tok/s"].dropna()
    assert list(figures) == sorted(figures)

    app.selectbox(key="runs_page_size").select(25).run()
    app.number_input(key="runs_page").set_value(2).run()
    assert any(text.startswith("Runs 26–50 of ") for text in texts(app.caption))
    app.number_input(key="runs_page").set_value(99).run()
    assert not app.exception
    assert any("page 4 of 4" in text for text in texts(app.caption))


def test_selected_runs_open_the_compare_page(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(data_db.url)
    assert app.button(key="compare_selected").disabled
    # Row 4 (done) is picked first, then row 3 (replicated): the first picked is the baseline.
    app.session_state["runs_table"] = {"selection": {"rows": [4], "columns": [], "cells": []}}
    app.run()
    app.session_state["runs_table"] = {"selection": {"rows": [3, 4], "columns": [], "cells": []}}
    app.run()
    runs = data_db.runs
    assert f"Selected: #{runs.done}, #{runs.replicated} (baseline #{runs.done}, the first picked)" in texts(
        app.caption
    )
    app.button(key="compare_selected").click().run()
    assert not app.exception
    assert app.query_params["compare"] == f"{runs.done},{runs.replicated}"
    assert app.query_params["baseline"] == str(runs.done)
    assert texts(app.title) == ["Compare runs"]


def test_filters_are_in_the_address(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(data_db.url)
    app.multiselect(key="runs_engine").select("sglang").run()
    app.selectbox(key="runs_order").select("ascending").run()
    assert dict(app.query_params) == {"engine": "sglang", "order": "ascending"}
    shared = open_page(
        data_db.url, "pages/runs.py", {"engine": "sglang,nope", "sort": "Total tok/s", "page": "x"}
    )
    assert not shared.exception
    assert shared.multiselect(key="runs_engine").value == ["sglang"]
    assert shared.selectbox(key="runs_sort").value == "Total tok/s"
    assert set(shared.dataframe[0].value["Engine"]) == {"sglang"}
    assert dict(shared.query_params) == {"engine": "sglang", "sort": "Total tok/s"}
    assert texts(shared.info) == [
        "'nope' in ?engine= was not understood (known: mindie, sglang, trtllm, vllm); it is ignored.",
        "'x' in ?page= was not understood (pages are numbered from 1); it is ignored.",
    ]


def test_an_address_it_does_not_understand_says_so(data_db: SeededDatabase, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(data_db.url, "pages/runs.py", {"sort": "bogus", "engine": "nope", "size": "7"})
    assert not app.exception
    problems = texts(app.info)
    assert (
        problems[0]
        == "'nope' in ?engine= was not understood (known: mindie, sglang, trtllm, vllm); it is ignored."
    )
    assert problems[1].startswith("'bogus' in ?sort= was not understood (known: Created, Finished, Run id,")
    assert problems[2] == "'7' in ?size= was not understood (known: 25, 50, 100, 200); it is ignored."
    # Every run is listed, as without the parameters, and the address keeps only what was understood.
    assert len(app.dataframe[0].value) == 50 and dict(app.query_params) == {}
    app.selectbox(key="runs_order").select("ascending").run()
    assert not app.info


def test_import_reports_each_bad_file_and_keeps_the_good_ones(empty_db: str, open_page) -> None:  # type: ignore[no-untyped-def]
    app = open_page(empty_db)
    app.session_state["runs_import"] = True  # the import box, opened
    app.run()
    good = IMPORT_FILES[0]
    app.file_uploader(key="import_files").set_value(
        [
            (SEED_002.name, SEED_002.read_bytes(), "text/plain"),
            ("broken.json", b'{"completed": "many"', "application/json"),
            (good.name, good.read_bytes(), "application/json"),
        ]
    )
    app.run()
    app.text_input(key="import_label").input("team import").run()
    app.button(key="import_button").click().run()
    assert not app.exception
    errors = texts(app.error)
    assert len(errors) == 1 and errors[0].startswith("broken.json")
    successes = texts(app.success)
    assert any(text.startswith(f"{SEED_002.name}: imported 15 runs") for text in successes)
    assert any(text.startswith(f"{good.name}: imported") for text in successes)
    table = app.dataframe[0].value
    assert set(table["Source"]) == {"imported"} and set(table["Label"]) == {"team import"}
    # The same files again: recognised by their content, nothing stored twice.
    position = texts(app.caption)[0]
    app.button(key="import_button").click().run()
    assert not app.exception
    notes = [text for text in texts(app.main.info) if "already imported" in text]
    assert len(notes) == 2 and notes[0].startswith(f"{SEED_002.name}: already imported as runs ")
    assert texts(app.caption)[0] == position
