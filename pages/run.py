"""Run (``?run=ID``): a shareable page with the run's vllm-bench text blocks, metric cards, commands,
environment, engine log, failure, a warning per partial result, live progress and a cancel button
while it runs, charts, Re-run / downloads, and deleting an ended run (with a confirmation)."""

from __future__ import annotations

import dataclasses
import functools

import streamlit as st

from db import crud
from perflab import ui
from perflab.charts import run as run_charts
from perflab.cost.figures import CostFigures
from perflab.hub.catalog import used_sample
from perflab.runner import live
from perflab.views import (
    budget,
    cards,
    distributions,
    launch,
    run_delete,
    run_detail,
    run_export,
    run_progress,
)
from perflab.views import cost as cost_views
from perflab.views.formatting import format_time

ui.ensure_app_shell()

PAGE = "run"
PROGRESS_EVERY_S = 2.0
# A re-run switches the page (and its address) to the new run, which then says where it came from.
QUEUED_NOTE_KEY = "run_queued_note"
# Said once on the Runs page after this page deleted a run.
DELETED_NOTE_KEY = "runs_deleted_note"
# A profile's tabs (only the open one is drawn): its notes, then its charts.
NOTES_TAB = "Notes"
THROUGHPUT_TAB = "Throughput and requests in flight"
LATENCY_TAB = "Latency distribution"
SCATTER_TAB = "Input length vs TTFT"

heading = st.empty()
run_id = ui.url_run_id()
if run_id is None:
    heading.title("Run")
    wanted = st.number_input("Open run id", min_value=1, step=1, value=None, key="run_open_id")
    if wanted is not None and st.button("Open", key="run_open"):
        st.query_params["run"] = str(int(wanted))
        st.rerun()
    st.stop()

loaded = ui.load_run_detail(run_id)
if loaded is None:
    heading.title("Run")
    st.warning(f"Run {run_id} does not exist (it may have been deleted). Pick a run on the Runs page.")
    st.page_link("pages/runs.py", label="All runs", icon=":material/list:")
    st.stop()

detail = loaded.detail
run = detail.run
costs = ui.load_run_costs(run.id)
# the downloads carry each result's cost and energy figures beside its own
priced = dataclasses.replace(detail, profiles=cost_views.priced_views(detail.profiles, costs))
heading.title(run.title)
facts = [
    ui.status_text(run.status) + (" (cancel requested)" if run.cancel_requested and not run.finished else ""),
    f"host **{run.host_display}**" if run.host_name else "",
    run.accelerator or "accelerator unknown",
    " ".join(part for part in (run.engine, run.model) if part) or "engine unknown",
    run.knobs_summary or "",  # ends with ×N for N replicas
    f"source {run.source}" + (f" ({run.imported_from})" if run.imported_from else ""),
    f"created {format_time(run.created_at)}" + (f" by {run.queued_by}" if run.queued_by else ""),
]
st.markdown(" · ".join(part for part in facts if part.strip()))
if run.simulated:
    scaled = (
        f" Its clock ran {run.time_scale:g} × faster than the modelled engine (the host's time_scale): "
        f"latencies, energies and costs per token read {run.time_scale:g} × smaller, throughputs (per second "
        f"and per joule) {run.time_scale:g} × higher than the modelled accelerator's."
        if run.time_scale
        else ""
    )
    st.caption(
        "Simulated host: the figures come from perflab's simulated engine, not from real accelerators."
        + scaled
    )

# The note stays on the queued run's page through its live reruns, until another run is shown.
queued_for, queued_note = st.session_state.get(QUEUED_NOTE_KEY, (None, None))
if queued_for == run.id:
    st.success(queued_note)
else:
    st.session_state.pop(QUEUED_NOTE_KEY, None)
blocker = ui.write_blocker("re-run it") or launch.rerun_blocker(run)
with ui.button_row():
    ui.copy_link_button(ui.share_link(PAGE, {"run": str(run.id)}, current_page=PAGE), key="run")
    rerun_clicked = st.button(
        "Re-run", key="run_rerun", icon=":material/replay:", disabled=blocker is not None, help=blocker
    )
    ui.download(
        ui.Download(
            "Download JSON",
            lambda: run_export.run_json(priced),
            f"perflab-run-{run.id}.json",
            "run_download_json",
            version=f"{loaded.version} {ui.price_book()!r}",
        )
    )
    ui.download(
        ui.Download(
            "Download CSV",
            run_export.run_csv(priced),
            f"perflab-run-{run.id}.csv",
            "run_download_csv",
        )
    )
if rerun_clicked and ui.may_write():
    with ui.session() as session:
        queued = launch.rerun(session, run, queued_by=ui.queued_by())
    ui.clear_cached_reads()
    st.session_state[QUEUED_NOTE_KEY] = (
        queued.id,
        f"Queued run {queued.id} with the same host, config and profiles.",
    )
    st.query_params["run"] = str(queued.id)
    st.rerun()

if run.status == "failed":
    st.error(f"**{run.failure_class or 'failed'}**: {run.failure_message or 'no reason was recorded'}")
elif run.status == "cancelled":
    st.warning(run.failure_message or "This run was cancelled.")
for warning in detail.result_warnings():
    st.warning(warning, icon=":material/warning:")


@st.fragment(run_every=PROGRESS_EVERY_S)
def live_progress(shown_status: str) -> None:
    """The run's progress, polled while it is queued or in flight; reloads the page when it moves on."""
    with ui.session() as session:
        progress = run_progress.load_progress(session, run_id)
    if progress is None or progress.status != shown_status:
        st.rerun()
    st.progress(progress.fraction, text=progress.text())
    series = live.live_frame(progress.history)
    if not series.empty:
        st.altair_chart(run_charts.live_timeline(series), width="stretch")
        st.caption(
            f"Live, from the benchmark's progress: requests completed per second and the mean end-to-end "
            f"latency of the requests that ended, each over the last {live.SMOOTHING_S:g} s (measured); "
            "the full latency distributions appear when the profile ends."
        )


if not run.finished:
    live_progress(run.status)
if run.finished and ui.may_write():
    with st.expander("Delete this run"):
        with ui.session() as session:
            delete_blocker = run_delete.delete_blocker(session, run.id)
        if delete_blocker is not None:
            st.caption(delete_blocker)
        else:
            sure = st.checkbox(
                f"Yes, delete run {run.id} with its results, request records and samples",
                key=f"run_delete_confirm_{run.id}",
            )
            if st.button("Delete run", key=f"run_delete_{run.id}", disabled=not sure, type="primary"):
                try:
                    with ui.session() as session:
                        run_delete.delete_run(session, run.id)
                except run_delete.RunNotDeletable as refused:
                    st.error(str(refused))
                else:
                    ui.clear_cached_reads()
                    st.session_state[DELETED_NOTE_KEY] = f"Deleted run {run.id}."
                    st.switch_page("pages/runs.py")
if not run.finished and ui.may_write():
    with st.expander("Cancel this run"):
        confirmed = st.checkbox("Yes, stop this run (its engine is stopped too)", key="run_cancel_confirm")
        if st.button("Cancel run", key="run_cancel", disabled=not confirmed):
            with ui.session() as session:
                crud.request_cancel(session, run_id=run.id)
            ui.clear_cached_reads()
            st.rerun()


def draw_costs(figures: CostFigures) -> None:
    """A result's cost and energy cards, and what they are priced at."""
    ui.metric_cards(cost_views.cost_cards(figures))
    st.caption(f"Cost: {cost_views.price_text(figures)} · {figures.energy_text}")


def draw_profile(profile: run_detail.ProfileView) -> None:
    """One profile's cards, text block and charts."""
    ui.metric_cards(cards.metric_cards(profile.result, run.replicas))
    accelerators = budget.accelerator_text(run, profile.result)
    if accelerators:
        st.caption(accelerators)
    if profile.id in costs:
        draw_costs(costs[profile.id])
    for note in profile.notes:
        if used_sample([note]):
            st.warning(note, icon=":material/science:")
    if profile.text_block:
        ui.preformatted(profile.text_block)
    else:
        st.caption("No text block: this result lacks fields the vllm-bench summary needs.")
    draw_profile_views(profile)


def draw_profile_notes(profile: run_detail.ProfileView) -> None:
    """How the result's figures were counted, and the benchmark's remarks on its dataset."""
    for note in profile.definition_notes:
        st.caption(note)
    other_notes = [note for note in profile.notes if not used_sample([note])]
    if other_notes:
        st.caption("Benchmark notes: " + "; ".join(other_notes))
    if profile.records.empty:
        st.caption("No per-request records (an imported summary): no latency distributions to draw.")


def draw_profile_views(profile: run_detail.ProfileView) -> None:
    """A profile's notes and charts, one tab at a time: the notes first, each chart built and drawn
    only when its tab is opened."""
    views = {NOTES_TAB: lambda: draw_profile_notes(profile)}
    if not profile.timeline.empty:
        views[THROUGHPUT_TAB] = lambda: draw_profile_chart(profile, "throughput", "throughput")
    if not profile.records.empty:
        views[LATENCY_TAB] = lambda: draw_latency_distribution(profile)
        views[SCATTER_TAB] = lambda: draw_profile_chart(profile, "scatter", "ttft-scatter")
    if len(views) == 1:  # nothing to chart (an imported summary)
        draw_profile_notes(profile)
    else:
        ui.lazy_tabs(views, key=f"run_charts_{profile.id}")


def draw_profile_chart(profile: run_detail.ProfileView, chart: str, file_part: str) -> None:
    """One of a profile's charts with its PNG download."""
    ui.run_chart(
        loaded,
        chart,
        profile_id=profile.id,
        key=f"{chart}_{profile.id}",
        file_name=f"run-{run.id}-{profile.name}-{file_part}.png",
    )


def draw_latency_distribution(profile: run_detail.ProfileView) -> None:
    """The histogram and CDF of one latency metric of a profile's requests (picked in a box)."""
    metric = st.selectbox(
        "Metric",
        distributions.DISTRIBUTION_METRICS,
        format_func=distributions.metric_label,
        key=f"run_latency_metric_{profile.id}",
    )
    if not distributions.has_values(profile.records, metric):
        st.caption("No successful request has this metric.")
        return
    for column, chart in zip(st.columns(2), ("histogram", "cdf"), strict=True):
        with column:
            ui.run_chart(
                loaded,
                chart,
                profile_id=profile.id,
                metric=metric,
                key=f"{chart}_{profile.id}",
                file_name=f"run-{run.id}-{profile.name}-{metric}-{chart}.png",
            )


st.header("Results")
if not detail.profiles:
    st.info(
        "No results yet: each profile's results appear when its benchmark ends (its live progress is above)."
        if not run.finished
        else "This run stored no benchmark result."
    )
elif len(detail.profiles) == 1:
    draw_profile(detail.profiles[0])
else:
    ui.lazy_tabs(
        {profile.marked_title: functools.partial(draw_profile, profile) for profile in detail.profiles},
        key="run_profile",
    )

if run_charts.has_samples(detail.samples) and not (
    run_charts.has_engine_samples(detail.samples) or run_charts.has_accelerator_samples(detail.samples)
):
    st.caption(
        "Engine and accelerator samples: too few to draw (the run was shorter than the sampling interval)."
    )
telemetry = [
    (name, chart)
    for name, chart, present in (
        ("Engine queue and KV-cache", "engine", run_charts.has_engine_samples(detail.samples)),
        ("Accelerator telemetry", "accelerators", run_charts.has_accelerator_samples(detail.samples)),
    )
    if present
]


def draw_telemetry() -> None:
    """The engine's queue and KV-cache, and the accelerators' telemetry, over the run."""
    for name, chart in telemetry:
        st.subheader(name)
        ui.run_chart(loaded, chart, key=chart, file_name=f"run-{run.id}-{chart}.png")


def draw_commands() -> None:
    """The serve command(s), the benchmark commands and their ``vllm bench serve`` equivalents."""
    if run.serve_commands:
        st.caption("Serve command" + ("s (one per replica)" if len(run.serve_commands) > 1 else ""))
        for command in run.serve_commands:
            st.code(command, language="bash")
    elif detail.planned_command is not None:
        if detail.planned_command.command:
            st.caption("Serve command (as it will be launched)")
            st.code(detail.planned_command.command, language="bash")
        else:
            st.warning(detail.planned_command.error)
    else:
        st.caption("No serve command was recorded.")
    if run.bench_commands:
        st.caption("Benchmark command" + ("s" if len(run.bench_commands) > 1 else ""))
        for command in run.bench_commands:
            st.code(command, language="bash", wrap_lines=True)
    if detail.vllm_bench_commands:
        st.caption(
            "The same requests as `vllm bench serve`"
            + (" (one command per profile)" if len(detail.vllm_bench_commands) > 1 else "")
            + ": runs unchanged under `perflab bench` too."
        )
        for command in detail.vllm_bench_commands:
            st.code(command, language="bash", wrap_lines=True)


def draw_environment() -> None:
    if run.environment:
        st.json(run.environment)
    else:
        st.caption("No environment was recorded.")


def draw_log_tail() -> None:
    if run.log_tail:
        st.code(run.log_tail, language=None)
    else:
        st.caption("No engine log was recorded.")


# Drawn when opened (the engine log of a failed run is open from the start): their charts and code
# blocks cost a reader who does not ask for them nothing.
if telemetry:
    ui.lazy_box("Engine and accelerator samples", draw_telemetry, key="run_telemetry")
ui.lazy_box(
    "Commands: serve, benchmark, and the same requests as vllm bench serve", draw_commands, key="run_commands"
)
ui.lazy_box("Environment snapshot", draw_environment, key="run_environment")
ui.lazy_box("Engine log tail", draw_log_tail, key="run_log_tail", expanded=run.status == "failed")
ui.lazy_box("Lifecycle", lambda: st.markdown(run_detail.lifecycle_markdown(run)), key="run_lifecycle")
