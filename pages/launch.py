"""Launch: pick a host, engine, model and knobs, see the serve command live, pick benchmark profiles
(the seeds' presets and custom ones, incl. uploaded datasets), queue the run and follow it."""

from __future__ import annotations

from typing import Any

import streamlit as st

from db import crud
from db.models import FINISHED_RUN_STATUSES
from perflab import ui
from perflab.datasets import profile_dataset
from perflab.engines import ENGINE_NAMES, EngineConfigError, get_adapter
from perflab.engines.preflight import default_cache, host_adapter
from perflab.probe.cpu import is_cpu_host
from perflab.views import hosts, launch, preflight, run_progress
from perflab.views.commands import command_preview
from perflab.views.datasets import dataset_choice_label, holds_sessions
from perflab.views.formatting import format_time

ui.ensure_app_shell()

RANDOM_DATASET = "random (exact token lengths)"
SCALES: dict[str, float] = {
    "all prompts": 1.0,
    "half": 0.5,
    "10 %": 0.1,
    "2 % (quick demo)": 0.02,
}
PROGRESS_EVERY_S = 2.0

st.title("Launch a run")
ui.require_login("queue runs")
inventory = ui.inventory_or_stop()
if not len(inventory):
    st.info(f"No hosts in {inventory.path}. Add one (see the comments at the top of hosts.yaml).")
    st.stop()

st.subheader("Where and what")
choices = hosts.host_choices(inventory)
# Wide enough for "local-sim (simulated)" beside the sidebar at 1024 px; the boxes of a row line up
# even where a label wraps to two lines.
host_col, engine_col, model_col = st.columns([1.6, 1, 2], vertical_alignment="bottom")
host = choices[host_col.selectbox("Host", list(choices), key="launch_host")]
engine = engine_col.selectbox(
    "Engine", ENGINE_NAMES, format_func=lambda name: get_adapter(name).display_name, key="launch_engine"
)
model = model_col.text_input("Model (hub id or path on the host)", value="Qwen/Qwen3-8B", key="launch_model")
with ui.session() as session:
    target = hosts.host_view(host, crud.get_host(session, name=host.name))
if target.probe is not None:
    st.caption(
        f"{target.status.accelerator_summary()} · engines: {target.status.engine_summary()} "
        f"(probed {format_time(target.probed_at)}; re-probe on the Hosts page)"
    )
else:
    st.caption("Not probed yet: the Hosts page lists its accelerators and engine versions.")
if host.simulated:
    st.caption("Simulated host: engines and accelerators are answered by perflab's simulator.")
source_col, image_col = st.columns([1, 2], vertical_alignment="bottom")
image_source = source_col.selectbox(
    "Run the engine from", launch.image_sources(engine), key="launch_image_source"
)
image = ""
if image_source != launch.HOST_INSTALL:
    image = image_col.text_input(
        "Container image (edit the tag)",
        value=launch.image_default(engine, image_source),
        placeholder="registry/name:tag",
        key=f"launch_image_{engine}_{image_source}",
        help="Started with the host's podman or docker (hosts.yaml container_runtime, else the one found).",
    )
    if target.probe is not None:
        st.caption(f"Container runtimes on the host: {hosts.container_runtimes_text(target.probe)}")

st.subheader("Knobs")
st.caption("Leave a knob empty for the engine's default.")
tp_col, dp_col, ep_col, replicas_col, gpus_col = st.columns(5, vertical_alignment="bottom")
text_cols = st.columns(5, vertical_alignment="bottom")
number_cols = st.columns(4, vertical_alignment="bottom")
switch_cols = st.columns(2, vertical_alignment="bottom")
cpu_knobs: dict[str, object] = {}


def word_input(column: Any, label: str, field: str) -> str:
    """A text knob whose help lists the words the engine accepts for ``field``."""
    version = preflight.probed_version(target.probe, engine)
    words = launch.accepted_words(engine, field, host=host.name, version=version, cache=default_cache())
    return column.text_input(label, key=f"launch_{field}", help=words)


if target.probe is not None and is_cpu_host(target.probe.accelerators):
    st.caption("CPU host: vLLM's CPU build serves here; its knobs are environment variables.")
    cpu_cols = st.columns(3)
    cpu_knobs = {
        "cpu_kvcache_space_gib": cpu_cols[0].number_input(
            "KV cache GiB (VLLM_CPU_KVCACHE_SPACE)", min_value=1, value=None, key="launch_cpu_kvcache"
        ),
        "cpu_omp_threads_bind": cpu_cols[1].text_input(
            "Thread binding (VLLM_CPU_OMP_THREADS_BIND)", placeholder="auto", key="launch_cpu_bind"
        ),
        "cpu_reserved_cores": cpu_cols[2].number_input(
            "Reserved cores (VLLM_CPU_NUM_OF_RESERVED_CPU)",
            min_value=0,
            value=None,
            key="launch_cpu_reserved",
        ),
    }
form = launch.ConfigForm(
    engine=engine,
    model=model,
    tp=int(tp_col.number_input("TP", min_value=1, value=1, key="launch_tp")),
    dp=int(dp_col.number_input("DP", min_value=1, value=1, key="launch_dp")),
    ep=int(ep_col.number_input("EP", min_value=1, value=1, key="launch_ep")),
    replicas=int(replicas_col.number_input("Replicas", min_value=1, value=1, key="launch_replicas")),
    gpu_ids=gpus_col.text_input("GPU ids", placeholder="0,1,2,3", key="launch_gpu_ids"),
    quantization=word_input(text_cols[0], "Quantization", "quantization"),
    attention_backend=word_input(text_cols[1], "Attention backend", "attention_backend"),
    kv_cache_dtype=word_input(text_cols[2], "KV-cache dtype", "kv_cache_dtype"),
    performance_mode=word_input(text_cols[3], "Performance mode", "performance_mode"),
    reasoning_parser=text_cols[4].text_input("Reasoning parser", key="launch_reasoning_parser"),
    max_num_batched_tokens=number_cols[0].number_input(
        "Max batched tokens", min_value=1, value=None, step=1024, key="launch_max_num_batched_tokens"
    ),
    max_num_seqs=number_cols[1].number_input(
        "Max num seqs", min_value=1, value=None, key="launch_max_num_seqs"
    ),
    max_model_len=number_cols[2].number_input(
        "Max model len", min_value=1, value=None, key="launch_max_model_len"
    ),
    gpu_memory_utilization=number_cols[3].number_input(
        "GPU memory utilisation",
        min_value=0.05,
        max_value=1.0,
        value=None,
        step=0.05,
        key="launch_gpu_memory_utilization",
    ),
    enable_prefix_caching=switch_cols[0].selectbox(
        "Prefix caching", list(launch.TRISTATE), key="launch_prefix_caching"
    ),
    enable_chunked_prefill=switch_cols[1].selectbox(
        "Chunked prefill", list(launch.TRISTATE), key="launch_chunked_prefill"
    ),
    speculative_config=st.text_input(
        "Speculative config (JSON)",
        placeholder='{"method": "mtp", "num_speculative_tokens": 2}',
        key="launch_speculative",
    ),
    extra_args=st.text_input("Extra arguments", placeholder="--enforce-eager", key="launch_extra_args"),
    env=st.text_area("Environment (NAME=value per line)", height=68, key="launch_env"),
    image=image,
    **cpu_knobs,  # type: ignore[arg-type]
)

st.subheader("Serve command")
config = None
try:
    config = launch.build_config(form)
except launch.LaunchInputError as problem:
    st.error(str(problem))
else:
    judge = host_adapter(
        config.engine,
        host=host.name,
        version=preflight.probed_version(target.probe, config.engine),
        cache=default_cache(),
        image=config.image,
    )
    preview = command_preview(config, judge)
    if preview.command:
        ui.preformatted(preview.command, wrap=True)
        if config.image is not None:
            st.caption(
                f"Runs inside {config.image}: perflab adds the container's devices, mounts, network and "
                "--env-file for the host's secrets (docs/engines.md, Containers)."
            )
    else:
        st.error(preview.error)
        config = None
if config is not None and st.button(
    "Check against the host's engine",
    key="launch_preflight",
    help="Asks the engine installed on the host (its own parser, else its --help) whether it accepts every "
    "flag and value, as the worker does before launching.",
):
    with st.spinner(f"Asking {get_adapter(config.engine).display_name} on {host.name}…"):
        verdict = preflight.check_config(host, config, preflight.probed_version(target.probe, config.engine))
    getattr(st, verdict.level)(verdict.text)

st.subheader("Benchmark profiles")
presets = launch.preset_choices()
picked = st.multiselect(
    "Presets (from the seed studies)",
    list(presets),
    default=[launch.default_preset_choice()],
    key="launch_presets",
)
profiles = [presets[name] for name in picked]
with ui.session() as session:
    datasets = crud.list_datasets(session)
dataset_options = {RANDOM_DATASET: None, **{dataset_choice_label(dataset): dataset for dataset in datasets}}
with st.expander("Custom profile", expanded=False):
    add_custom = st.checkbox("Add a custom profile", key="launch_custom_enabled")
    name_col, dataset_col = st.columns([1, 2])
    custom_name = name_col.text_input("Name", value="custom", key="launch_custom_name")
    dataset_label = dataset_col.selectbox(
        "Dataset",
        list(dataset_options),
        key="launch_custom_dataset",
        help="Upload your own on the Datasets page.",
    )
    stored_dataset = dataset_options[dataset_label]
    sessions = stored_dataset is not None and holds_sessions(stored_dataset)
    in_col, out_col, count_col, rate_col, concurrency_col = st.columns(5)
    if stored_dataset is None:
        input_len = int(
            in_col.number_input("Input tokens", min_value=1, value=1024, key="launch_custom_input_len")
        )
    else:
        input_len = None
        in_col.caption(
            "Input: each turn's messages, after the history (sessions)."
            if sessions
            else "Input lengths: the dataset's own prompts."
        )
    with_lengths, held = (
        ui.dataset_output_length_counts(stored_dataset.id, stored_dataset.content_hash)
        if stored_dataset is not None and not sessions
        else (0, 0)
    )
    lengths_note = launch.SESSION_OUTPUT_NOTE if sessions else launch.output_length_note(with_lengths, held)
    own_lengths_only = bool(held) and with_lengths >= held
    output_len = out_col.number_input(
        "Output tokens",
        min_value=1,
        value=None if sessions else 128,
        key=f"launch_custom_output_len{'_sessions' if sessions else ''}",
        disabled=own_lengths_only,
        help=lengths_note,
    )
    if lengths_note:
        out_col.caption(lengths_note)
    # Each dataset has its own prompt count, so picking another one starts from its size.
    num_prompts = int(
        count_col.number_input(
            "Sessions" if sessions else "Prompts",
            min_value=1,
            value=launch.DEFAULT_PROMPTS if stored_dataset is None else stored_dataset.num_prompts,
            key=f"launch_custom_num_prompts_{stored_dataset.id if stored_dataset else 'random'}",
            help="Sessions sent, each turn after the reply to the last" if sessions else None,
        )
    )
    custom_form = launch.CustomProfileForm(
        name=custom_name,
        dataset="random" if stored_dataset is None else "stored",
        dataset_fields=None if stored_dataset is None else profile_dataset(stored_dataset),
        input_len=input_len,
        output_len=None if own_lengths_only or output_len is None else int(output_len),
        num_prompts=num_prompts,
        request_rate=rate_col.number_input(
            "Request rate (req/s)",
            min_value=0.01,
            value=None,
            help="Empty: send all at once",
            key="launch_custom_rate",
        ),
        max_concurrency=concurrency_col.number_input(
            "Max concurrency",
            min_value=1,
            value=None,
            key="launch_custom_concurrency",
            help="Most sessions in flight at once" if sessions else "Most requests in flight at once",
        ),
    )
    reuse = launch.reuse_note(
        num_prompts,
        stored_dataset.num_prompts if stored_dataset else None,
        unit="sessions" if sessions else "prompts",
    )
    if reuse:
        st.warning(reuse, icon=":material/repeat:")
    if add_custom:
        try:
            profiles.append(launch.custom_profile(custom_form))
        except launch.LaunchInputError as problem:
            st.error(str(problem))
scale = SCALES[st.selectbox("Prompts per profile", list(SCALES), key="launch_scale")]
profiles = launch.scale_profiles(profiles, scale)
if profiles:
    chosen = launch.profiles_frame(profiles, model or "MODEL", dataset_names=launch.dataset_names(datasets))
    st.markdown(launch.profiles_markdown(chosen))
    st.caption(
        "The same loads as `vllm bench serve` commands (they run unchanged under `perflab bench` too):"
    )
    for command in chosen["vllm bench serve"]:
        ui.preformatted(command, wrap=True)
else:
    st.warning("Pick at least one profile to queue a run.")

st.subheader("Queue")
label_col, by_col = st.columns(2)
label = label_col.text_input("Label (optional)", key="launch_label")
if ui.viewer().logged_in:
    by_col.caption(f"Queued by **{ui.queued_by()}**")
    typed_name = ""
else:
    typed_name = by_col.text_input("Your name (optional)", key="launch_queued_by")
if (
    st.button("Queue run", key="launch_queue", type="primary", disabled=config is None or not profiles)
    and ui.may_write()
):
    try:
        with ui.session() as session:
            queued = launch.queue_run(
                session,
                host=host,
                config=config,
                profiles=profiles,
                queued_by=ui.queued_by(typed_name),
                label=label,
            )
    except (launch.LaunchInputError, EngineConfigError) as problem:
        st.error(str(problem))
    else:
        st.session_state["launch_last_run"] = queued.id
        ui.clear_cached_reads()


@st.fragment(run_every=PROGRESS_EVERY_S)
def follow(run_id: int) -> None:
    """The queued run's state, live: what it is doing (or how it ended), its progress, its page."""
    with ui.session() as session:
        progress = run_progress.load_progress(session, run_id)
    if progress is None:
        st.caption(f"Run {run_id} no longer exists.")
        return
    kind, note = launch.follow_note(run_id, progress.status)
    getattr(st, kind)(note)
    if progress.status not in FINISHED_RUN_STATUSES:
        st.progress(progress.fraction, text=f"Run {run_id}: {progress.text()}")
    st.page_link(
        "pages/run.py",
        label=f"Open run {run_id}",
        query_params={"run": str(run_id)},
        icon=":material/arrow_forward:",
    )


last_run = st.session_state.get("launch_last_run")
if last_run is not None:
    follow(last_run)
