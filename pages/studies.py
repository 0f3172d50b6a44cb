"""Studies: every optimization study with its status, and a new study from a form or an uploaded spec."""

from __future__ import annotations

import streamlit as st

from db import crud
from perflab import ui
from perflab.engines import ENGINE_NAMES
from perflab.markdown_text import md_text
from perflab.profiles import PRESETS
from perflab.study import views
from perflab.study.coordinator import create_study
from perflab.study.hosts import StudyHostError
from perflab.study.spec import OBJECTIVES, StudySpec, StudySpecError, resolve_profile
from perflab.views import datasets as dataset_views
from perflab.views.formatting import MISSING

ui.ensure_app_shell()

DEFAULT_MODEL = "Qwen/Qwen3-8B"
DEFAULT_VALIDATION = ["very_long", "long", "medium", "short"]

st.title("Studies")
st.caption(
    "A study tunes one model on your hosts the way the performance-lab write-ups do: each stage tries its "
    "candidates on top of the best configuration so far and keeps the winner; then the baseline and the "
    "winner run the validation profiles."
)

with ui.session() as session:
    table = views.studies_table(session)
if table.empty:
    st.info("No studies yet. Describe one below, or upload a study spec (YAML or JSON).")
else:
    table.insert(1, "Open", "/study?study=" + table["Study"].astype(str))
    st.dataframe(
        table,
        hide_index=True,
        column_config={"Open": st.column_config.LinkColumn("Open", display_text="open")},
        key="studies_table",
        placeholder=MISSING,
    )

st.header("New study")
ui.require_login("start a study")
inventory = ui.inventory_or_stop()


def start(spec: StudySpec) -> None:
    """Store the study and point at its page (the worker picks it up)."""
    try:
        study = create_study(ui.db_engine(), spec, inventory=inventory, queued_by=ui.queued_by() or "web")
    except (StudySpecError, StudyHostError) as error:
        st.error(md_text(str(error)))
        return
    ui.clear_cached_reads()
    st.success(f"Study {study.id} queued: {md_text(study.name)}.")
    st.page_link(
        "pages/study.py",
        label=f"Follow study {study.id}",
        query_params={"study": str(study.id)},
        icon=":material/arrow_forward:",
    )


defaults = views.form_defaults(inventory, DEFAULT_MODEL)
with ui.session() as session:
    profile_choices = dataset_views.profile_choices(list(PRESETS), crud.list_datasets(session))
form_tab, upload_tab = st.tabs(["Form", "Upload a spec"])


def use_method() -> None:
    """Start the stages box from the chosen method's template."""
    method = st.session_state["study_method"]
    st.session_state["study_stages"] = views.stages_template(method, DEFAULT_MODEL, defaults.gpus)


st.session_state.setdefault("study_stages", views.stages_template("stages", DEFAULT_MODEL, defaults.gpus))
with form_tab:
    st.radio(
        "Method",
        list(views.METHODS),
        format_func=views.METHODS.__getitem__,
        key="study_method",
        on_change=use_method,
        help="Stages are cheap and easy to read but greedy; a search finds interacting knobs' optimum "
        "in a fraction of a grid's launches (docs/studies.md).",
    )
with form_tab, st.form("new_study"):
    name = st.text_input("Name", value=defaults.name, key="study_name")
    model = st.text_input("Model", value=DEFAULT_MODEL, key="study_model")
    hosts = st.multiselect("Hosts", inventory.names(), default=inventory.names()[:1], key="study_hosts")
    engine = st.selectbox("Baseline engine", ENGINE_NAMES, key="study_engine")
    tuning = st.selectbox(
        "Tuning profile",
        list(profile_choices),
        key="study_tuning",
        help="A preset, or a dataset uploaded on the Datasets page (prompts, or multi-turn sessions: "
        "every session once, at most 64 in flight).",
    )
    validation = st.multiselect(
        "Validation profiles",
        list(profile_choices),
        default=[p for p in DEFAULT_VALIDATION if p in PRESETS],
        key="study_validation",
    )
    objective = st.selectbox(
        "Objective", list(OBJECTIVES), format_func=OBJECTIVES.__getitem__, key="study_objective"
    )
    scale_col, success_col, gain_col = st.columns(3)
    scale = scale_col.number_input(
        "Prompt scale",
        min_value=0.01,
        max_value=1.0,
        value=defaults.scale,
        step=0.05,
        key="study_scale",
        help="Fraction of every profile's prompts (1 = the presets as published). " + views.SCALE_HELP,
    )
    chosen = [resolve_profile(profile_choices[label]) for label in [tuning, *validation]]
    for warning in views.scale_warnings(scale, chosen):
        scale_col.warning(md_text(warning))
    min_success = success_col.number_input(
        "Minimum success rate (%)", min_value=1.0, max_value=100.0, value=100.0, key="study_min_success"
    )
    min_gain = gain_col.number_input("Minimum gain kept (%)", min_value=0.0, value=1.0, key="study_min_gain")
    gpus_col, repeats_col, relaunches_col = st.columns(3)
    gpus = gpus_col.number_input(
        "Accelerators per configuration (0 = the node of the smallest host)",
        min_value=0,
        max_value=64,
        value=0,
        key="study_gpus",
        help=defaults.gpus_help,
    )
    repeats = repeats_col.number_input(
        "Runs per launch",
        min_value=1,
        max_value=20,
        value=1,
        key="study_repeats",
        help="Repeat the tuning profile on the same launch after its warm-up (run-to-run noise).",
    )
    relaunches = relaunches_col.number_input(
        "Launches per configuration",
        min_value=1,
        max_value=10,
        value=1,
        key="study_relaunches",
        help=views.relaunches_help(),
    )
    stages_yaml = st.text_area(
        "Stages (YAML)",
        height=320,
        key="study_stages",
        help="Each stage: a name, an optional dimension (a config field) and candidate values or mappings; "
        "or a search: knobs, parallelism layouts, a budget.",
    )
    submitted = st.form_submit_button("Create study")
if submitted:
    try:
        form_spec = views.spec_from_form(
            name=name,
            model=model,
            hosts=hosts,
            engine=engine,
            tuning_profile=profile_choices[tuning],
            validation_profiles=[profile_choices[label] for label in validation],
            stages_yaml=stages_yaml,
            objective=objective,
            scale=scale,
            min_success_pct=min_success,
            min_gain_pct=min_gain,
            gpus=int(gpus),
            repeats=int(repeats),
            relaunches=int(relaunches),
        )
    except StudySpecError as error:
        st.error(
            "The study cannot start:\n\n" + "\n".join(f"- {md_text(problem)}" for problem in error.problems)
        )
    else:
        start(form_spec)

with upload_tab:
    uploaded = st.file_uploader("Study spec", type=["yaml", "yml", "json"], key="study_upload")
    if uploaded is not None and st.button("Create study from file", key="study_upload_create"):
        try:
            uploaded_spec = views.spec_from_upload(uploaded.name, uploaded.getvalue())
        except StudySpecError as error:
            st.error(
                "The spec cannot be used:\n\n"
                + "\n".join(f"- {md_text(problem)}" for problem in error.problems)
            )
        else:
            start(uploaded_spec)
