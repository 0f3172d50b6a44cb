"""Benchmark profiles: what traffic a run sends, the seeds' presets, and the argv that sends it.

A :class:`BenchmarkProfile` describes one load: dataset (random token lengths, ShareGPT, a custom
dataset, groups sharing a prefix, multi-turn sessions, or a Mooncake trace), prompt (or session) count,
arrival process (request rate, burstiness, concurrency cap), warm-up, goodput SLOs and reported
percentiles, optionally a :class:`Sweep` for load curves. It renders the ``perflab bench`` argv the
runner executes on the host (:meth:`BenchmarkProfile.bench_args`) and the equivalent ``vllm bench
serve`` command reports print (:meth:`BenchmarkProfile.vllm_bench_command`; a comment and the
``perflab bench`` command for a dataset vLLM 0.32 lacks). Repetitions on one launch and the points of
a sweep each draw their prompts afresh (:meth:`BenchmarkProfile.fresh_draw`) and, by default, empty
the engine's prefix cache first where it serves a reset (``flush_cache``).

:data:`PRESETS` are the seeds' profiles, then two of today's traffic: ``agentic`` (sessions of four
turns over eight 2048-token tool preambles, 64 in flight, half a second of think time between turns)
and ``shared_prefix`` (single requests over 32 system prompts of Zipf popularity). Seeds
000/001/003/004 use ``vllm bench serve`` defaults (all prompts at once, ``--request-rate inf``) with
``--seed 42`` on random datasets; seed 004 adds ShareGPT at concurrency 4 ("ShareGPT batch size 4").
Seed 002's GPUStack/guidellm profiles send at a constant ``request_rate: 1000`` and its results report
"Maximum request concurrency: 512", so those presets cap concurrency at 512.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from perflab.bench.options import (
    MAX_NUM_PROMPTS,
    MAX_SECONDS,
    MAX_SLOWDOWN,
    MAX_TOKENS_PER_PROMPT,
    MAX_TURNS,
    MAX_WARMUP,
    SESSION_DATASETS,
    SHARED_PREFIX,
    TRACE_DATASET,
)
from perflab.bench.rounds import derived_seed
from perflab.engines.config import refuse_flag_like
from perflab.engines.flags import format_value

SHAREGPT_FILE = "ShareGPT_V3_unfiltered_cleaned_split.json"
# Datasets made by the bench (no file), those read from a file a profile must name, and vLLM's own.
GENERATED_DATASETS = ("random", SHARED_PREFIX)
FILE_DATASETS = ("custom", "agentic-trace", TRACE_DATASET)
VLLM_DATASETS = ("random", "sharegpt", "custom")
DEFAULT_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0)
SEED_002_CONCURRENCY = 512
ENDPOINT_PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
VLLM_BACKENDS = {"chat": "openai-chat", "completions": "openai"}


class GoodputSLOs(BaseModel):
    """Per-request service-level objectives; goodput counts requests meeting all that are set."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ttft_ms: float | None = Field(None, gt=0)
    tpot_ms: float | None = Field(None, gt=0)
    e2el_ms: float | None = Field(None, gt=0)

    def as_pairs(self) -> list[str]:
        """``metric:milliseconds`` words, as ``--goodput`` takes them."""
        pairs = (("ttft", self.ttft_ms), ("tpot", self.tpot_ms), ("e2el", self.e2el_ms))
        return [f"{name}:{format_value(value)}" for name, value in pairs if value is not None]


class SharedPrefix(BaseModel):
    """The generated-shared-prefix workload: groups of requests sharing a system prompt (SGLang 0.5.23's
    ``--gsp-*`` options and defaults); ``num_turns`` above 1 makes every request a session."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    num_groups: int = Field(64, ge=1, le=MAX_NUM_PROMPTS)
    system_prompt_len: int = Field(2048, ge=0, le=MAX_TOKENS_PER_PROMPT)
    question_len: int = Field(128, ge=1, le=MAX_TOKENS_PER_PROMPT)
    num_turns: int = Field(1, ge=1, le=MAX_TURNS)
    distribution: Literal["uniform", "zipf"] = "uniform"
    zipf_alpha: float | None = Field(None, gt=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _alpha_with_zipf(self) -> SharedPrefix:
        if (self.distribution == "zipf") != (self.zipf_alpha is not None):
            raise ValueError("zipf_alpha goes with distribution: zipf (and only with it)")
        return self


class TraceReplay(BaseModel):
    """How a Mooncake trace is replayed: at its own arrival times scaled by ``slowdown_factor`` (2 =
    twice as slow; off: at the profile's request rate), no request due after ``max_seconds``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    use_timestamps: bool = True
    slowdown_factor: float = Field(1.0, gt=0, le=MAX_SLOWDOWN)
    max_seconds: float | None = Field(None, gt=0, le=MAX_SECONDS)
    block_size: int = Field(512, ge=1, le=MAX_TOKENS_PER_PROMPT)


class Sweep(BaseModel):
    """A load curve: the same profile at several request rates or concurrency caps, lowest first."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["request_rate", "max_concurrency"]
    values: tuple[float, ...] = Field(min_length=1)
    stop_when_flat: bool = True

    @field_validator("values")
    @classmethod
    def _positive_ascending(cls, values: tuple[float, ...]) -> tuple[float, ...]:
        if any(value <= 0 for value in values):
            raise ValueError("sweep values must be > 0")
        return tuple(sorted(values))

    @model_validator(mode="after")
    def _whole_concurrency(self) -> Sweep:
        if self.kind == "max_concurrency" and any(not float(value).is_integer() for value in self.values):
            raise ValueError("max_concurrency sweep values must be whole numbers")
        return self


class BenchmarkProfile(BaseModel):
    """One benchmark load. Token lengths apply to random datasets; ShareGPT may override output length.

    An infinite request rate is written to JSON as the string ``"Infinity"`` and read back as ``inf``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="strings")

    name: str = Field(min_length=1, pattern=r"^[a-z0-9][a-z0-9_\-]*$")
    title: str = Field(min_length=1)
    dataset: Literal[
        "random",
        "sharegpt",
        "custom",
        "generated-shared-prefix",
        "sharegpt-multi-turn",
        "agentic-trace",
        "mooncake",
    ]
    dataset_ref: str | None = Field(
        None,
        description="custom, agentic-trace, mooncake: dataset id, content hash or path; "
        "sharegpt (also multi-turn): file name of the dump",
    )
    input_len: int | None = Field(None, ge=1, le=MAX_TOKENS_PER_PROMPT)
    output_len: int | None = Field(None, ge=1, le=MAX_TOKENS_PER_PROMPT)
    num_prompts: int = Field(ge=1, le=MAX_NUM_PROMPTS)
    request_rate: float = Field(math.inf, gt=0, description="requests/s; inf sends all at once")
    burstiness: float = Field(1.0, gt=0, description="gamma shape of arrivals; 1 = Poisson")
    max_concurrency: int | None = Field(None, ge=1)
    seed: int | None = None
    warmup: int = Field(0, ge=0, le=MAX_WARMUP, description="requests sent and discarded before measuring")
    range_ratio: float = Field(0.0, ge=0, lt=1)
    prefix_len: int = Field(0, ge=0, le=MAX_TOKENS_PER_PROMPT)
    endpoint: Literal["chat", "completions"] = "chat"
    goodput: GoodputSLOs = GoodputSLOs()
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES
    sweep: Sweep | None = None
    scale: float = Field(1.0, gt=0, description="fraction of the preset's prompts (demo runs)")
    shared_prefix: SharedPrefix | None = None
    max_turns: int | None = Field(None, ge=1, le=MAX_TURNS, description="sessions: turns kept per session")
    turn_delay_ms: float = Field(0.0, ge=0, le=MAX_SECONDS * 1000.0, description="sessions: mean think time")
    turn_delay_stddev_ms: float = Field(0.0, ge=0, le=MAX_SECONDS * 1000.0)
    trace: TraceReplay | None = None
    flush_cache: bool = Field(True, description="empty the prefix cache before measuring, where served")

    @field_validator("percentiles")
    @classmethod
    def _percentiles_in_range(cls, values: tuple[float, ...]) -> tuple[float, ...]:
        if not values or any(not 0 < value < 100 for value in values):
            raise ValueError("percentiles must be a non-empty list of values between 0 and 100")
        return tuple(sorted(set(values)))

    @field_validator("dataset_ref")
    @classmethod
    def _dataset_ref_is_a_name(cls, value: str | None) -> str | None:
        return None if value is None else refuse_flag_like("dataset_ref", value)

    @model_validator(mode="after")
    def _dataset_fields(self) -> BenchmarkProfile:
        if self.dataset == "random" and (self.input_len is None or self.output_len is None):
            raise ValueError("a random dataset needs input_len and output_len")
        if self.dataset != "random":
            if self.input_len is not None:
                raise ValueError(f"input_len comes from the {self.dataset} dataset; leave it unset")
            if self.prefix_len or (self.range_ratio and self.dataset != SHARED_PREFIX):
                raise ValueError("range_ratio and prefix_len apply to random datasets only")
        if self.dataset in FILE_DATASETS and not self.dataset_ref:
            raise ValueError(f"a {self.dataset} dataset needs dataset_ref (dataset id, content hash or path)")
        if (self.shared_prefix is not None) != (self.dataset == SHARED_PREFIX):
            raise ValueError(f"shared_prefix describes the {SHARED_PREFIX} dataset (and only it)")
        if (self.trace is not None) and self.dataset != TRACE_DATASET:
            raise ValueError(f"trace applies to the {TRACE_DATASET} dataset only")
        if self.sessions and self.endpoint != "chat":
            raise ValueError("a session workload sends messages: it needs endpoint chat")
        if not self.sessions and (self.max_turns or self.turn_delay_ms or self.turn_delay_stddev_ms):
            raise ValueError("max_turns and turn_delay_ms apply to session workloads only")
        return self

    @property
    def sessions(self) -> bool:
        """Whether every request is a turn of a session (sent with the history so far)."""
        if self.dataset == SHARED_PREFIX:
            return self.shared_prefix is not None and self.shared_prefix.num_turns > 1
        return self.dataset in SESSION_DATASETS

    @property
    def needs_dataset_file(self) -> bool:
        """Whether the benchmark reads a dataset file (the generated datasets need none)."""
        return self.dataset not in GENERATED_DATASETS

    def fresh_draw(self, index: int | str) -> BenchmarkProfile:
        """This profile for its ``index``-th measurement on one launch (a repetition, a sweep point; or
        a named draw, such as a search's screening): the same for the first, another seed after it
        (:func:`~perflab.bench.rounds.derived_seed`), so each sends a fresh draw of prompts."""
        if index == 0:
            return self
        return self.model_copy(update={"seed": derived_seed(self.seed or 0, index)})

    # ----- load curves ------------------------------------------------------------------------------

    def at(self, value: float) -> BenchmarkProfile:
        """This profile at one sweep point (the request rate or the concurrency cap set to ``value``)."""
        if self.sweep is None:
            raise ValueError(f"profile {self.name!r} has no sweep")
        field_name = self.sweep.kind
        point = int(value) if field_name == "max_concurrency" else float(value)
        return self.model_copy(update={field_name: point, "sweep": None})

    def sweep_points(self) -> list[BenchmarkProfile]:
        """One profile per sweep value, lowest load first, each a fresh draw of prompts (just this
        profile without a sweep)."""
        if self.sweep is None:
            return [self]
        return [self.at(value).fresh_draw(index) for index, value in enumerate(self.sweep.values)]

    # ----- rendering --------------------------------------------------------------------------------

    def _dataset_path(self, dataset_path: str | None) -> str | None:
        if dataset_path is not None:
            return dataset_path
        if self.dataset in ("sharegpt", "sharegpt-multi-turn"):
            return self.dataset_ref or SHAREGPT_FILE
        return self.dataset_ref if self.dataset in FILE_DATASETS else None

    def bench_args(
        self,
        *,
        base_urls: Sequence[str],
        model: str,
        dataset_path: str | None = None,
        tokenizer: str | None = None,
        save_result: str | None = None,
    ) -> list[str]:
        """The ``perflab bench`` arguments for this profile against ``base_urls`` (one per replica)."""
        if not base_urls:
            raise ValueError("bench_args needs at least one base URL")
        args: list[str] = []
        for url in base_urls:
            args += ["--base-url", url]
        args += ["--model", model, "--endpoint", self.endpoint, "--dataset", self.dataset]
        path = self._dataset_path(dataset_path)
        if path is not None:
            args += ["--dataset-path", path]
        if self.input_len is not None:
            args += ["--input-len", str(self.input_len)]
        if self.output_len is not None:
            args += ["--output-len", str(self.output_len)]
        args += [
            "--num-prompts",
            str(self.num_prompts),
            "--request-rate",
            format_value(self.request_rate),
            "--burstiness",
            format_value(self.burstiness),
        ]
        if self.max_concurrency is not None:
            args += ["--max-concurrency", str(self.max_concurrency)]
        if self.seed is not None:
            args += ["--seed", str(self.seed)]
        args += ["--warmup", str(self.warmup)]
        if self.dataset == "random":
            args += ["--range-ratio", format_value(self.range_ratio), "--prefix-len", str(self.prefix_len)]
        args += self._workload_args()
        args += ["--percentiles", ",".join(format_value(value) for value in self.percentiles)]
        goodput = self.goodput.as_pairs()
        if goodput:
            args += ["--goodput", *goodput]
        if tokenizer is not None:
            args += ["--tokenizer", tokenizer]
        if save_result is not None:
            args += ["--save-result", save_result]
        return args

    def _workload_args(self) -> list[str]:
        """The ``perflab bench`` flags of sessions, shared prefixes, traces and the cache reset (SGLang
        0.5.23's names; the think time AIPerf's)."""
        args: list[str] = []
        shape = self.shared_prefix
        if shape is not None:
            args += [
                "--gsp-num-groups",
                str(shape.num_groups),
                "--gsp-system-prompt-len",
                str(shape.system_prompt_len),
                "--gsp-question-len",
                str(shape.question_len),
                "--gsp-num-turns",
                str(shape.num_turns),
                "--gsp-group-distribution",
                shape.distribution,
                "--range-ratio",
                format_value(self.range_ratio),
            ]
            if shape.zipf_alpha is not None:
                args += ["--gsp-zipf-alpha", format_value(shape.zipf_alpha)]
        if self.max_turns is not None:
            args += ["--agentic-max-turns", str(self.max_turns)]
        if self.turn_delay_ms or self.turn_delay_stddev_ms:
            args += [
                "--conversation-turn-delay-mean",
                format_value(self.turn_delay_ms),
                "--conversation-turn-delay-stddev",
                format_value(self.turn_delay_stddev_ms),
            ]
        trace = self.trace
        if self.dataset == TRACE_DATASET:
            trace = trace or TraceReplay()
            if trace.use_timestamps:
                args += ["--use-trace-timestamps"]
            args += ["--mooncake-slowdown-factor", format_value(trace.slowdown_factor)]
            args += ["--mooncake-block-size", str(trace.block_size)]
            if trace.max_seconds is not None:
                args += ["--max-seconds", format_value(trace.max_seconds)]
        if self.flush_cache:
            args.append("--flush-cache")
        return args

    def vllm_bench_command(
        self,
        model: str,
        *,
        base_url: str | None = None,
        dataset_path: str | None = None,
        same_requests: bool = False,
    ) -> str:
        """The equivalent ``vllm bench serve`` command, worded as the seeds' "Benchmark Script"
        (``dataset_path`` names the dataset file instead of ``dataset_ref``).

        Percentiles are left out: they only choose which quantiles vLLM prints. With
        ``same_requests`` the command also states what ``perflab bench`` does by default and vLLM 0.32.0
        does not (greedy sampling, ``ignore_eos`` beyond random datasets) and prints the same sections,
        so it runs unchanged under both tools and sends the same requests.
        """
        if self.dataset not in VLLM_DATASETS:
            args = self.bench_args(
                base_urls=[base_url or "http://127.0.0.1:8000"], model=model, dataset_path=dataset_path
            )
            return (
                f"# vllm bench serve (vLLM 0.32.0) has no {self.dataset} dataset; perflab bench sends it: "
                + shlex.join(["perflab", "bench", *args])
            )
        words = ["vllm", "bench", "serve", "--model", model]
        if base_url is not None:
            words += ["--base-url", base_url]
        words += ["--backend", VLLM_BACKENDS[self.endpoint], "--endpoint", ENDPOINT_PATHS[self.endpoint]]
        words += ["--dataset-name", self.dataset]
        path = self._dataset_path(dataset_path)
        if path is not None:
            words += ["--dataset-path", path]
        if self.dataset == "random":
            words += ["--random-input-len", str(self.input_len), "--random-output-len", str(self.output_len)]
            if self.range_ratio:
                words += ["--random-range-ratio", format_value(self.range_ratio)]
            if self.prefix_len:
                words += ["--random-prefix-len", str(self.prefix_len)]
        elif self.dataset == "sharegpt" and self.output_len is not None:
            words += ["--sharegpt-output-len", str(self.output_len)]
        words += ["--num-prompts", str(self.num_prompts)]
        if math.isfinite(self.request_rate):
            words += ["--request-rate", format_value(self.request_rate)]
        if self.burstiness != 1.0:
            words += ["--burstiness", format_value(self.burstiness)]
        if self.max_concurrency is not None:
            words += ["--max-concurrency", str(self.max_concurrency)]
        if self.seed is not None:
            words += ["--seed", str(self.seed)]
        if self.warmup:
            words += ["--num-warmups", str(self.warmup)]
        goodput = self.goodput.as_pairs()
        if goodput:
            words += ["--goodput", *goodput]
        if same_requests:
            words += ["--temperature", "0"]
            if self.dataset != "random":
                words.append("--ignore-eos")
            words += [
                "--percentile-metrics",
                "ttft,tpot,itl,e2el",
                "--metric-percentiles",
                ",".join(format_value(value) for value in self.percentiles),
            ]
        return shlex.join(words)


def scaled(profile: BenchmarkProfile, factor: float) -> BenchmarkProfile:
    """``profile`` with ``factor`` of its prompts and warm-up (at least one prompt), for quick demo runs."""
    if factor <= 0:
        raise ValueError("scale factor must be > 0")
    return profile.model_copy(
        update={
            "num_prompts": max(1, round(profile.num_prompts * factor)),
            "warmup": round(profile.warmup * factor),
            "scale": profile.scale * factor,
        }
    )


def _random(
    name: str, title: str, input_len: int, output_len: int, num_prompts: int, **load: Any
) -> BenchmarkProfile:
    return BenchmarkProfile(
        name=name,
        title=title,
        dataset="random",
        input_len=input_len,
        output_len=output_len,
        num_prompts=num_prompts,
        seed=42,
        **load,
    )


_SEED_002_LOAD = {"request_rate": 1000.0, "max_concurrency": SEED_002_CONCURRENCY}

PRESETS: dict[str, BenchmarkProfile] = {
    profile.name: profile
    for profile in (
        BenchmarkProfile(name="sharegpt", title="ShareGPT", dataset="sharegpt", num_prompts=1000),
        _random("short", "Short Prompt", 128, 4, 1000),
        _random("medium", "Medium Prompt", 2000, 100, 500),
        _random("long", "Long Prompt", 4000, 200, 500),
        _random("very_long", "Very Long Prompt", 32000, 100, 100),
        BenchmarkProfile(
            name="sharegpt_concurrency_4",
            title="ShareGPT batch size 4",
            dataset="sharegpt",
            num_prompts=1000,
            max_concurrency=4,
        ),
        BenchmarkProfile(
            name="sharegpt_profile",
            title="ShareGPT Profile",
            dataset="sharegpt",
            num_prompts=1000,
            **_SEED_002_LOAD,
        ),
        _random("throughput", "Throughput Profile", 1024, 128, 1000, **_SEED_002_LOAD),
        _random("long_context", "Long Context Profile", 32000, 100, 100, **_SEED_002_LOAD),
        _random("generation_heavy", "Generation Heavy Profile", 1000, 2000, 200, **_SEED_002_LOAD),
        BenchmarkProfile(
            name="agentic",
            title="Agentic sessions",
            dataset=SHARED_PREFIX,
            shared_prefix=SharedPrefix(num_groups=8, system_prompt_len=2048, question_len=256, num_turns=4),
            output_len=128,
            num_prompts=256,
            max_concurrency=64,
            turn_delay_ms=500.0,
            turn_delay_stddev_ms=250.0,
            seed=42,
        ),
        BenchmarkProfile(
            name="shared_prefix",
            title="Shared prefixes (Zipf)",
            dataset=SHARED_PREFIX,
            shared_prefix=SharedPrefix(
                num_groups=32, system_prompt_len=2048, question_len=128, distribution="zipf", zipf_alpha=1.1
            ),
            output_len=128,
            num_prompts=1000,
            max_concurrency=256,
            seed=42,
        ),
    )
}
