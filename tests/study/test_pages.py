"""The Studies and Study pages with AppTest: a finished study, a queued one, an empty database, a new
study from the form (and a bad one), pause/resume/cancel, and bad ``?study=`` URLs."""

from __future__ import annotations

import json

import pytest

from db import crud
from db import session as db_session
from perflab import ui
from perflab.datasets import parse_upload, store_dataset
from perflab.markdown_text import md_text
from perflab.study import views
from perflab.study.coordinator import advance, pause_study
from perflab.study.measure import RetryPolicy, study_runs
from tests.fixtures.study_data import StudyDatabase, leave_incomplete
from tests.ui.conftest import app_env, hosts_file, open_page, preformatted, texts  # noqa: F401  (fixtures reused)

STUDIES_PAGE = "pages/studies.py"
STUDY_PAGE = "pages/study.py"


def _study(url: str, study_id: int):  # type: ignore[no-untyped-def]
    with db_session.session_scope(db_session.get_engine(url)) as session:
        return crud.get_study(session, study_id=study_id)


def test_finished_study_shows_command_tables_stages_and_downloads(study_db: StudyDatabase, open_page) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    app = open_page(study_db.url, STUDY_PAGE, {"study": str(study_db.done)})
    assert not app.exception
    study = _study(study_db.url, study_db.done)
    assert texts(app.title) == [f"Study {study_db.done}: engine choice"]
    assert [header.value for header in app.header] == [
        "Recommended serve command",
        "Baseline vs optimized",
        "Predictions",  # this venv has no AIConfigurator: one line says so
        "Summary of Optimization Options",
        "Stages",
        "Charts",
        "Report",
    ]
    assert any(
        text.startswith("No prediction: AIConfigurator is not installed") for text in texts(app.caption)
    )
    assert study.recommended_command in preformatted(app)  # drawn without the code highlighter
    markdown = " ".join(texts(app.markdown))
    assert ui.status_text("done") in markdown
    assert f"{ui.status_text('done')} · model **Qwen/Qwen3-8B**" in markdown  # the phase is not repeated
    comparison, summary, engine_stage, impossible = (frame.value for frame in app.dataframe)
    assert list(comparison["Case"])[:2] == ["Chat", "Short Prompt"]
    assert comparison["Baseline"].iloc[0].startswith("Total TPS ")
    # nothing was kept: every change is a ratio of means, and a line under the table says so, with counts
    assert comparison["Change"].iloc[0].endswith("%") and " ± " not in comparison["Change"].iloc[0]
    assert (
        "A change without ± is the ratio of the two configurations' means, not a decision: no interval, no "
        "verdict (Chat: 3 runs on 3 launches against 3 runs on 3 launches; Short Prompt: 1 run against 1 "
        "run)."
    ) in texts(app.caption)
    assert list(summary["Optimization option"]) == ["Engine", "Impossible parallelism"]
    # a stage that kept nothing says so, and its best candidate's figure says it was not kept
    assert list(summary.columns) == [
        "Optimization option",
        "Throughput improvement kept",
        "Best candidate against the baseline",
        "Not kept (against the best before it)",
    ]
    assert set(summary["Throughput improvement kept"]) == {"nothing kept"}
    assert summary["Best candidate against the baseline"].iloc[0].endswith("% (not kept)")
    # the words of the verdicts are explained on the page, the columns by their tooltips
    (legend,) = [box for box in app.expander if box.label == "What the words on this page mean"]
    legend_text = " ".join(texts(legend.markdown))
    for term in ("**Total TPS**", "**CV**", "**df**", "**look**", "**spread of the verdicts**"):
        assert term in legend_text
    assert "firms up as launches accumulate" in legend_text
    column_help = engine_stage_config(app, 2)
    assert column_help["Total TPS"].startswith("Total token throughput")
    assert column_help["Launches"] == "How many launches the figures of this row are the mean of."
    assert [sub.value for sub in app.subheader] == ["1. Engine", "2. Impossible parallelism"]
    assert list(engine_stage["Candidate"]) == ["vLLM", "SGLang"]
    assert engine_stage["Decision"].iloc[0] == "reused"
    assert (
        impossible["Decision"].iloc[0] == "failed"
        and "more than the study's budget of 1" in impossible["Note"].iloc[0]
    )
    # the charts are tabs, each drawn when open; the launches and the stages' blocks when opened
    assert [tab.label for tab in app.tabs] == ["Baseline vs optimized", "Per stage"]
    assert len(list(app.get("vega_lite_chart"))) == 1
    app.session_state["study_charts"] = "Per stage"
    app.session_state["study_launches_box"] = True
    app.session_state["stage_1_blocks"] = True
    app.run()
    assert not app.exception and len(list(app.get("vega_lite_chart"))) == 1
    assert any("Serving Benchmark Result" in block for block in preformatted(app))
    launches = app.dataframe[-1].value
    # every launch says why it was launched, in balanced rounds: the baseline once, then the candidate,
    # then the baseline again beside it (R C R C R)
    assert list(zip(launches["Configuration"], launches["Launch"], strict=True)) == [
        ("Baseline", "first"),
        ("Engine · SGLang", "first"),
        ("Baseline", "again"),
        ("Engine · SGLang", "again"),
        ("Baseline", "again"),
    ]
    assert list(launches["Why"][:2]) == ["its first measurement"] * 2
    beside = "of a reference (the baseline or a stage's winner): launched again beside the launches it is"
    assert launches["Why"].iloc[2].startswith(f"launch 2 {beside}")
    assert launches["Why"].iloc[4].startswith(f"launch 3 {beside}")
    # the candidate's second launch: its one launch before the first look left it undecided
    assert launches["Why"].iloc[3].startswith("launch 2: not decided yet (a close call, or too few launches")
    labels = {button.label for button in app.get("download_button")}
    assert {"Download CSV", "Download JSON", "Download PNG"} <= labels
    assert not [button for button in app.button if button.key in ("study_pause", "study_resume")]
    # the report zip renders every chart: built when asked for, then its button holds it
    assert "Download report (zip)" not in labels
    app.button(key="study_download_zip_prepare").click().run()
    assert not app.exception
    assert "Download report (zip)" in {button.label for button in app.get("download_button")}


def engine_stage_config(app, index: int) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """The tooltips of the ``index``-th table's columns, by column."""
    config = json.loads(app.dataframe[index].proto.columns)
    return {name: column["help"] for name, column in config.items() if column.get("help")}


def test_queued_study_can_be_paused_resumed_and_cancelled(study_db: StudyDatabase, open_page) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    app = open_page(study_db.url, STUDY_PAGE, {"study": str(study_db.queued)})
    assert not app.exception
    assert "Measuring the baseline; the first stage starts when its tuning result is in." in texts(app.info)
    assert any("Not decided yet" in caption for caption in texts(app.caption))
    app.button(key="study_pause").click().run()
    assert _study(study_db.url, study_db.queued).status == "paused"
    app.button(key="study_resume").click().run()
    assert _study(study_db.url, study_db.queued).status == "running"
    app.button(key="study_cancel").click().run()
    assert not app.exception
    assert _study(study_db.url, study_db.queued).status == "cancelled"
    assert ui.status_text("cancelled") in " ".join(texts(app.markdown))


def test_a_running_study_shows_its_runs_live_and_is_rebuilt_when_it_moves_on(  # type: ignore[no-untyped-def]
    study_db: StudyDatabase,
    open_page,  # noqa: F811
) -> None:
    engine = db_session.get_engine(study_db.url)
    advance(engine, study_db.queued)  # queues the baseline's launches
    with db_session.session_scope(engine) as session:
        run = study_runs(session, study_id=study_db.queued)[0]
        for status in ("launching", "ready", "benchmarking"):
            crud.set_run_status(session, run_id=run.id, status=status)
        before = views.study_version(session, study_db.queued)
        progress = {
            "profile": run.profiles[0]["name"],
            "done": 412,
            "failed": 0,
            "total": 1000,
            "in_flight": 64,
        }
        crud.heartbeat_run(session, run_id=run.id, progress=progress)
        # a run's heartbeat is not the study moving on: the page's poll does not rebuild the result
        assert views.study_version(session, study_db.queued) == before
    app = open_page(study_db.url, STUDY_PAGE, {"study": str(study_db.queued)})
    assert not app.exception
    live = [text for text in texts(app.markdown) if text.startswith(f"[Run {run.id}](")]
    assert live and "benchmarking" in live[0] and "412/1000 requests, 64 in flight" in live[0]
    with db_session.session_scope(engine) as session:
        result = {"completed": 50, "failed": 0, "total_token_throughput": 1000.0}
        crud.add_profile_result(
            session,
            run_id=run.id,
            profile=run.profiles[0],
            result=result,
            text_block=None,
            bench_mode="on-host",
        )
        moved = views.study_version(session, study_db.queued)
    assert moved is not None and moved != before  # a stored result moves it on
    # only a run moved on: the page draws the result again once the drawn one is REDRAW_EVERY_S old
    assert not views.redraw_due(before, moved, shown_for_s=views.REDRAW_EVERY_S - 1)
    assert views.redraw_due(before, moved, shown_for_s=views.REDRAW_EVERY_S)
    assert not views.redraw_due(moved, moved, shown_for_s=10 * views.REDRAW_EVERY_S)
    # the study's status changed (paused here) or it is gone: at once
    pause_study(engine, study_db.queued)
    with db_session.session_scope(engine) as session:
        paused = views.study_version(session, study_db.queued)
    assert paused is not None and views.redraw_due(moved, paused, shown_for_s=0.0)
    assert views.redraw_due(moved, None, shown_for_s=0.0)


def test_an_incomplete_study_names_what_is_missing_and_measures_it_again(  # type: ignore[no-untyped-def]
    study_db: StudyDatabase,
    open_page,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PERFLAB_STUDY_RETRY_DELAYS_S", "0,0")
    leave_incomplete(db_session.get_engine(study_db.url), study_db.queued, RetryPolicy((0.0, 0.0)))
    assert _study(study_db.url, study_db.queued).status == "incomplete"

    app = open_page(study_db.url, STUDY_PAGE, {"study": str(study_db.queued)})
    assert not app.exception
    assert ui.status_text("incomplete") in " ".join(texts(app.markdown))
    (warning,) = texts(app.main.warning)
    assert warning.startswith("Incomplete: not measured because of the infrastructure: Baseline · Baseline")
    assert "host_unreachable: host 'local-sim': refused" in warning
    assert "None over candidates that could not be measured (see above)." in texts(app.caption)
    app.button(key="study_measure_missing").click().run()
    assert not app.exception
    study = _study(study_db.url, study_db.queued)
    assert study.status == "running" and study.finished_at is None and study.state["measure_from_run"] > 0


def test_bad_and_unknown_study_urls_get_a_friendly_message(study_db: StudyDatabase, open_page) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    app = open_page(study_db.url, STUDY_PAGE, {})
    assert texts(app.info) == [
        "No study given: open one on the Studies page, or add ?study=ID to the address."
    ]
    app = open_page(study_db.url, STUDY_PAGE, {"study": "abc"})
    assert texts(app.info) == ["'abc' in ?study= is not a study id: study ids are whole numbers like 3."]
    app = open_page(study_db.url, STUDY_PAGE, {"study": "999"})
    assert not app.exception
    assert texts(app.main.warning) == [
        "Study 999 does not exist (it may have been deleted). Pick one on the Studies page."
    ]


def test_studies_page_lists_studies(study_db: StudyDatabase, open_page) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    app = open_page(study_db.url, STUDIES_PAGE)
    assert not app.exception
    (table,) = (frame.value for frame in app.dataframe)
    assert list(table["Name"]) == ["waiting study", "engine choice"]
    assert list(table["Status"]) == ["queued", "done"]
    assert list(table["Open"]) == [f"/study?study={study_db.queued}", f"/study?study={study_db.done}"]
    assert all(created.endswith(" UTC") for created in table["Created"])  # as every page writes times


def test_empty_database_invites_a_first_study(empty_db: str, open_page) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    app = open_page(empty_db, STUDIES_PAGE)
    assert not app.exception
    assert texts(app.info) == ["No studies yet. Describe one below, or upload a study spec (YAML or JSON)."]


def test_the_form_creates_a_study_and_reports_bad_stages(empty_db: str, open_page) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    app = open_page(empty_db, STUDIES_PAGE)
    app.text_input(key="study_name").input("form study")
    app.text_area(key="study_stages").input("- name: Engine\n  candidates: [sglang]\n")
    app.button[0].click().run()  # the form's submit button
    assert not app.exception
    bare = md_text("stages[0]: a bare value needs the stage's 'dimension'")
    assert any(bare in error for error in texts(app.error))
    app.text_area(key="study_stages").input("- name: Engine\n  dimension: engine\n  candidates: [sglang]\n")
    app.button[0].click().run()
    assert not app.exception
    (success,) = texts(app.success)
    assert success.startswith("Study ") and success.endswith("queued: form study.")
    with db_session.session_scope(db_session.get_engine(empty_db)) as session:
        (study,) = crud.list_studies(session)
    assert study.spec["hosts"] == ["local-sim"] and study.spec["baseline"] == {"engine": "vllm"}
    assert study.state["gpus_per_node"] == 8 and study.queued_by == "web"


def test_the_form_tunes_on_an_uploaded_session_file(empty_db: str, open_page) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    content = (
        b'[{"messages": [{"role": "user", "content": "Plan the change."}]}, '
        b'{"messages": [{"role": "tool", "content": "ok"}]}]\n'
    )
    with db_session.session_scope(db_session.get_engine(empty_db)) as session:
        dataset, _ = store_dataset(session, parse_upload("agents.jsonl", content), content, name="agents")
    app = open_page(empty_db, STUDIES_PAGE)
    relaunches = app.number_input(key="study_relaunches")
    assert (
        "its references are launched more than once" in relaunches.help and "Above 1" not in relaunches.help
    )
    label = f"dataset #{dataset.id} · agents (agentic-jsonl, 1 session, 2 turns)"
    assert label in app.selectbox(key="study_tuning").options
    app.selectbox(key="study_tuning").select(label)
    app.multiselect(key="study_validation").set_value([])
    app.text_input(key="study_name").input("agents study")
    app.text_area(key="study_stages").input(
        "- name: Prefix caching\n  dimension: prefix_cache\n  candidates: [false]\n"
    )
    app.button[0].click().run()
    assert not app.exception and not app.error
    with db_session.session_scope(db_session.get_engine(empty_db)) as session:
        (study,) = crud.list_studies(session)
    tuning = study.spec["tuning_profile"]
    assert (tuning["dataset"], tuning["dataset_ref"], tuning["num_prompts"]) == (
        "agentic-trace",
        dataset.content_hash,
        1,
    )


def test_the_form_offers_a_search_within_the_hosts_budget(empty_db: str, open_page) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    app = open_page(empty_db, STUDIES_PAGE)
    app.radio(key="study_method").set_value("search").run()
    app.text_input(key="study_name").input("searched")
    stages = app.text_area(key="study_stages").value
    assert "search:" in stages and "parallelism: [{tp: 1}, {tp: 2}, {tp: 4}, {tp: 8}]" in stages
    app.button[0].click().run()
    assert not app.exception
    (success,) = texts(app.success)
    assert success.endswith("queued: searched.")
    with db_session.session_scope(db_session.get_engine(empty_db)) as session:
        (study,) = crud.list_studies(session)
    (stage,) = study.spec["stages"]
    assert stage["search"]["knobs"]["max_num_seqs"] == [64, 128, 256, 512]
    assert stage["search"]["budget"] == {"launches": 16, "gpu_hours": None}
