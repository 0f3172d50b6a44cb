"""Datasets: upload a prompt set (JSONL, CSV, ShareGPT JSON, plain text) or multi-turn sessions (the
agentic-trace JSONL or JSON forms), validated with the bench's own readers with clear errors and
stored once by content; preview it (prompts, or sessions with their turns' lengths), see its lengths
in tokens (per prompt, or per turn), delete it. Stored datasets are offered as custom profiles on the
Launch page and as profiles in the new-study form."""

from __future__ import annotations

import streamlit as st

from db import crud
from perflab import ui
from perflab.charts.datasets import length_histogram
from perflab.datasets import MAX_UPLOAD_BYTES, DatasetUploadError, load_tokenizer, parse_upload, store_dataset
from perflab.hub.catalog import SHAREGPT, hub_file
from perflab.hub.client import HubError, HubFile
from perflab.settings import hub_cache_dir
from perflab.views import datasets as dataset_views
from perflab.views.formatting import MISSING, format_bytes, format_number

ui.ensure_app_shell()

st.title("Datasets")
ui.require_login("see and upload datasets")

with st.expander("Upload a dataset", expanded=True):
    st.caption(
        "Prompts: JSON lines with a `prompt` field (optional `output_len`), CSV with a `prompt` column, "
        "a ShareGPT JSON array, or plain text with one prompt per line. "
        "Multi-turn sessions (agentic traces): JSON lines with one conversation per line, "
        '`[turn, …]` or `{"turns": [...]}`, each turn `{"messages": [...], "output_len": …}` holding the '
        "system, user or tool messages it adds (the server writes the assistant's), or SGLang's JSON "
        '`{"conversations": [...]}` (docs/workloads.md). '
        f"Up to {format_bytes(MAX_UPLOAD_BYTES)}, UTF-8."
    )
    upload = st.file_uploader(
        "Prompt or session file", type=["jsonl", "csv", "json", "txt"], key="dataset_file"
    )
    name_col, tokenizer_col = st.columns(2)
    name = name_col.text_input("Name", placeholder="defaults to the file name", key="dataset_name")
    tokenizer_path = tokenizer_col.text_input(
        "Tokenizer for lengths (optional)",
        placeholder="tokenizer.json or model directory on this machine",
        help="Without one, lengths are estimated at four characters per token.",
        key="dataset_tokenizer",
    )
    note = st.text_area(
        "Owner note", placeholder="who it belongs to, what traffic it stands for", key="dataset_note"
    )
    if st.button("Store dataset", key="dataset_store", type="primary", disabled=upload is None):
        content = upload.getvalue()
        try:
            tokenizer = load_tokenizer(tokenizer_path) if tokenizer_path.strip() else None
            parsed = parse_upload(upload.name, content, tokenizer=tokenizer)
        except DatasetUploadError as problem:
            st.error(str(problem))
        else:
            with ui.session() as session:
                dataset, created = store_dataset(
                    session,
                    parsed,
                    content,
                    name=name or upload.name,
                    owner_note=note,
                    created_by=ui.queued_by(),
                )
            ui.clear_cached_reads()
            counted = "counted with the tokenizer" if parsed.lengths_source == "tokenizer" else "estimated"
            held = (
                f"{parsed.num_prompts} sessions of {len(parsed.prompts)} turns"
                if parsed.sessions
                else f"{parsed.num_prompts} prompts"
            )
            if created:
                st.success(f"Stored '{dataset.name}': {held}, lengths {counted}.")
            else:
                st.info(
                    f"This content is already stored as '{dataset.name}' (#{dataset.id}); nothing was added."
                )

HUB_POLL_S = 1.0


@st.fragment(run_every=HUB_POLL_S)
def hub_progress(file: HubFile) -> None:
    """The download of ``file`` as it goes; stops polling once it ended."""
    state = ui.hub_downloads().state(file)
    if state is None:
        return
    if state.error:
        st.error(state.error)
    elif state.result is not None:
        st.success(
            f"Fetched {file.ref} ({format_bytes(state.result.size)}, checksum verified)"
            if state.result.downloaded
            else f"{file.ref} was already cached and matches the hub."
        )
    else:
        shown = f"{format_bytes(state.done)} of {format_bytes(state.total)}" if state.total else "starting"
        st.progress(state.fraction, text=f"Downloading {file.ref}: {shown}")


with st.expander("Hugging Face hub datasets", expanded=False):
    st.caption(
        "ShareGPT profiles use the ShareGPT dump from the Hugging Face hub; other hub files can be named "
        "as `hf://datasets/<owner>/<name>/<path>` in a profile. They are fetched into "
        f"`{hub_cache_dir()}` with their checksum verified (hub: {ui.hub_endpoint_text()})."
    )
    st.markdown(dataset_views.hub_status(SHAREGPT, hub_cache_dir()))
    hub_ref = st.text_input("Hub file", value="sharegpt", key="dataset_hub_ref")
    if st.button("Fetch from the hub", key="dataset_hub_fetch"):
        try:
            wanted = hub_file(hub_ref.strip())
        except HubError as problem:
            st.error(str(problem))
        else:
            if wanted is None:
                st.error(
                    f"{hub_ref!r} is not a hub file: use sharegpt or hf://datasets/<owner>/<name>/<path>."
                )
            else:
                ui.hub_downloads().start(wanted, cache_dir=hub_cache_dir())
                st.session_state["dataset_hub_shown"] = wanted
    shown_download = st.session_state.get("dataset_hub_shown")
    if shown_download is not None:
        hub_progress(shown_download)

with ui.session() as session:
    stored = crud.list_datasets(session)
if not stored:
    st.info("No datasets yet. Upload one above to benchmark with your own prompts.")
    st.stop()

st.subheader("Stored datasets")
st.dataframe(dataset_views.datasets_table(stored), hide_index=True, placeholder=MISSING)
labels = {dataset_views.dataset_choice_label(dataset): dataset for dataset in stored}
chosen = labels[st.selectbox("Dataset", list(labels), key="dataset_selected")]
preview = ui.dataset_preview(chosen.id, chosen.content_hash)
if preview is None:
    st.warning("This dataset was just deleted.")
    st.stop()

sessions = dataset_views.holds_sessions(chosen)
unit = "tokens per turn" if sessions else "tokens"
sessions_line = dataset_views.sessions_summary(chosen)
if sessions_line:
    st.markdown(sessions_line)
summary = dataset_views.length_summary(chosen.prompt_token_lengths)
columns = st.columns(len(summary) or 1)
for column, (statistic, value) in zip(columns, summary.items(), strict=False):
    column.metric(f"{statistic} {unit}", format_number(value, decimals=0 if statistic != "mean" else 1))
if summary:
    ui.chart(
        length_histogram(
            dataset_views.lengths_frame(chosen.prompt_token_lengths), per="Turn" if sessions else "Prompt"
        ),
        key="lengths",
        file_name=f"dataset-{chosen.id}-lengths.png",
    )
st.caption("Preview: the first sessions, turn by turn" if sessions else "Preview")
st.dataframe(
    preview,
    hide_index=True,
    placeholder=MISSING,
    column_config={
        "Output len": st.column_config.NumberColumn(
            help="the prompt's own output length; — : none, the profile's output tokens apply"
        ),
        **{
            column: st.column_config.Column(help=text)
            for column, text in dataset_views.SESSION_COLUMNS.items()
        },
    },
)
st.caption(
    f"Use it on the Launch page (Custom profile → Dataset → {dataset_views.dataset_choice_label(chosen)}) "
    f"or as a profile of a new study (reference `{chosen.content_hash[:12]}…`)."
)

with st.expander("Delete this dataset"):
    sure = st.checkbox(f"Yes, delete '{chosen.name}'", key=f"dataset_delete_confirm_{chosen.id}")
    if st.button("Delete", key=f"dataset_delete_{chosen.id}", disabled=not sure):
        with ui.session() as session:
            crud.delete_dataset(session, dataset_id=chosen.id)
        ui.clear_cached_reads()
        st.rerun()
