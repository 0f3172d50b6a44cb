"""The Launch page's model: form values → an :class:`EngineConfig` and benchmark profiles, and
queuing the run (a ``queued`` row the worker picks up). Re-running a stored run queues a copy of it.
The live serve command comes from :func:`perflab.views.commands.command_preview`. The engine runs
from the host's installation or from a container image: a vendor's image (:data:`IMAGE_PRESETS`,
its tag editable) or any other reference.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pydantic import ValidationError
from sqlmodel import Session

from db import crud
from db.models import Dataset, Run
from perflab.containers.image import presets_for
from perflab.dataset_dirs import DatasetNotDeclared
from perflab.datasets import dataset_file_name
from perflab.engines import EngineConfig, get_adapter
from perflab.engines.flags import format_value, parse_json_object
from perflab.engines.preflight import HelpCache
from perflab.inventory import HostConfig
from perflab.markdown_text import md_text
from perflab.probe.models import ProbeResult
from perflab.profiles import PRESETS, BenchmarkProfile, scaled
from perflab.redact import config_problems
from perflab.runner.submit import submit_run
from perflab.views.run_detail import RunView

DEFAULT_PROMPTS = 100

TRISTATE: dict[str, bool | None] = {"engine default": None, "on": True, "off": False}
# Form fields the config takes as they are, like the number knobs; text knobs are stripped (empty: the
# engine default).
PLAIN_FIELDS: tuple[str, ...] = ("engine", "model", "tp", "dp", "ep", "replicas")
TEXT_KNOBS: tuple[str, ...] = (
    "quantization",
    "attention_backend",
    "kv_cache_dtype",
    "performance_mode",
    "reasoning_parser",
    "cpu_omp_threads_bind",
)
NUMBER_KNOBS: tuple[str, ...] = (
    "max_num_batched_tokens",
    "max_num_seqs",
    "max_model_len",
    "gpu_memory_utilization",
    "cpu_kvcache_space_gib",
    "cpu_reserved_cores",
)


HOST_INSTALL = "the host's installation"
OTHER_IMAGE = "another image"


def image_sources(engine: str) -> list[str]:
    """Where the engine may run from: the host, each vendor image repository of ``engine``, any image."""
    return [HOST_INSTALL, *(preset.repository for preset in presets_for(engine)), OTHER_IMAGE]


def image_default(engine: str, source: str) -> str:
    """The image field's starting text for ``source``: a vendor image with its tag, else empty."""
    return next((preset.reference for preset in presets_for(engine) if preset.repository == source), "")


def accepted_words(
    engine: str,
    knob: str,
    *,
    host: str | None = None,
    version: str | None = None,
    cache: HelpCache | None = None,
) -> str | None:
    """The values a one-word knob takes on ``engine``, naming the version the list follows: the
    registry the engine ``version`` on ``host`` listed to an earlier preflight (``cache``), else
    perflab's table of that version (the newest where the version is unknown), else the newest table
    with the host's own version beside it."""
    adapter = get_adapter(engine)
    if knob not in adapter.vocabulary:
        return None
    if host is not None and version is not None and cache is not None:
        installed = (cache.load_words((host, engine, version)) or {}).get(knob)
        if installed:
            return f"{adapter.display_name} {version} on '{host}' accepts: {', '.join(installed)}"
    judged = adapter.for_version(version)
    words = (judged or adapter.for_version(None) or adapter).vocabulary[knob]
    source = f"{adapter.display_name} {words.version}"
    if judged is None:
        source += f" (perflab's newest table; '{host}' has {version}, whose own check runs before launch)"
    return f"{source} accepts: {', '.join(words.values)}"


class LaunchInputError(ValueError):
    """A form value that cannot be used; ``field`` names the input."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field.replace('_', ' ')}: {message}")


@dataclass(frozen=True)
class ConfigForm:
    """The Launch form's engine settings as typed by the user (empty text = engine default)."""

    engine: str
    model: str
    tp: int = 1
    dp: int = 1
    ep: int = 1
    replicas: int = 1
    quantization: str = ""
    attention_backend: str = ""
    kv_cache_dtype: str = ""
    performance_mode: str = ""
    reasoning_parser: str = ""
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    cpu_kvcache_space_gib: int | None = None
    cpu_omp_threads_bind: str = ""
    cpu_reserved_cores: int | None = None
    enable_prefix_caching: str = "engine default"
    enable_chunked_prefill: str = "engine default"
    speculative_config: str = ""
    extra_args: str = ""
    env: str = ""
    gpu_ids: str = ""
    image: str = ""


def _env(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, value = line.strip().partition("=")
        if not sep or not name:
            raise LaunchInputError("env", f"line {number} {line.strip()!r} is not NAME=value")
        values[name.strip()] = value
    return values


def _gpu_ids(text: str) -> tuple[int, ...] | None:
    words = text.replace(",", " ").split()
    if not words:
        return None
    if not all(word.isdigit() for word in words):
        raise LaunchInputError("gpu_ids", f"{text.strip()!r} must be GPU indexes like 0,1,2,3")
    return tuple(int(word) for word in words)


def _extra_args(text: str) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(text))
    except ValueError as error:
        raise LaunchInputError("extra_args", f"cannot split {text!r} into arguments ({error})") from None


def _input_error(error: ValidationError, model: str) -> LaunchInputError:
    """The first problem pydantic found, naming its field (``model`` when it concerns several)."""
    first = error.errors()[0]
    return LaunchInputError(str(first["loc"][0]) if first["loc"] else model, first["msg"])


def build_config(form: ConfigForm) -> EngineConfig:
    """The engine config of the form; raises :class:`LaunchInputError` naming the bad input."""
    fields: dict[str, Any] = {
        **{name: getattr(form, name) for name in (*PLAIN_FIELDS, *NUMBER_KNOBS)},
        "enable_prefix_caching": TRISTATE[form.enable_prefix_caching],
        "enable_chunked_prefill": TRISTATE[form.enable_chunked_prefill],
        "extra_args": _extra_args(form.extra_args),
        "env": _env(form.env),
        "gpu_ids": _gpu_ids(form.gpu_ids),
        "image": form.image.strip() or None,
    }
    fields.update({knob: getattr(form, knob).strip() or None for knob in TEXT_KNOBS})
    if form.speculative_config.strip():
        try:
            fields["speculative_config"] = parse_json_object(form.speculative_config.strip())
        except ValueError as error:
            raise LaunchInputError("speculative_config", str(error)) from None
    if not form.model.strip():
        raise LaunchInputError("model", "enter a model id (e.g. Qwen/Qwen3-8B) or a path on the host")
    secrets = config_problems(fields["env"], fields["extra_args"])
    if secrets:
        raise LaunchInputError(*secrets[0])
    try:
        return EngineConfig(**fields)
    except ValidationError as error:
        raise _input_error(error, "config") from None


# The preset Launch starts with, so that its defaults can be queued as they are: seed 002's throughput
# load on random prompts (no dataset to fetch), long enough to show a steady state.
DEFAULT_PRESET = "throughput"


def default_preset_choice() -> str:
    """The shown name of :data:`DEFAULT_PRESET` among :func:`preset_choices`."""
    return next(label for label, profile in preset_choices().items() if profile.name == DEFAULT_PRESET)


def preset_choices() -> dict[str, BenchmarkProfile]:
    """The seeds' presets by their shown name: ``Short Prompt (random 128→4, 1000 prompts)``."""
    return {f"{profile.title} ({describe_load(profile)})": profile for profile in PRESETS.values()}


def describe_load(profile: BenchmarkProfile) -> str:
    """``random 128→4, 1000 prompts, concurrency 512``."""
    if profile.dataset == "random":
        data = f"random {profile.input_len}→{profile.output_len}"
    else:
        data = profile.dataset
    parts = [data, f"{profile.num_prompts} prompts"]
    if profile.max_concurrency is not None:
        parts.append(f"concurrency {profile.max_concurrency}")
    if profile.request_rate != float("inf"):
        parts.append(f"{format_value(profile.request_rate)} req/s")
    return ", ".join(parts)


@dataclass(frozen=True)
class CustomProfileForm:
    """A custom profile as entered: a random dataset with lengths, or a stored dataset."""

    name: str
    dataset: str = "random"
    dataset_fields: dict[str, str] | None = None
    input_len: int | None = 1024
    output_len: int | None = 128
    num_prompts: int = DEFAULT_PROMPTS
    request_rate: float | None = None
    max_concurrency: int | None = None
    seed: int | None = 42


def custom_profile(form: CustomProfileForm) -> BenchmarkProfile:
    """The profile of the custom form; raises :class:`LaunchInputError`."""
    slug = "-".join(form.name.lower().split()) or "custom"
    fields: dict[str, Any] = {
        "name": slug,
        "title": form.name.strip() or "Custom",
        "num_prompts": form.num_prompts,
        "max_concurrency": form.max_concurrency,
        "seed": form.seed,
    }
    if form.request_rate is not None:
        fields["request_rate"] = form.request_rate
    if form.dataset == "random":
        fields.update(dataset="random", input_len=form.input_len, output_len=form.output_len)
    else:
        if not form.dataset_fields:
            raise LaunchInputError("dataset", "pick an uploaded dataset (Datasets page) or use random")
        fields.update(form.dataset_fields, output_len=form.output_len)
    try:
        return BenchmarkProfile(**fields)
    except ValidationError as error:
        raise _input_error(error, "profile") from None


def output_length_note(with_lengths: int, prompts: int) -> str | None:
    """What the custom profile's "Output tokens" field means for a dataset whose prompts carry their
    own output lengths in ``with_lengths`` of ``prompts`` rows (the bench sends a row's own length
    when it has one; the field is the length of the others), or None when no row carries one."""
    if with_lengths <= 0:
        return None
    if with_lengths >= prompts:
        return "Output lengths: the dataset's own (every prompt carries one)."
    return (
        f"{with_lengths} of {prompts} prompts carry their own output length; "
        "Output tokens applies to the others."
    )


def reuse_note(num_prompts: int, dataset_prompts: int | None, unit: str = "prompts") -> str | None:
    """What asking for more prompts (or sessions) than a dataset holds means, or None when it holds
    enough."""
    if dataset_prompts is None or num_prompts <= dataset_prompts:
        return None
    sent = "requests" if unit == "prompts" else unit
    return (
        f"The dataset holds {dataset_prompts} {unit}: {num_prompts} {sent} send them again in order "
        f"(each about {num_prompts / dataset_prompts:.1f} times), which a prefix cache may favour."
    )


# The custom profile's output tokens on a session file (the bench's agentic-trace reader, SGLang's 220).
SESSION_OUTPUT_NOTE = (
    "Empty: each turn asks for its own output_len, else 220 tokens (SGLang's default); a value sets every "
    "turn's."
)


def dataset_names(datasets: Sequence[Dataset]) -> dict[str, str]:
    """Stored datasets' file names (``my-prompts.jsonl``) by content hash (how custom profiles refer to
    them)."""
    return {dataset.content_hash: dataset_file_name(dataset.name, dataset.format) for dataset in datasets}


def profiles_frame(
    profiles: Sequence[BenchmarkProfile], model: str, *, dataset_names: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """The chosen profiles with their load and the equivalent ``vllm bench serve`` command (one that
    runs unchanged under ``vllm bench serve`` and ``perflab bench`` and sends the same requests; a stored
    dataset named by its name rather than its content hash)."""
    names = dataset_names or {}
    rows = [
        {
            "Profile": profile.title,
            "Load": describe_load(profile),
            "vllm bench serve": profile.vllm_bench_command(
                model, dataset_path=names.get(profile.dataset_ref or ""), same_requests=True
            ),
        }
        for profile in profiles
    ]
    return pd.DataFrame(rows, columns=["Profile", "Load", "vllm bench serve"])


def profiles_markdown(frame: pd.DataFrame) -> str:
    """The chosen profiles and their load (:func:`profiles_frame`) as a markdown table."""
    lines = ["| Profile | Load |", "|---|---|"]
    lines += [f"| {md_text(row.Profile)} | {md_text(row.Load)} |" for row in frame.itertuples()]
    return "\n".join(lines) + "\n"


def scale_profiles(profiles: Sequence[BenchmarkProfile], factor: float) -> list[BenchmarkProfile]:
    """The profiles with ``factor`` of their prompts (1.0 keeps them as they are)."""
    return list(profiles) if factor == 1.0 else [scaled(profile, factor) for profile in profiles]


def accelerator_of(probe_json: dict[str, Any] | None) -> str | None:
    """The accelerator model of a stored probe (``NVIDIA H100 80GB HBM3``), or None."""
    if not probe_json:
        return None
    try:
        probe = ProbeResult.model_validate(probe_json)
    except ValueError:
        return None
    return probe.accelerators[0].name if probe.accelerators else None


def _queue(
    session: Session,
    *,
    host_name: str,
    host: HostConfig | None,
    simulated: bool,
    accelerator: str | None,
    config: EngineConfig,
    profiles: Sequence[BenchmarkProfile],
    queued_by: str | None,
    label: str | None,
) -> Run:
    try:
        run = submit_run(
            session.get_bind(),
            host_name=host_name,
            config=config,
            profiles=profiles,
            queued_by=queued_by or None,
            label=(label or "").strip() or None,
            host=host,
        )
    except DatasetNotDeclared as problem:
        raise LaunchInputError("profiles", str(problem)) from None
    return crud.update_run(session, run_id=run.id, simulated=simulated, accelerator=accelerator)


def queue_run(
    session: Session,
    *,
    host: HostConfig,
    config: EngineConfig,
    profiles: Sequence[BenchmarkProfile],
    queued_by: str | None = None,
    label: str | None = None,
) -> Run:
    """Store a ``queued`` run of ``config`` on ``host`` with ``profiles``; the worker executes it.

    The run is marked simulated for a simulated host and names the host's accelerator from its last
    probe, so lists label it before it starts. Raises :class:`LaunchInputError` without profiles and
    the adapter's error for a config the engine cannot run, before anything is stored.
    """
    if not profiles:
        raise LaunchInputError("profiles", "pick at least one benchmark profile")
    stored_host = crud.get_host(session, name=host.name)
    return _queue(
        session,
        host_name=host.name,
        host=host,
        simulated=host.simulated,
        accelerator=accelerator_of(stored_host.last_probe if stored_host else None),
        config=config,
        profiles=profiles,
        queued_by=queued_by,
        label=label,
    )


# A queued run's status → how the Launch page reports it (a Streamlit message kind, then the sentence).
FOLLOW_NOTES: dict[str, tuple[str, str]] = {
    "queued": ("success", "Run {id} is queued; the worker starts it when the host's GPUs are free."),
    "launching": ("info", "Run {id} is starting its engine."),
    "ready": ("info", "Run {id}'s engine is ready; the benchmark starts."),
    "benchmarking": ("info", "Run {id} is benchmarking."),
    "done": ("success", "Run {id} is done: its results are on its page."),
    "failed": ("error", "Run {id} failed: its page says why."),
    "cancelled": ("warning", "Run {id} was cancelled."),
}


def follow_note(run_id: int, status: str) -> tuple[str, str]:
    """The Launch page's message on the run it queued, as its status now is: (kind, sentence)."""
    kind, text = FOLLOW_NOTES.get(status, ("info", "Run {id} is " + status + "."))
    return kind, text.format(id=run_id)


def rerun_blocker(run: RunView) -> str | None:
    """Why a run cannot be re-run, or None when it can."""
    if run.config is None:
        return "this run has no engine config (an imported result without a serving command)"
    if not run.host_name:
        return "this run has no host (imported results are re-run from the Launch page)"
    try:
        for profile in run.profiles:
            BenchmarkProfile.model_validate(profile)
    except ValidationError:
        return "its profiles are not perflab benchmark profiles (imported results)"
    return None if run.profiles else "this run has no benchmark profiles"


def rerun(session: Session, run: RunView, *, queued_by: str | None = None) -> Run:
    """Queue a new run with the same host, config, profiles and label; raises for a run that cannot."""
    blocker = rerun_blocker(run)
    if blocker is not None:
        raise LaunchInputError("run", f"cannot re-run run {run.id}: {blocker}")
    return _queue(
        session,
        host_name=run.host_name or "",
        host=None,
        simulated=run.simulated,
        accelerator=run.accelerator,
        config=EngineConfig.model_validate(run.config),
        profiles=[BenchmarkProfile.model_validate(profile) for profile in run.profiles],
        queued_by=queued_by or run.queued_by,
        label=run.label,
    )
