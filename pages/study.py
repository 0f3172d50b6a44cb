"""Study (``?study=ID``): its result as it stands (:func:`perflab.report.from_study.study_report`, the
model the report, the JSON and the CSV render too): its stages with candidates, results, failures and
winners as they arrive, a search's trials and launches, the recommended serve command, the
predicted figures beside the measured ones, the optimization summary, baseline vs optimized on every
validation profile, charts, every launch, and the report download. Every table is plain text (nothing
from a user is drawn as HTML). Pause, resume and cancel; an incomplete study lists the candidates the
infrastructure kept from being measured and offers to measure them."""

from __future__ import annotations

import functools
import time
from typing import Any

import streamlit as st

from db import crud
from db.crud.studies import FINISHED_STUDY_STATUSES
from perflab import ui
from perflab.hub.catalog import SAMPLE_REPORT_NOTE
from perflab.markdown_text import md_text
from perflab.report.export import report_files, results_csv, results_json, zip_bytes
from perflab.report.markdown import comparison_note, per_accelerator_lines, replicas_note, summary_note
from perflab.report.model import Report, SearchSection, StageSection
from perflab.report.predictions import table_rows
from perflab.report.search_section import launch_text
from perflab.study import views
from perflab.study.coordinator import (
    StudyStateError,
    cancel_study,
    measure_missing,
    pause_study,
    resume_study,
)
from perflab.views import run_progress
from perflab.views.formatting import MISSING
from perflab.views.run_list import run_link
from perflab.views.urlstate import BadParam

ui.ensure_app_shell()

PAGE = "study"
# The live lines' poll; the result itself is drawn again when the study moves on (while it runs, at most
# every views.REDRAW_EVERY_S).
LIVE_EVERY_S = 3.0
LIVE_RUNS_SHOWN = 8

try:
    study_id = views.parse_study_id(ui.query_param("study"))
except BadParam as problem:
    st.title("Study")
    st.info(str(problem))
    st.page_link("pages/studies.py", label="All studies", icon=":material/science:")
    st.stop()

with ui.session() as session:
    study = crud.get_study(session, study_id=study_id)
if study is None:
    st.title("Study")
    st.warning(f"Study {study_id} does not exist (it may have been deleted). Pick one on the Studies page.")
    st.page_link("pages/studies.py", label="All studies", icon=":material/science:")
    st.stop()

st.title(f"Study {study.id}: {md_text(study.name)}")
active = study.status not in FINISHED_STUDY_STATUSES

link_col, pause_col, cancel_col = st.columns(3)
with link_col:
    ui.copy_link_button(ui.share_link(PAGE, {"study": str(study.id)}, current_page=PAGE), key="study")
try:
    if not ui.may_write():
        pause_col.caption("Log in (in the sidebar) to pause or cancel this study.")
    elif study.status in ("queued", "running") and pause_col.button(
        "Pause", key="study_pause", icon=":material/pause:"
    ):
        pause_study(ui.db_engine(), study.id)
        st.rerun()
    elif study.status == "paused" and pause_col.button(
        "Resume", key="study_resume", icon=":material/play_arrow:"
    ):
        resume_study(ui.db_engine(), study.id)
        st.rerun()
    elif study.status == "incomplete" and pause_col.button(
        "Measure the missing candidates", key="study_measure_missing", icon=":material/replay:"
    ):
        measure_missing(ui.db_engine(), study.id)
        st.rerun()
    if active and ui.may_write():
        with cancel_col.popover("Cancel study", icon=":material/cancel:"):
            st.write("Cancelling stops the study and its queued and running runs.")
            if st.button("Cancel the study", key="study_cancel", type="primary"):
                cancel_study(ui.db_engine(), study.id)
                st.rerun()
except StudyStateError as error:
    st.warning(str(error))


RUN_LINK = st.column_config.LinkColumn("Run", display_text=r"run\?run=(\d+)")


def helped(helps: dict[str, str]) -> dict[str, Any]:
    """Column configs that give each named column its tooltip."""
    return {column: st.column_config.Column(help=text) for column, text in helps.items()}


def draw_stages(report: Report) -> None:
    """Every reached stage: its candidates table and their result blocks; a search stage's launches,
    pick and trials."""
    unit = report.objective_unit
    searches = {search.stage: search for search in report.searches}
    for stage in report.stages:
        state = "" if stage.decided else " (running)"
        st.subheader(f"{stage.index}. {md_text(stage.name)}{state}")
        st.dataframe(
            views.candidates_table(stage, unit),
            hide_index=True,
            column_config={**helped(views.candidate_help(unit)), "Run": RUN_LINK},
            key=f"stage_{stage.index}",
            placeholder=MISSING,  # a candidate still waiting has no value yet
        )
        search = searches.get(stage.index)
        if search is not None:
            draw_search(search)
        ui.lazy_box(
            "Serving commands and benchmark results",
            functools.partial(draw_blocks, stage),
            key=f"stage_{stage.index}_blocks",
        )
    if report.status in ("queued", "running") and not report.stages:
        st.info("Measuring the baseline; the first stage starts when its tuning result is in.")


def draw_blocks(stage: StageSection) -> None:
    """Each candidate's serve command and benchmark result blocks, as printed."""
    for candidate in stage.candidates:
        st.markdown(f"**{md_text(candidate.label)}**")
        if candidate.serve_command:
            ui.preformatted(candidate.serve_command, wrap=True)
        for block in candidate.blocks:
            ui.preformatted(block.text)


def draw_search(search: SearchSection) -> None:
    """A search stage's launches against its budget, why it stopped, its pick and its trials."""
    st.caption(md_text(launch_text(search)))
    for label, text in (
        ("Past the budget", search.over_budget),
        ("Stopped", search.stop),
        ("Pick", search.pick),
        ("Which knobs mattered", search.importance_note),
    ):
        if text:
            st.caption(f"{label}: {md_text(text)}")
    st.dataframe(
        views.trials_table(search), hide_index=True, key=f"trials_{search.stage}", placeholder=MISSING
    )


def draw_predictions(report: Report) -> None:
    """Each configuration's predicted figures beside its measured ones, or why there are none."""
    section = report.predictions
    if section is None:
        return
    st.header("Predictions")
    st.caption(md_text(section.line))
    if section.progress:
        st.info(md_text(section.progress), icon=":material/hourglass_top:")
    if section.rows:
        st.dataframe(table_rows(section), hide_index=True, key="study_predictions", placeholder=MISSING)


@st.fragment(run_every=LIVE_EVERY_S)
def live_runs(shown_version: str, drawn_at: float) -> None:
    """What the study's runs are doing now, polled while it is active (two small queries, so a poll
    never outlasts the next); the page is drawn again once the study or one of its runs moved on
    (:func:`views.redraw_due`; ``drawn_at`` is the ``time.monotonic()`` of the page's drawing)."""
    if views.redraw_due(shown_version, ui.study_version(study_id), time.monotonic() - drawn_at):
        st.rerun()
    with ui.session() as session:
        running = [
            (run_id, run_progress.load_progress(session, run_id))
            for run_id in views.active_runs(session, study_id)[:LIVE_RUNS_SHOWN]
        ]
    for run_id, progress in running:
        if progress is not None:
            st.markdown(f"[Run {run_id}]({run_link(run_id)}): {md_text(progress.text())}")


def draw_launches(report: Report) -> None:
    """Every launch of the study, with why it was made."""
    st.dataframe(
        views.launches_table(report),
        hide_index=True,
        column_config={**helped(views.LAUNCH_HELP), "Run": RUN_LINK},
        key="study_launches",
        placeholder=MISSING,
    )


def study_body(report: Report, charts: dict[str, dict[str, Any]], version: str) -> None:
    """The study's result as it stands (built once per version of the study); while it is active, its
    runs' progress, live."""
    facts = [
        ui.status_text(report.status or ""),
        report.phase if report.phase != report.status else "",  # a finished study's phase repeats its status
        f"model **{md_text(report.model)}**",
        f"hosts {md_text(', '.join(report.hosts))}",
        f"objective {md_text(report.objective)}",
        f"tuning profile {md_text(report.tuning)}",
    ]
    st.markdown(" · ".join(fact for fact in facts if fact))
    for note in report.notes:
        if note == SAMPLE_REPORT_NOTE:
            st.warning(note, icon=":material/science:")
        elif note != report.failure:
            st.caption(md_text(note))
    if report.failure:
        st.error(md_text(report.failure))
    if report.incomplete:
        st.warning(md_text(report.incomplete))
    if report.status not in FINISHED_STUDY_STATUSES:
        live_runs(version, time.monotonic())

    st.header("Recommended serve command")
    if report.recommended_command:
        ui.preformatted(report.recommended_command, wrap=True)
        ui.copy_button(
            report.recommended_command, key="study_command", label="Copy command", copied="Command copied"
        )
        replicas = replicas_note(report)
        if replicas is not None:
            st.caption(replicas)
    elif report.unmeasured:
        st.caption("None over candidates that could not be measured (see above).")
    else:
        st.caption(f"Not decided yet; best so far: {md_text(report.best)}.")

    st.header("Baseline vs optimized")
    st.dataframe(views.comparison_table(report), hide_index=True, key="study_comparison", placeholder=MISSING)
    note = comparison_note(report)
    if note is not None:
        st.caption(md_text(note))
    for line in per_accelerator_lines(report):
        if line:
            st.caption(line)
    if report.spread.detectable_gain_pct is not None and report.status not in FINISHED_STUDY_STATUSES:
        st.caption(views.FIRMING_UP)
    with st.expander("What the words on this page mean", icon=":material/help:"):
        st.markdown(views.terms_markdown())
    draw_predictions(report)
    st.header("Summary of Optimization Options")
    if report.summary:
        st.dataframe(
            views.summary_table(report),
            hide_index=True,
            column_config=helped(views.SUMMARY_HELP),
            key="study_summary",
            placeholder=MISSING,
        )
        note = summary_note(report)
        if note:
            st.caption(note)
    else:
        st.caption("No stage is decided yet.")

    st.header("Stages")
    draw_stages(report)

    if charts:
        st.header("Charts")
        # drawn one at a time: only the open tab's chart is sent to the browser
        ui.lazy_tabs(
            {
                views.chart_title(name): functools.partial(
                    ui.draw_spec, spec, key=f"study_{name}", file_name=f"study-{study_id}-{name}.png"
                )
                for name, spec in charts.items()
            },
            key="study_charts",
        )

    if report.launches:
        ui.lazy_box(
            f"Launches ({len(report.launches)})",
            functools.partial(draw_launches, report),
            key="study_launches_box",
        )

    st.header("Report")
    stem = f"perflab-study-{study_id}"
    ui.download_row(
        ui.Download(
            "Download report (zip)",
            lambda: zip_bytes(report_files(report)),
            f"{stem}.zip",
            "study_download_zip",
            version=f"{version} {ui.price_book()!r}",
        ),
        ui.Download("Download CSV", results_csv(report), f"{stem}.csv", "study_download_csv"),
        ui.Download("Download JSON", results_json(report), f"{stem}.json", "study_download_json"),
    )
    for caveat in report.caveats:
        st.caption(md_text(caveat))


loaded = ui.load_study(study_id)
if loaded is None:
    st.warning(f"Study {study_id} was just deleted.")
elif loaded.report is None:
    st.error(f"The stored spec of this study cannot be read: {loaded.problem}")
else:
    study_body(loaded.report, loaded.charts, loaded.version)
