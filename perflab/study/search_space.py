"""A search stage's spec: the space of configurations, the objectives, the budget and the rules.

A stage with ``search:`` instead of ``candidates:`` explores a space of typed knobs::

    - name: Batching and parallelism
      search:
        knobs:
          max_num_seqs: [64, 128, 256, 512]              # choices
          max_num_batched_tokens: {low: 2048, high: 16384, log: true}   # integer range (or step)
          kv_cache_dtype: [auto, fp8]                     # checked against the engine's own words
        parallelism: [{tp: 1}, {tp: 2}, {tp: 4}, {tp: 8}] # layouts, replicas filling the budget
          # or a prefill/decode split on the same budget (P + D accelerators):
          # - {disaggregation: {prefill: {workers: 3, tp: 2}, decode: {workers: 1, tp: 2}}}
        objectives: [total_token_throughput, p99_ttft_ms] # one or two; latencies are minimized
        budget: {launches: 16}                            # and/or gpu_hours
        screening: 0.25                                   # fraction of the tuning prompts screened first
        seed: 0

Conditions: a layout with expert parallelism (``ep`` > 1) or attention data parallel (``dp_attention:
true``, SGLang's MoE layouts: ``{tp: 2, dp: 4, ep: 8, dp_attention: true}`` is attention DP4 over
``--tp-size 8`` with expert-parallel MoE layers; vLLM's are ``{tp: 2, dp: 4, ep: 8}``) is only allowed
for a mixture-of-experts model: the study's model as the simulator's catalogue knows it, or, for a
model it does not list, as the search says (``moe: true``; checked by the study's spec,
:class:`perflab.study.spec.StudySpec`, which knows the model); a choice of ``kv_cache_dtype``,
``attention_backend`` or any other knob is checked by the baseline engine's adapter (its vocabulary,
:mod:`perflab.engines.vocabulary`), so a value the engine does not have is refused when the spec is
read. SLOs are the study's ``slos``:
a configuration that breaks one is infeasible for the sampler.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from perflab.engines.layout import ROLES, Disaggregation

PARALLELISM = "parallelism"
# Parallelism fields a layout may set; replicas always fill the study's accelerator budget. A layout may
# instead be a prefill/decode split, {disaggregation: {...}}, whose two groups fill it. ``dp_attention``
# (true or false) makes the dp ranks a MoE layout's attention groups (SGLang; vLLM's dp ranks of a MoE
# model are by themselves).
LAYOUT_FIELDS: tuple[str, ...] = ("tp", "dp", "ep", "dp_attention")
SWITCHES = frozenset({"dp_attention"})
SPLIT = "disaggregation"
# Objectives that go down when the configuration is better (result fields of the tuning profile).
LATENCY_OBJECTIVES: tuple[str, ...] = tuple(
    f"{stat}_{metric}_ms"
    for stat in ("mean", "median", "p90", "p99")
    for metric in ("ttft", "tpot", "itl", "e2el")
)
THROUGHPUT_OBJECTIVES: tuple[str, ...] = (
    "total_token_throughput",
    "output_throughput",
    "request_throughput",
    "request_goodput",
)
Choice = str | int | float | bool | None
# Bounds of a search spec, refused when the spec is read: NumPy seeds are 32-bit; a study launches at
# most so many configurations; a knob's values stay within what an engine flag can take.
MAX_SEED = 2**32 - 1
MAX_LAUNCHES = 10_000
MAX_GPU_HOURS = 1_000_000.0
MAX_MEASUREMENTS = 20
MAX_KNOBS = 16
MAX_CHOICES = 256
MAX_KNOB_VALUE = 10**9


def needs_moe(changes: Mapping[str, Any]) -> bool:
    """Whether a layout or configuration ``changes`` set expert parallelism (``ep`` > 1) or attention
    data parallel, which only a mixture-of-experts model has."""
    ep = changes.get("ep")
    expert_parallel = isinstance(ep, int) and not isinstance(ep, bool) and ep > 1
    return expert_parallel or changes.get("dp_attention") is True


class IntRange(BaseModel):
    """An integer knob between ``low`` and ``high``: every ``step``, or on a log scale."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    low: int = Field(ge=1, le=MAX_KNOB_VALUE)
    high: int = Field(ge=1, le=MAX_KNOB_VALUE)
    step: int | None = Field(None, ge=1, le=MAX_KNOB_VALUE)
    log: bool = False

    @model_validator(mode="after")
    def _ordered(self) -> IntRange:
        if self.high < self.low:
            raise ValueError(f"high ({self.high}) is below low ({self.low})")
        if self.log and self.step not in (None, 1):
            raise ValueError("a range is either on a log scale or has a step, not both")
        if self.step is not None and (self.high - self.low) % self.step:
            raise ValueError(f"high - low ({self.high - self.low}) is not a multiple of step {self.step}")
        return self

    def size(self) -> int:
        return (self.high - self.low) // (self.step or 1) + 1


class SearchBudget(BaseModel):
    """When the search stops proposing: after this many launches, or this many GPU-hours, or both."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    launches: int | None = Field(None, ge=1, le=MAX_LAUNCHES)
    gpu_hours: float | None = Field(None, gt=0, le=MAX_GPU_HOURS, allow_inf_nan=False)

    @model_validator(mode="after")
    def _some_limit(self) -> SearchBudget:
        if self.launches is None and self.gpu_hours is None:
            raise ValueError("a budget needs 'launches', 'gpu_hours' or both")
        return self


class SearchSpec(BaseModel):
    """What a search stage explores and how it decides."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    knobs: dict[str, tuple[Choice, ...] | IntRange] = Field(default_factory=dict, max_length=MAX_KNOBS)
    parallelism: tuple[dict[str, Any], ...] = Field((), max_length=MAX_CHOICES)
    objectives: tuple[str, ...] = Field((), max_length=2, description="default: the study's objective")
    budget: SearchBudget
    screening: float = Field(0.25, gt=0, le=1, description="fraction of the tuning prompts screened first")
    seed: int = Field(0, ge=0, le=MAX_SEED, description="the sampler's seed (NumPy's range)")
    startup_trials: int = Field(
        2,
        ge=1,
        le=MAX_LAUNCHES,
        description="random (or best-predicted) proposals before the model-based ones",
    )
    patience: int | None = Field(
        None, ge=1, le=MAX_LAUNCHES, description="stop after this many launches without a gain"
    )
    moe: bool | None = Field(
        None,
        description="the model is a mixture of experts (allows ep > 1 layouts); default: what the "
        "simulator's model catalogue knows of the study's model",
    )
    max_measurements: int = Field(
        3, ge=1, le=MAX_MEASUREMENTS, description="per finalist, to separate the final pick"
    )
    noise_cv_pct: float | None = Field(
        None, ge=0, le=100, allow_inf_nan=False, description="run-to-run CV when no repeat measured it"
    )

    @field_validator("knobs")
    @classmethod
    def _knob_choices(cls, knobs: dict[str, Any]) -> dict[str, Any]:
        for name, values in knobs.items():
            if name in (*LAYOUT_FIELDS, "replicas", PARALLELISM):
                raise ValueError(f"{name}: parallelism is searched through 'parallelism' layouts")
            if isinstance(values, tuple) and not values:
                raise ValueError(f"{name}: needs at least one choice")
            if isinstance(values, tuple) and len(values) > MAX_CHOICES:
                raise ValueError(f"{name}: {len(values)} choices, at most {MAX_CHOICES}")
            if isinstance(values, tuple) and len(set(map(repr, values))) != len(values):
                raise ValueError(f"{name}: choices repeat")
        return knobs

    @field_validator("parallelism")
    @classmethod
    def _layouts(cls, layouts: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], ...]:
        for index, layout in enumerate(layouts):
            if SPLIT in layout:
                if set(layout) != {SPLIT}:
                    raise ValueError(
                        f"[{index}]: a split sets only '{SPLIT}', not {sorted(set(layout) - {SPLIT})}"
                    )
                try:
                    Disaggregation.model_validate(layout[SPLIT])
                except ValidationError as error:
                    first = error.errors()[0]
                    where = ".".join(str(part) for part in first["loc"])
                    raise ValueError(f"[{index}]: {SPLIT}.{where}: {first['msg']}") from None
                continue
            unknown = sorted(set(layout) - set(LAYOUT_FIELDS))
            if unknown or not layout:
                raise ValueError(
                    f"[{index}]: a layout sets {', '.join(LAYOUT_FIELDS)}, not {unknown or 'nothing'}"
                )
            if any(
                not isinstance(value, int) or isinstance(value, bool) or value < 1
                for name, value in layout.items()
                if name not in SWITCHES
            ):
                raise ValueError(f"[{index}]: sizes are whole numbers >= 1")
            if any(not isinstance(layout[name], bool) for name in SWITCHES & set(layout)):
                raise ValueError(f"[{index}]: dp_attention is true or false")
        labels = [layout_label(layout) for layout in layouts]
        if len(set(labels)) != len(labels):
            raise ValueError("layouts repeat")
        return layouts

    @field_validator("objectives")
    @classmethod
    def _known_objectives(cls, objectives: tuple[str, ...]) -> tuple[str, ...]:
        for name in objectives:
            if name not in (*THROUGHPUT_OBJECTIVES, *LATENCY_OBJECTIVES):
                raise ValueError(f"'{name}' is not an objective; use a throughput or e.g. p99_ttft_ms")
        if objectives and objectives[0] in LATENCY_OBJECTIVES:
            raise ValueError("the first objective is the study's (a throughput); a latency may come second")
        if len(set(objectives)) != len(objectives):
            raise ValueError("objectives repeat")
        return objectives

    @model_validator(mode="after")
    def _conditions(self) -> SearchSpec:
        if not self.knobs and not self.parallelism:
            raise ValueError("a search needs 'knobs', 'parallelism' or both")
        return self

    def moe_layouts(self) -> bool:
        """Whether a layout (not a split) has expert parallelism or attention data parallel."""
        return any(needs_moe(layout) for layout in self.parallelism if SPLIT not in layout)

    # ----- the space as Optuna sees it -------------------------------------------------------------------

    def distributions(self) -> dict[str, BaseDistribution]:
        """One Optuna distribution per knob (and ``parallelism`` over the layouts' labels). A knob whose
        choices are all numbers is ordered: the sampler sees the position of a value among its sorted
        choices (an integer), so it knows that 32 lies between 16 and 64."""
        found: dict[str, BaseDistribution] = {}
        for name, values in sorted(self.knobs.items()):
            if isinstance(values, IntRange):
                found[name] = IntDistribution(values.low, values.high, step=values.step or 1, log=values.log)
            elif (ordered := _ordered(values)) is not None:
                found[name] = IntDistribution(0, len(ordered) - 1)
            else:
                found[name] = CategoricalDistribution(values)
        if self.parallelism:
            found[PARALLELISM] = IntDistribution(0, len(self.parallelism) - 1)
        return found

    def _layout_order(self) -> list[str]:
        """The layouts' labels ordered by accelerators per replica (a split's: its prefill and decode
        groups together), then expert parallelism: the sampler's numbering of them (their coordinates
        are :meth:`embeddings`'s)."""
        ordered = sorted(self.parallelism, key=lambda layout: (*_layout_size(layout), layout_label(layout)))
        return [layout_label(layout) for layout in ordered]

    def embeddings(self) -> dict[str, list[list[float]]]:
        """The coordinates the sampler gives each layout, in the order it numbers them: every degree of
        parallelism on its own axis (:func:`layout_features`), each scaled to [0, 1] over the space's
        layouts, those that never change left out. TP1…TP8 lie evenly on a line as their positions
        would, while TP2 lies as near TP1 as TP2 EP2 does: no layout stands between two that differ
        in another degree."""
        if not self.parallelism:
            return {}
        features = {layout_label(layout): layout_features(layout) for layout in self.parallelism}
        rows = [features[label] for label in self._layout_order()]
        columns = []
        for name in sorted({name for row in rows for name in row}):
            values = [row.get(name, 0.0) for row in rows]
            low, high = min(values), max(values)
            if high > low:
                columns.append([(value - low) / (high - low) for value in values])
        if not columns:
            return {PARALLELISM: [[0.0] for _ in rows]}
        return {PARALLELISM: [list(point) for point in zip(*columns, strict=True)]}

    def to_sampler(self, params: dict[str, Any]) -> dict[str, Any]:
        """A point's parameters as the sampler sees them (an ordered knob's value as its position)."""
        found = {}
        for name, value in params.items():
            ordered = self._layout_order() if name == PARALLELISM else _ordered(self.knobs.get(name))
            found[name] = ordered.index(value) if ordered is not None and value in ordered else value
        return found

    def from_sampler(self, params: dict[str, Any]) -> dict[str, Any]:
        """The inverse of :meth:`to_sampler`: the sampler's point as knob values."""
        found = {}
        for name, value in params.items():
            ordered = self._layout_order() if name == PARALLELISM else _ordered(self.knobs.get(name))
            found[name] = ordered[value] if ordered is not None else value
        return found

    def size(self) -> int:
        """How many points the space has."""
        sizes = [
            values.size() if isinstance(values, IntRange) else len(values) for values in self.knobs.values()
        ]
        return math.prod(sizes) * max(1, len(self.parallelism))

    def changes(self, params: dict[str, Any]) -> dict[str, Any]:
        """A point's configuration changes (a layout becomes its fields; replicas fill the budget later)."""
        found = {name: value for name, value in params.items() if name != PARALLELISM}
        if PARALLELISM in params:
            layout = next(item for item in self.parallelism if layout_label(item) == params[PARALLELISM])
            found.update({"tp": 1, "dp": 1, "ep": 1, "dp_attention": None})
            found.update({SPLIT: layout[SPLIT]} if SPLIT in layout else {**layout, SPLIT: None})
        return found

    def choice_values(self) -> list[tuple[str, Any]]:
        """Every (knob, choice) pair, for checking them against the engine."""
        return [
            (name, value)
            for name, values in self.knobs.items()
            if not isinstance(values, IntRange)
            for value in values
        ]


def _ordered(values: Any) -> list[int | float] | None:
    """A knob's choices sorted, when they are all numbers (not booleans); None otherwise."""
    if not isinstance(values, tuple) or len(values) < 3:
        return None
    if not all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in values):
        return None
    return sorted(values)


def _layout_size(layout: dict[str, Any]) -> tuple[int, int]:
    """A layout's accelerators per replica and expert-parallel size, the order the sampler numbers them in."""
    if SPLIT in layout:
        return Disaggregation.model_validate(layout[SPLIT]).gpus, 1
    return layout.get("tp", 1) * layout.get("dp", 1), layout.get("ep", 1)


def layout_features(layout: dict[str, Any]) -> dict[str, float]:
    """A layout as numbers: log2 of each degree of parallelism (so 1, 2, 4, 8 are evenly spaced), 1 for
    a switch that is on; a split's degrees per role (``prefill tp``, …) and ``split`` 1."""
    if SPLIT in layout:
        split = Disaggregation.model_validate(layout[SPLIT])
        return {
            "split": 1.0,
            **{
                f"{role} {name}": math.log2(getattr(split.group(role), name))
                for role in ROLES
                for name in ("workers", "tp", "dp", "ep")
            },
        }
    return {
        name: float(bool(layout.get(name))) if name in SWITCHES else math.log2(layout.get(name, 1))
        for name in LAYOUT_FIELDS
    }


def layout_label(layout: dict[str, Any]) -> str:
    """``TP4``, ``TP4 EP4``, ``TP2 DP4 EP8 attention-DP``, ``3P1D (P TP2, D TP2)``: a layout as people
    write it."""
    if SPLIT in layout:
        return Disaggregation.model_validate(layout[SPLIT]).label()
    words = [
        f"{name.upper()}{layout[name]}" for name in LAYOUT_FIELDS if name in layout and name not in SWITCHES
    ]
    return " ".join([*words, *(["attention-DP"] if layout.get("dp_attention") else [])])
