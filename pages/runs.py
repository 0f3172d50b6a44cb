"""Runs: every run with status, host, accelerator, engine, model, knobs, profile (marked ``(partial)``
when its first result is) and headline figures; filter, sort and page (in SQL), select runs to compare,
and import existing results."""

from __future__ import annotations

import streamlit as st

from perflab import ui
from perflab.importers import AlreadyImported, ImportFileError, import_content
from perflab.views import run_costs, run_list, urlstate
from perflab.views.formatting import MISSING

ui.ensure_app_shell()

RUNS_TABLE_ROWS = 20
LAST_QUERY_KEY = "runs_last_query"
SELECTED_KEY = "runs_selected_order"

st.title("Runs")
deleted = st.session_state.pop("runs_deleted_note", None)
if deleted:
    st.success(deleted, icon=":material/delete:")


def import_results() -> None:
    """Upload result files and store each as runs (whole or not at all), recorded as the viewer's."""
    uploads = st.file_uploader(
        "Result files",
        accept_multiple_files=True,
        key="import_files",
        help="Each file is imported whole or not at all.",
    )
    import_label = st.text_input("Label for the imported runs (optional)", key="import_label")
    if not st.button("Import", key="import_button", disabled=not uploads) or not ui.may_write():
        return
    for upload in uploads or []:
        try:
            with ui.session() as session:
                runs = import_content(
                    session,
                    name=upload.name,
                    content=upload.getvalue(),
                    label=import_label or None,
                    queued_by=ui.queued_by(),
                )
        except ImportFileError as problem:
            st.error(str(problem))
        except AlreadyImported as known:
            st.info(str(known), icon=":material/content_copy:")
        else:
            ids = ", ".join(f"#{run.id}" for run in runs)
            st.success(f"{upload.name}: imported {len(runs)} run{'s' if len(runs) != 1 else ''} ({ids})")
    ui.clear_cached_reads()


if ui.may_write():
    # drawn when opened: its file uploader costs a reader who does not import nothing
    ui.lazy_box(
        "Import results: `vllm bench serve` JSON or text blocks, guidellm reports",
        import_results,
        key="runs_import",
    )

choices = ui.filter_choices()
# The filters live in the address (shareable): a query this page did not write itself (a pasted or
# followed link) sets the widgets.
query = {name: value for name, value in st.query_params.items() if name in run_list.QUERY_KEYS}
if query != st.session_state.get(LAST_QUERY_KEY):
    for key in run_list.QUERY_KEYS.values():
        st.session_state.pop(key, None)
    reading = run_list.read_query(query, choices)
    st.session_state.update(reading.state)
    for problem in reading.problems:
        st.info(problem, icon=":material/link_off:")

# Three filters a row, so that each box shows its choices beside the sidebar at 1024 px.
status_col, host_col, accelerator_col = st.columns(3)
engine_col, model_col, source_col = st.columns(3)
filters = run_list.RunFilters(
    status=tuple(status_col.multiselect("Status", choices["status"], key="runs_status")),
    host=tuple(host_col.multiselect("Host", choices["host"], key="runs_host")),
    accelerator=tuple(
        accelerator_col.multiselect("Accelerator", choices["accelerator"], key="runs_accelerator")
    ),
    engine=tuple(engine_col.multiselect("Engine", choices["engine"], key="runs_engine")),
    model_text=model_col.text_input("Model contains", key="runs_model"),
    source=source_col.selectbox("Source", list(run_list.SOURCE_CHOICES), key="runs_source"),
)
sort_col, order_col, size_col, page_col, columns_col = st.columns([1.3, 1.2, 1, 1, 1])
sort_label = sort_col.selectbox("Sort by", list(run_list.SORT_CHOICES), key="runs_sort")
descending = order_col.selectbox("Order", ["descending", "ascending"], key="runs_order") == "descending"
page_size = size_col.selectbox("Runs per page", run_list.PAGE_SIZES, index=1, key="runs_page_size")
page_number = page_col.number_input("Page", min_value=1, step=1, key="runs_page")
column_set = columns_col.selectbox(
    "Columns",
    list(run_list.COLUMN_SETS),
    key="runs_columns",
    help="compact: what tells runs apart (engine, knobs, profile, model) and their throughput; all: "
    "latencies, cost, host, accelerator, label, source and time too",
)
shown_query = run_list.query_from_view(
    filters,
    sort_label=sort_label,
    descending=descending,
    page_size=page_size,
    page=int(page_number),
    columns=column_set,
)
if shown_query != query:
    st.query_params.from_dict(shown_query)
st.session_state[LAST_QUERY_KEY] = shown_query

prices = ui.price_book()
with ui.session() as session:
    page = run_list.load_run_page(
        session,
        filters,
        sort_label=sort_label,
        descending=descending,
        page=int(page_number),
        page_size=page_size,
        prices=prices,
    )

if page.total == 0:
    st.info(
        "No runs match these filters."
        if filters.active
        else "No runs yet. Queue one on the Launch page, or import existing results above."
    )
    st.stop()
st.caption(page.position_text())

selection = st.dataframe(
    page.table,
    placeholder=MISSING,  # a run without a result yet: its figures read — rather than None
    key="runs_table",
    on_select="rerun",
    selection_mode="multi-row",
    hide_index=True,
    height=ui.table_height(min(len(page.run_ids), RUNS_TABLE_ROWS)),
    column_order=run_list.shown_columns(column_set, page.table),
    column_config={
        "Run": st.column_config.LinkColumn(
            "Run", display_text=r"run=(\d+)", help="Open the run page", width=50, pinned=True
        ),
        "Status": st.column_config.TextColumn(width=100),
        "Engine": st.column_config.TextColumn(width=70),
        "Knobs": st.column_config.TextColumn(
            width=150, help="the settings that differ from the engine's defaults; ×N: N replicas"
        ),
        "Profile": st.column_config.TextColumn(width=95, help="the run's first benchmark profile"),
        "Model": st.column_config.TextColumn(width=140),
        "Total tok/s": st.column_config.NumberColumn(
            format="%.2f", width=85, help="total token throughput, input + output (tok/s); — : no result yet"
        ),
        "Total tok/s per accelerator": st.column_config.NumberColumn(
            "per acc.",
            format="%.2f",
            width=75,
            help="Total tok/s divided by the accelerators the run used: compares runs of different budgets",
        ),
        "Accelerators": st.column_config.NumberColumn(
            "Acc.", format="%d", width=45, help="accelerators the run used (tp × dp × replicas)"
        ),
        "Output tok/s": st.column_config.NumberColumn(
            "Out tok/s", format="%.2f", width=80, help="output token throughput (tok/s)"
        ),
        "Mean TTFT (ms)": st.column_config.NumberColumn(
            "TTFT ms", format="%.2f", width=75, help="mean time to first token (ms)"
        ),
        "Mean TPOT (ms)": st.column_config.NumberColumn(
            "TPOT ms", format="%.2f", width=75, help="mean time per output token, first excluded (ms)"
        ),
        run_list.CACHE_HIT_COLUMN: st.column_config.NumberColumn(
            "Cache hit %",
            format="%.1f",
            width=75,
            help="the engine's prefix-cache hit rate over the first result's window (sessions and shared "
            "prefixes reuse cached prompts); — : not reported",
        ),
        run_costs.COST_COLUMN: st.column_config.NumberColumn(
            f"{prices.currency}/1M tok",
            format="%.4g",
            width=75,
            help=f"cost per 1M tokens at the measured throughput (hosts.yaml's prices, {prices.currency})",
        ),
        "Replicas": st.column_config.NumberColumn(
            format="%d",
            width=65,
            help="engine replicas that served the run; its figures are totals over all of them",
        ),
        "Host": st.column_config.TextColumn(width=190),
        "Accelerator": st.column_config.TextColumn(width=190),
        "Created": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm"),
    },
)
picked = [page.run_ids[row] for row in selection.selection.rows if row < len(page.run_ids)]
selected = run_list.selection_order(st.session_state.get(SELECTED_KEY, []), picked)
st.session_state[SELECTED_KEY] = selected
st.caption(
    f"Selected: {', '.join(f'#{run_id}' for run_id in selected)}"
    + (f" (baseline #{selected[0]}, the first picked)" if len(selected) > 1 else "")
    if selected
    else "Select rows to compare runs; the first one picked is the baseline."
)
if st.button("Compare selected", key="compare_selected", disabled=len(selected) < 2, type="primary"):
    st.switch_page("pages/compare.py", query_params=urlstate.compare_query(selected, selected[0]))
