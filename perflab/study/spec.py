"""The study specification: what a study tunes, on which hosts, against which traffic, toward which goal.

A spec is written as YAML or JSON (``python -m perflab study create --spec study.yaml``) or built by the
studies page. It names the model, the hosts, the baseline serving configuration, the tuning profile, an
ordered list of stages (each a dimension with candidate values), the validation profiles, the objective
and the rules that decide a stage: the lowest acceptable success rate and the smallest gain that counts
as an improvement. :func:`parse_spec` reports every problem at once, each naming the file, line and
field (``study.yaml:14: stages[1].candidates[0]: 'tpp' is not a setting of a serving configuration``).

A candidate is a set of configuration changes applied on top of the best configuration so far:

- a scalar, when its stage names a ``dimension`` (``dimension: engine`` → ``candidates: [sglang]``);
- a mapping of :class:`~perflab.engines.config.EngineConfig` fields (``{tp: 4, replicas: 2}``), or
  ``{label: "TP4 ×2", set: {tp: 4, replicas: 2}}`` to name it (``changes`` is read like ``set``, so a
  stored spec reads back as it was).

``extra_args`` are appended to the best configuration's own, ``env`` is merged into it, and
``replicas: fill`` fills the node (replicas = accelerators per node ÷ (tp × dp)).

``gpus`` is the study's accelerator budget: every configuration it measures uses exactly that many
accelerators, filled with replicas (``gpus ÷ (tp × dp)``, :mod:`perflab.study.budget`), so node totals
compare. Left out, it is the node of the smallest host. A baseline or candidate whose parallelism does
not divide the budget is refused when the spec is read.
"""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from perflab import safe_yaml
from perflab.containers.image import check_image
from perflab.engines.config import EngineConfig, refuse_flag_like
from perflab.engines.registry import display_name
from perflab.problems import line_of, plain_message, syntax_problem, yaml_location
from perflab.profiles import PRESETS, BenchmarkProfile, GoodputSLOs, scaled
from perflab.sim.catalog import catalogued
from perflab.study.budget import check_fields
from perflab.study.configs import FILL, CandidateConfigError, build_config, explain, split_args
from perflab.study.search_space import SearchSpec, needs_moe

SPEC_FORMATS = "YAML or JSON"
MOE_ONLY = "expert parallelism (ep > 1) and attention data parallel apply only to mixture-of-experts models"
OBJECTIVES: dict[str, str] = {
    "total_token_throughput": "Total TPS",
    "output_throughput": "Output TPS",
    "request_throughput": "Request throughput",
    "request_goodput": "Goodput",
    "max_load_within_slo": "Highest load within SLO",
    "cost_per_mtok": "Cost per 1M tokens",
    "tokens_per_joule": "Tokens per joule",
}
OBJECTIVE_UNITS: dict[str, str] = {
    "total_token_throughput": "tok/s",
    "output_throughput": "tok/s",
    "request_throughput": "req/s",
    "request_goodput": "req/s",
    "max_load_within_slo": "",
    "cost_per_mtok": "per 1M tok",
    "tokens_per_joule": "tok/J",
}
# Dimension names a stage may use besides the EngineConfig fields themselves.
DIMENSION_ALIASES: dict[str, str] = {
    "prefix_cache": "enable_prefix_caching",
    "chunked_prefill": "enable_chunked_prefill",
    "speculative": "speculative_config",
    "speculative_decoding": "speculative_config",
    "flag": "extra_args",
    "flags": "extra_args",
    "model_variant": "model",
}
# Fields a candidate may change; gpu_ids and port are chosen by the worker.
SETTABLE_FIELDS: tuple[str, ...] = tuple(
    name for name in EngineConfig.model_fields if name not in ("gpu_ids", "port")
)
# The most accelerators a node or a configuration may have (as many GPU rows as a host probe reads).
MAX_ACCELERATORS = 1024
MAX_NAME_CHARS = 200
MAX_GOAL_CHARS = 2000
# Result fields an SLO may bound, e.g. ``p99_ttft_ms: 2000`` or ``mean_tpot_ms: 50``.
SLO_METRICS: tuple[str, ...] = ("ttft", "tpot", "itl", "e2el")


class StudySpecError(ValueError):
    """A study spec that cannot be used; ``problems`` lists every message (file:line: field: why)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


def field_of_dimension(dimension: str) -> str:
    """The EngineConfig field a stage dimension changes (``prefix_cache`` → ``enable_prefix_caching``)."""
    return DIMENSION_ALIASES.get(dimension, dimension)


def _value_text(field: str, value: Any) -> str:
    if field == "engine":
        return display_name(str(value))
    if field == "model":
        return str(value)
    if field == "extra_args":
        return shlex.join(split_args(value))
    if isinstance(value, dict):
        return f"{field}={json.dumps(value, separators=(',', ':'), sort_keys=True)}"
    if value is True:
        return field
    if value is False:
        return f"no {field}"
    return f"{field}={value}"


class CandidateSpec(BaseModel):
    """One candidate of a stage: the configuration changes it makes, and its display label."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str = Field(min_length=1)
    changes: dict[str, Any] = Field(min_length=1)

    @field_validator("changes")
    @classmethod
    def _known_fields(cls, changes: dict[str, Any]) -> dict[str, Any]:
        for name, value in changes.items():
            if name not in SETTABLE_FIELDS:
                raise ValueError(f"'{name}' is not a setting of a serving configuration")
            if name == "extra_args":
                split_args(value)
            if name == "env" and not isinstance(value, dict):
                raise ValueError("env must be a mapping of variable names to values")
            if name == "replicas" and value != FILL and (not isinstance(value, int) or value < 1):
                raise ValueError("replicas must be a whole number >= 1 or 'fill'")
            if name == "image" and value is not None:
                if not isinstance(value, str):
                    raise ValueError("image must be an image reference such as vllm/vllm-openai:v0.32.0")
                check_image(value)
        return changes


def budget_problems(spec: StudySpec, gpus: int) -> list[str]:
    """Why the baseline or a candidate (applied to the baseline's parallelism) cannot use exactly
    ``gpus`` accelerators; empty when every one can. A candidate larger than the whole budget is left
    to fail as a candidate."""
    base = {name: spec.baseline[name] for name in ("tp", "dp") if name in spec.baseline}
    found = []
    try:
        check_fields(spec.baseline, gpus)
    except ValueError as error:
        found.append(f"baseline: {error}")
    for stage_index, stage in enumerate(spec.stages):
        for index, candidate in enumerate(stage.candidates):
            if not {"tp", "dp", "replicas", "disaggregation"} & set(candidate.changes):
                continue
            try:
                fields = {**base, **candidate.changes}
                check_fields(fields, gpus, larger_ok=not fields.get("disaggregation"))
            except ValueError as error:
                found.append(f"stages[{stage_index}].candidates[{index}] ({candidate.label}): {error}")
    return found


def candidate_from_entry(entry: Any, dimension: str | None) -> dict[str, Any]:
    """Normalize a candidate as written (scalar, flat mapping or ``{label, set}``) to CandidateSpec fields."""
    key = next((name for name in ("set", "changes") if isinstance(entry, dict) and name in entry), None)
    if key is not None:
        unknown = set(entry) - {"label", key}
        if unknown:
            raise ValueError(f"a candidate with '{key}' takes only 'label' besides it, not {sorted(unknown)}")
        changes = entry[key]
        if not isinstance(changes, dict):
            raise ValueError("'set' must be a mapping of configuration settings")
        label = entry.get("label")
    elif isinstance(entry, dict):
        changes = {key: value for key, value in entry.items() if key != "label"}
        label = entry.get("label")
    elif dimension is None:
        raise ValueError("a bare value needs the stage's 'dimension' (or write the candidate as a mapping)")
    else:
        changes = {field_of_dimension(dimension): entry}
        label = None
    if label is None and changes:
        label = " · ".join(_value_text(name, value) for name, value in changes.items())
    return {"label": label, "changes": changes}


class StageSpec(BaseModel):
    """One stage: a dimension and its candidate values, each tried on top of the best so far."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    dimension: str | None = None
    candidates: tuple[CandidateSpec, ...] = ()
    search: SearchSpec | None = Field(None, description="a space to search instead of candidates")

    @model_validator(mode="before")
    @classmethod
    def _normalize_candidates(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("candidates"), list):
            return data
        dimension = data.get("dimension")
        dimension = dimension if isinstance(dimension, str) else None
        return {
            **data,
            "candidates": [candidate_from_entry(entry, dimension) for entry in data["candidates"]],
        }

    @model_validator(mode="after")
    def _candidates_or_search(self) -> StageSpec:
        if self.search is None and not self.candidates:
            raise ValueError("a stage needs 'candidates' (at least one) or a 'search'")
        if self.search is not None and (self.candidates or self.dimension):
            raise ValueError("a search stage takes its space from 'search', not 'candidates' or 'dimension'")
        return self

    @field_validator("dimension")
    @classmethod
    def _known_dimension(cls, dimension: str | None) -> str | None:
        if dimension is not None and field_of_dimension(dimension) not in SETTABLE_FIELDS:
            known = sorted({*SETTABLE_FIELDS, *DIMENSION_ALIASES})
            raise ValueError(f"'{dimension}' is not a dimension; use one of {', '.join(known)}")
        return dimension


class StudySpec(BaseModel):
    """A whole study. ``tuning_profile`` and ``validation_profiles`` are preset names or profile mappings
    (a mapping with ``preset`` starts from that preset and overrides its fields). Every number is
    finite (no NaN or infinity) and every text free of NUL characters, which no database stores."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    model: str = Field(min_length=1)
    hosts: tuple[str, ...] = Field(min_length=1)
    baseline: dict[str, Any] = Field(description="EngineConfig fields of the starting point; engine required")
    tuning_profile: Any = "sharegpt"
    validation_profiles: tuple[Any, ...] = ()
    scale: float = Field(1.0, gt=0, le=1, description="fraction of every profile's prompts (quick studies)")
    stages: tuple[StageSpec, ...] = Field(min_length=1)
    objective: Literal[
        "total_token_throughput",
        "output_throughput",
        "request_throughput",
        "request_goodput",
        "max_load_within_slo",
        "cost_per_mtok",
        "tokens_per_joule",
    ] = "total_token_throughput"
    goodput: GoodputSLOs | None = Field(None, description="per-request SLOs for the goodput objective")
    slos: dict[str, float] = Field(
        default_factory=dict,
        description="limits on result fields: a configuration that breaks one is infeasible",
    )
    min_success_pct: float = Field(100.0, gt=0, le=100)
    min_gain_pct: float = Field(1.0, ge=0, description="smallest gain over the best so far that is kept")
    gpus_per_node: int | None = Field(
        None, ge=1, le=MAX_ACCELERATORS, description="accelerators per node (default: the hosts')"
    )
    gpus: int | None = Field(
        None,
        ge=1,
        le=MAX_ACCELERATORS,
        description="accelerators per configuration (default: the node of the smallest host)",
    )
    goal: str | None = Field(
        None, max_length=MAX_GOAL_CHARS, description="the optimization objective in words, for the report"
    )
    repeats: int = Field(1, ge=1, le=20, description="runs of the tuning profile on each launch")
    relaunches: int = Field(1, ge=1, le=10, description="fresh launches that measure each configuration")
    confidence: float = Field(0.95, ge=0.5, lt=1, description="confidence of every verdict")
    max_launches: int = Field(4, ge=1, le=20, description="launches a close call may take (A B A B)")

    def env_settings(self) -> dict[str, str]:
        """Every environment variable the baseline or a candidate sets (the last value seen)."""
        settings = dict(self.baseline.get("env") or {})
        for stage in self.stages:
            for candidate in stage.candidates:
                settings.update(candidate.changes.get("env") or {})
        return settings

    @model_validator(mode="before")
    @classmethod
    def _no_nul(cls, data: Any) -> Any:
        where = nul_path(data)
        if where is not None:
            raise ValueError(
                f"{where or 'the spec'}: text holds a NUL character, which perflab does not store"
            )
        return data

    @field_validator("model")
    @classmethod
    def _model_is_a_name(cls, model: str) -> str:
        return refuse_flag_like("model", model)

    @field_validator("hosts")
    @classmethod
    def _unique_hosts(cls, hosts: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(hosts)) != len(hosts):
            raise ValueError("hosts must not repeat")
        return hosts

    @field_validator("baseline")
    @classmethod
    def _baseline_fields(cls, baseline: dict[str, Any]) -> dict[str, Any]:
        if "engine" not in baseline:
            raise ValueError("needs an engine (vllm, sglang, trtllm, mindie or vllm-ascend)")
        unknown = sorted(set(baseline) - set(SETTABLE_FIELDS))
        if unknown:
            names = ", ".join(repr(name) for name in unknown)
            raise ValueError(f"{names}: not settings of a serving configuration")
        checked = {
            name: value for name, value in baseline.items() if not (name == "replicas" and value == FILL)
        }
        try:
            build_config({"model": "model"}, checked)
        except CandidateConfigError as error:
            raise ValueError(str(error)) from None
        return baseline

    @field_validator("tuning_profile")
    @classmethod
    def _tuning_resolves(cls, entry: Any) -> Any:
        resolve_profile(entry)
        return entry

    @field_validator("validation_profiles")
    @classmethod
    def _validation_resolve(cls, entries: tuple[Any, ...]) -> tuple[Any, ...]:
        for index, entry in enumerate(entries):
            try:
                resolve_profile(entry)
            except ValueError as error:
                raise ValueError(f"[{index}]: {error}") from None
        return entries

    @field_validator("slos")
    @classmethod
    def _slo_fields(cls, slos: dict[str, float]) -> dict[str, float]:
        for name, limit in slos.items():
            parts = name.split("_")
            if len(parts) != 3 or parts[1] not in SLO_METRICS or parts[2] != "ms" or not _is_stat(parts[0]):
                raise ValueError(f"'{name}' is not a latency field (e.g. p99_ttft_ms, mean_tpot_ms)")
            if not math.isfinite(limit) or limit <= 0:
                raise ValueError(f"{name} must be a finite number > 0, not {limit}")
        return slos

    @model_validator(mode="after")
    def _consistent(self) -> StudySpec:
        names = [profile.name for profile in (self.tuning(), *self.validation())]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"profile names repeat between tuning and validation: {', '.join(repeated)}")
        if self.gpus is not None:
            refused = budget_problems(self, self.gpus)
            if refused:
                raise ValueError("; ".join(refused))
        if self.objective == "request_goodput" and self.goodput is None:
            raise ValueError("the request_goodput objective needs 'goodput' SLOs (ttft_ms, tpot_ms, e2el_ms)")
        moe = self.moe_model()
        for index, stage in enumerate(self.stages):
            if stage.search is not None:
                self._check_choices(index, stage.search)
                self._check_moe_layouts(index, stage.search, moe)
            for number, candidate in enumerate(stage.candidates):
                if moe is False and needs_moe(candidate.changes):
                    raise ValueError(
                        f"stages[{index}].candidates[{number}] ({candidate.label}): {MOE_ONLY}: "
                        f"{self.dense_text()}"
                    )
        if moe is False and needs_moe(self.baseline):
            raise ValueError(f"baseline: {MOE_ONLY}: {self.dense_text()}")
        if self.objective == "max_load_within_slo" and (self.tuning().sweep is None or not self.slos):
            raise ValueError(
                "the max_load_within_slo objective needs a tuning profile with a sweep, and 'slos'"
            )
        return self

    def _check_choices(self, index: int, search: SearchSpec) -> None:
        """Every choice of a search knob must be a value the baseline's engine has."""
        base = {name: value for name, value in self.baseline.items() if name != "replicas"}
        for knob, value in search.choice_values():
            try:
                build_config({"model": self.model}, {**base, knob: value})
            except CandidateConfigError as error:
                raise ValueError(f"stages[{index}].search.knobs.{knob}: {value!r}: {error}") from None

    def models(self) -> tuple[str, ...]:
        """The models the study can serve: its own and those a stage's candidates change it to."""
        changed = [
            candidate.changes["model"]
            for stage in self.stages
            for candidate in stage.candidates
            if isinstance(candidate.changes.get("model"), str)
        ]
        return tuple(dict.fromkeys((self.model, *changed)))

    def moe_model(self) -> bool | None:
        """Whether the study serves a mixture-of-experts model as the simulator's model catalogue knows
        its models: True when one of them is, False when every one is a dense model it lists, None when
        it does not list some."""
        archs = [catalogued(model) for model in self.models()]
        if any(arch is not None and arch.is_moe for arch in archs):
            return True
        return None if any(arch is None for arch in archs) else False

    def dense_text(self) -> str:
        """``Qwen/Qwen3-32B is a dense model`` (or ``A and B are dense models``)."""
        models = self.models()
        return (
            f"{models[0]} is a dense model"
            if len(models) == 1
            else f"{' and '.join(models)} are dense models"
        )

    def _check_moe_layouts(self, index: int, search: SearchSpec, moe: bool | None) -> None:
        """A search's expert-parallel and attention-DP layouts need a mixture-of-experts model: as the
        search says (its ``moe``), else as the catalogue knows the study's models (``moe``, see
        :meth:`moe_model`)."""
        if not search.moe_layouts() or (search.moe if search.moe is not None else moe):
            return
        if search.moe is False:
            reason = "the search says moe: false"
        elif moe is None:
            reason = f"set moe: true if {self.model} is one (perflab's model catalogue does not list it)"
        else:
            reason = self.dense_text()
        raise ValueError(f"stages[{index}].search: {MOE_ONLY}: {reason}")

    # ----- resolved views ---------------------------------------------------------------------------

    def baseline_config(self, gpus_per_node: int | None = None, gpus: int | None = None) -> EngineConfig:
        """The baseline as a checked EngineConfig, filled to ``gpus`` (default: the spec's) when known;
        ``replicas: fill`` without a budget needs ``gpus_per_node``."""
        fields = dict(self.baseline)
        budget = gpus or self.gpus
        node = gpus_per_node or self.gpus_per_node
        if fields.get("replicas") == FILL and budget is None and node is None:
            fields.pop("replicas")
        return build_config(
            {"model": self.model}, fields, gpus_per_node=gpus_per_node or self.gpus_per_node, gpus=budget
        )

    def budget(self, gpus_per_node: int | None) -> int:
        """The accelerators every configuration uses: ``gpus``, else the node of the smallest host
        (``gpus_per_node``), else the baseline as written. Raises :class:`StudySpecError` when the
        budget is more than a node or a configuration cannot fill it."""
        node = gpus_per_node or self.gpus_per_node
        if self.gpus is not None and node is not None and self.gpus > node:
            raise StudySpecError([f"gpus: {self.gpus} accelerators per configuration, but a node has {node}"])
        gpus = self.gpus or node or self.baseline_config().gpus_needed
        refused = budget_problems(self, gpus)
        if refused:
            source = "" if self.gpus else " (the node of the smallest host)" if node else " (the baseline's)"
            raise StudySpecError([f"gpus: {gpus}{source}: {why}" for why in refused])
        return gpus

    def tuning_runs(self) -> list[BenchmarkProfile]:
        """The tuning profile and its repetitions on the same launch (``<name>-repeat2``, …), each a
        fresh draw of prompts (``BenchmarkProfile.fresh_draw``: another seed, the same for every
        configuration, so repetitions pair)."""
        tuning = self.tuning()
        return [tuning] + [
            tuning.fresh_draw(number - 1).model_copy(update={"name": f"{tuning.name}-repeat{number}"})
            for number in range(2, self.repeats + 1)
        ]

    def tuning(self) -> BenchmarkProfile:
        """The tuning profile, scaled, with the goodput SLOs applied."""
        profile = resolve_profile(self.tuning_profile, self.scale)
        if self.goodput is not None:
            profile = profile.model_copy(update={"goodput": self.goodput})
        return profile

    def validation(self) -> list[BenchmarkProfile]:
        """The validation profiles, scaled."""
        return [resolve_profile(entry, self.scale) for entry in self.validation_profiles]

    def stored(self) -> dict[str, Any]:
        """The spec as the JSON stored in the study row."""
        return json.loads(self.model_dump_json())


def nul_path(data: Any, path: str = "") -> str | None:
    """The path (``stages[0].name``) of the first text in ``data`` holding a NUL character, or None."""
    if isinstance(data, str):
        return path if "\0" in data else None
    children: list[tuple[str, Any]] = []
    if isinstance(data, dict):
        for key, value in data.items():
            child = f"{path}.{key}" if path else str(key)
            children += [(child, key), (child, value)]
    elif isinstance(data, (list, tuple)):
        children = [(f"{path}[{index}]", value) for index, value in enumerate(data)]
    for child, value in children:
        found = nul_path(value, child)
        if found is not None:
            return found
    return None


def _is_stat(word: str) -> bool:
    if word in ("mean", "median"):
        return True
    try:
        return word.startswith("p") and 0 < float(word[1:]) < 100
    except ValueError:
        return False


def _preset(name: Any) -> BenchmarkProfile:
    if not isinstance(name, str) or name not in PRESETS:
        raise ValueError(f"unknown profile preset '{name}'; presets: {', '.join(PRESETS)}")
    return PRESETS[name]


def resolve_profile(entry: Any, scale: float = 1.0) -> BenchmarkProfile:
    """A preset name or profile mapping as a BenchmarkProfile, scaled by ``scale``."""
    if isinstance(entry, str):
        profile = _preset(entry)
    elif isinstance(entry, dict):
        preset = entry.get("preset")
        fields = {key: value for key, value in entry.items() if key != "preset"}
        if preset is not None:
            fields = {**json.loads(_preset(preset).model_dump_json()), **fields}
        try:
            profile = BenchmarkProfile.model_validate(fields)
        except ValidationError as error:
            raise ValueError(f"profile: {explain(error)}") from None
    elif isinstance(entry, BenchmarkProfile):
        profile = entry
    else:
        raise ValueError("a profile is a preset name or a mapping of profile fields")
    return scaled(profile, scale) if scale != 1.0 else profile


def parse_spec(text: str, *, name: str = "study spec") -> StudySpec:
    """Validate a YAML or JSON spec; raises :class:`StudySpecError` with every problem, by line."""
    try:
        document = safe_yaml.load(text)
    except yaml.YAMLError as error:
        raise StudySpecError([syntax_problem(name, error, SPEC_FORMATS)]) from None
    data, root = document.data, document.root
    if not isinstance(data, dict):
        raise StudySpecError(
            [f"{name}:1: a study spec is a mapping (name, model, hosts, baseline, stages, …)"]
        )
    return spec_from_data(data, name=name, root=root)


def spec_from_data(
    data: dict[str, Any], *, name: str = "study spec", root: yaml.Node | None = None
) -> StudySpec:
    """Validate an already-parsed spec mapping (a form's values, a stored spec)."""
    try:
        return StudySpec.model_validate(data)
    except ValidationError as exc:
        errors = [(_clean_loc(error["loc"]), error) for error in exc.errors()]
        problems = []
        for loc, error in errors:
            if error["type"] == "too_short" and any(
                other[: len(loc)] == loc and other != loc for other, _ in errors
            ):
                continue  # an empty list left by entries that failed themselves
            field = _field_path(loc)
            where = yaml_location(name, root, loc) if root is not None else name
            message = plain_message(error)
            problems.append(f"{where}: {field}: {message}" if field else f"{where}: {message}")
        raise StudySpecError(sorted(problems, key=line_of)) from None


def _clean_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(part for part in loc if not (isinstance(part, str) and part.startswith("function-")))


def _field_path(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def load_spec(path: str | Path) -> StudySpec:
    """Read and validate a spec file; raises :class:`StudySpecError` naming the file."""
    file_path = Path(path)
    try:
        text = safe_yaml.read_file(file_path)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise StudySpecError([f"{file_path}: cannot read: {getattr(exc, 'strerror', None) or exc}"]) from None
    return parse_spec(text, name=str(file_path))
