"""The Studies and Study pages with AppTest: a finished study, a queued one, an empty database, a new
study from the form (and a bad one), pause/resume/cancel, and bad ``?study=`` URLs."""

from __future__ import annotations

import pytest

from db import crud
from db import session as db_session
from perflab import ui
from perflab.markdown_text import md_text
from perflab.study.measure import RetryPolicy
from tests.fixtures.study_data import StudyDatabase, leave_incomplete
from tests.ui.conftest import app_env, hosts_file, open_page, texts  # noqa: F401  (fixtures reused)

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
    assert study.recommended_command in texts(app.code)
    markdown = " ".join(texts(app.markdown))
    assert ui.status_text("done") in markdown
    assert f"{ui.status_text('done')} · model **Qwen/Qwen3-8B**" in markdown  # the phase is not repeated
    comparison, summary, engine_stage, impossible, _launches = (frame.value for frame in app.dataframe)
    assert list(comparison["Case"])[:2] == ["Chat", "Short Prompt"]
    assert comparison["Baseline"].iloc[0].startswith("Total TPS ")
    assert list(summary["Optimization option"]) == ["Engine", "Impossible parallelism"]
    assert summary["Throughput improvement"].iloc[1] == "-"
    assert [sub.value for sub in app.subheader] == ["1. Engine", "2. Impossible parallelism"]
    assert list(engine_stage["Candidate"]) == ["vLLM", "SGLang"]
    assert engine_stage["Decision"].iloc[0] == "reused"
    assert (
        impossible["Decision"].iloc[0] == "failed"
        and "more than the study's budget of 1" in impossible["Note"].iloc[0]
    )
    assert len(list(app.get("vega_lite_chart"))) == 2
    labels = {button.label for button in app.get("download_button")}
    assert {"Download report (zip)", "Download CSV", "Download JSON", "Download PNG"} <= labels
    assert not [button for button in app.button if button.key in ("study_pause", "study_resume")]


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
