"""``BenchOptions``: everything one benchmark run needs, with the parsers and checks for it.

The CLI fills it from argv; the app can build one directly and call ``perflab.bench.run_benchmark``.
``validate()`` raises ``BenchError`` with a one-line message for every bad value. The endpoint is
``chat``, ``completions`` or a path (``/v1/chat/completions``); with a ``backend`` named as
``vllm bench serve`` names them (``openai``, ``vllm``, ``openai-chat``) and no endpoint, the backend
decides, as in vLLM 0.32.0.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from perflab.bench.datasets import DatasetSpec, SharedPrefixSpec, dataset_kinds
from perflab.bench.errors import BenchError
from perflab.bench.metrics import (
    CONCURRENCY_DEFINITIONS,
    DEFAULT_PERCENTILES,
    INPUT_TOKEN_DEFINITIONS,
    LATENCY_METRICS,
    SLO_METRICS,
)
from perflab.bench.vllm_flags import (
    BACKEND_ENDPOINTS,
    DEFAULT_BACKENDS,
    ENDPOINT_PATHS,
    OTHER_BACKENDS,
    OTHER_DATASETS,
    OTHER_PERCENTILE_METRICS,
    unsupported_choice,
)

ENDPOINTS = ("chat", "completions")
# vLLM 0.32.0's sampling flags (``--top-p`` …), sent in each request when given, and their types.
SAMPLING_PARAMETERS: Dict[str, type] = {
    "top_p": float,
    "top_k": int,
    "min_p": float,
    "frequency_penalty": float,
    "presence_penalty": float,
    "repetition_penalty": float,
}
# Without --timeout a request may take the TTFT allowance plus a per-token limit for each output
# token asked for: generous for any engine under load (no engine is seconds per token when it serves
# at all), yet an endless or trickling stream ends in minutes rather than hours.
TTFT_ALLOWANCE_S = 600.0
PER_TOKEN_LIMIT_S = 2.0
PROGRESS_MODES = ("bar", "json", "none")
# What one benchmark may ask for, so no flag can exhaust the memory of the machine it runs on or keep
# it busy for days before the first request: requests measured and warm-up requests, tokens of one
# prompt (its own, its shared prefix) or one output, and prompt tokens of a random dataset in all
# (warm-up and measured prompts × (prefix + the longest drawn input); about 5 characters each in
# memory, twice: the text and the request body).
MAX_NUM_PROMPTS = 100_000
MAX_WARMUP = 10_000
MAX_TOKENS_PER_PROMPT = 1_048_576
MAX_DATASET_TOKENS = 2**26
MAX_SECONDS = 7 * 24 * 3600.0
# Turns of one session, and how much a trace's times may be stretched.
MAX_TURNS = 1000
MAX_SLOWDOWN = 1000.0
# Dataset kinds whose every request is a session (generated-shared-prefix is one with num_turns > 1).
SESSION_DATASETS = ("sharegpt-multi-turn", "agentic-trace")
SHARED_PREFIX = "generated-shared-prefix"
TRACE_DATASET = "mooncake"
# SGLang 0.5.23's flags of the generated-shared-prefix options.
SHARED_PREFIX_FLAGS = {
    "num_groups": "--gsp-num-groups",
    "system_prompt_len": "--gsp-system-prompt-len",
    "question_len": "--gsp-question-len",
    "num_turns": "--gsp-num-turns",
    "distribution": "--gsp-group-distribution",
    "zipf_alpha": "--gsp-zipf-alpha",
}
# SGLang 0.5.23's default wait for an idle server before /flush_cache.
FLUSH_CACHE_TIMEOUT_S = 60.0


def _flag_value(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def parse_percentiles(text: str) -> Tuple[float, ...]:
    """``"50,90,99"`` → ``(50.0, 90.0, 99.0)``; each must lie in [0, 100]."""
    values: List[float] = []
    for item in text.split(","):
        item = item.strip()
        try:
            value = float(item)
        except ValueError:
            raise BenchError(f"--percentiles: {item!r} is not a number") from None
        if not 0.0 <= value <= 100.0:
            raise BenchError(f"--percentiles: {item} is outside [0, 100]")
        values.append(value)
    if not values:
        raise BenchError("--percentiles needs at least one value")
    return tuple(values)


def parse_percentile_metrics(text: str) -> Tuple[str, ...]:
    """``"ttft,tpot,itl"`` → ``("ttft", "tpot", "itl")``: the metrics whose sections are printed."""
    names = tuple(item.strip().lower() for item in text.split(",") if item.strip())
    for name in names:
        if name in OTHER_PERCENTILE_METRICS:
            raise BenchError(unsupported_choice("percentile metric", name, LATENCY_METRICS))
        if name not in LATENCY_METRICS:
            raise BenchError(f"--percentile-metrics: {name!r} is not one of {', '.join(LATENCY_METRICS)}")
    if not names:
        raise BenchError("--percentile-metrics needs at least one metric")
    return names


def parse_pairs(items: Sequence[str], flag: str) -> Dict[str, str]:
    """``["a=1", "b=x"]`` → ``{"a": "1", "b": "x"}`` (``--header`` and ``--metadata``)."""
    pairs: Dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BenchError(f"{flag}: {item!r} must be KEY=VALUE")
        pairs[key.strip()] = value.strip()
    return pairs


def resolve_endpoint(backend: Optional[str], endpoint: Optional[str]) -> Tuple[str, str]:
    """``(kind, path)`` of the endpoint: ``chat`` or ``completions`` and the URL path requests go to."""
    if backend is not None and backend not in BACKEND_ENDPOINTS:
        if backend in OTHER_BACKENDS:
            raise BenchError(unsupported_choice("backend", backend, list(BACKEND_ENDPOINTS)))
        raise BenchError(f"--backend {backend!r} is not one of {', '.join(BACKEND_ENDPOINTS)}")
    backend_kind = BACKEND_ENDPOINTS[backend] if backend is not None else None
    if endpoint is None:
        kind = backend_kind or "chat"
        return kind, ENDPOINT_PATHS[kind]
    if endpoint in ENDPOINTS:
        kind, path = endpoint, ENDPOINT_PATHS[endpoint]
    elif endpoint.startswith("/") and endpoint.rstrip("/").endswith("/chat/completions"):
        kind, path = "chat", endpoint
    elif endpoint.startswith("/") and endpoint.rstrip("/").endswith("/completions"):
        kind, path = "completions", endpoint
    else:
        raise BenchError(
            f"--endpoint {endpoint!r} must be chat, completions, or a path ending in "
            "/chat/completions or /completions"
        )
    if backend_kind is not None and backend_kind != kind:
        raise BenchError(
            f"--backend {backend} sends {backend_kind} requests "
            f"but --endpoint {endpoint} is a {kind} endpoint"
        )
    return kind, path


def parse_goodput(items: Sequence[str]) -> Dict[str, float]:
    """``["ttft:500", "tpot:50"]`` → ``{"ttft": 500.0, "tpot": 50.0}`` (milliseconds)."""
    slos: Dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition(":")
        name = name.strip().lower()
        if not sep or name not in SLO_METRICS:
            raise BenchError(
                f"--goodput: {item!r} must be NAME:MILLISECONDS with NAME one of {', '.join(SLO_METRICS)}"
            )
        try:
            limit = float(value)
        except ValueError:
            raise BenchError(f"--goodput: {value!r} in {item!r} is not a number") from None
        if limit < 0 or math.isnan(limit):
            raise BenchError(f"--goodput: {item!r} must not be negative")
        slos[name] = limit
    return slos


def _bounded(flag: str, value: int, low: int, high: int) -> None:
    """Refuse ``value`` of ``flag`` outside ``[low, high]``, naming the flag and the bound."""
    if value < low:
        raise BenchError(f"{flag} must be at least {low}")
    if value > high:
        raise BenchError(f"{flag} {value} is more than perflab bench takes ({high:,} at most)")


def normalize_base_url(url: str) -> str:
    """``http://host:8000/v1/`` → ``http://host:8000`` (endpoints are appended as ``/v1/...``)."""
    url = url.strip().rstrip("/")
    if not (url.startswith("http://") or url.startswith("https://")):
        raise BenchError(f"--base-url {url!r} must start with http:// or https://")
    if url.endswith("/v1"):
        url = url[: -len("/v1")]
    return url


@dataclass
class BenchOptions:
    """One benchmark run's settings (the CLI flags, by the same names).

    ``model`` is the model id (a local path also finds the tokenizer); requests name
    ``served_model_name`` when given, else ``model``. An empty ``model`` is asked of the server
    (the first of its ``/v1/models``) when the run starts.
    """

    base_urls: List[str]
    model: str
    endpoint: Optional[str] = None
    backend: Optional[str] = None
    served_model_name: Optional[str] = None
    dataset: str = "random"
    dataset_path: Optional[str] = None
    input_len: int = 1024
    output_len: Optional[int] = None
    num_prompts: int = 1000
    request_rate: float = math.inf
    burstiness: float = 1.0
    max_concurrency: Optional[int] = None
    seed: int = 0
    warmup: int = 0
    percentiles: Tuple[float, ...] = DEFAULT_PERCENTILES
    percentile_metrics: Tuple[str, ...] = LATENCY_METRICS
    goodput: Dict[str, float] = field(default_factory=dict)
    tokenizer: Optional[str] = None
    trust_remote_code: bool = False
    api_key: Optional[str] = None
    range_ratio: float = 0.0
    prefix_len: int = 0
    ramp_up_seconds: float = 0.0
    timeout: Optional[float] = None
    ignore_eos: bool = True
    temperature: Optional[float] = 0.0
    sampling: Dict[str, float] = field(default_factory=dict)
    extra_body: Dict[str, Any] = field(default_factory=dict)
    extra_headers: Dict[str, str] = field(default_factory=dict)
    request_id_prefix: Optional[str] = None
    input_tokens: str = "usage"
    peak_concurrency: str = "per-second"
    wall_clock: bool = False
    label: Optional[str] = None
    progress: str = "bar"
    shared_prefix: SharedPrefixSpec = field(default_factory=SharedPrefixSpec)
    max_turns: Optional[int] = None
    turn_delay_mean_ms: float = 0.0
    turn_delay_stddev_ms: float = 0.0
    use_trace_timestamps: bool = False
    slowdown_factor: float = 1.0
    max_seconds: Optional[float] = None
    block_size: int = 512
    flush_cache: bool = False
    flush_cache_timeout: float = FLUSH_CACHE_TIMEOUT_S
    min_duration_s: float = 0.0
    min_requests: int = 0

    @property
    def sessions(self) -> bool:
        """Whether every request is a turn of a session (sent with its history)."""
        return self.dataset in SESSION_DATASETS or (
            self.dataset == SHARED_PREFIX and self.shared_prefix.num_turns > 1
        )

    @property
    def endpoint_kind(self) -> str:
        """``chat`` or ``completions``."""
        return resolve_endpoint(self.backend, self.endpoint)[0]

    @property
    def endpoint_path(self) -> str:
        """The URL path requests are sent to, e.g. ``/v1/chat/completions``."""
        return resolve_endpoint(self.backend, self.endpoint)[1]

    @property
    def backend_name(self) -> str:
        """vLLM's name for the backend: as given, else ``openai-chat`` or ``openai`` by endpoint."""
        return self.backend or DEFAULT_BACKENDS[self.endpoint_kind]

    @property
    def request_model(self) -> str:
        """The model name each request carries."""
        return self.served_model_name or self.model

    def validate(self) -> None:
        if not self.base_urls:
            raise BenchError("--base-url is required")
        self.base_urls = [normalize_base_url(url) for url in self.base_urls]
        resolve_endpoint(self.backend, self.endpoint)
        kinds = dataset_kinds()
        if self.dataset not in kinds:
            if self.dataset in OTHER_DATASETS:
                raise BenchError(unsupported_choice("dataset", self.dataset, kinds))
            raise BenchError(f"--dataset must be one of {', '.join(kinds)}")
        _bounded("--num-prompts", self.num_prompts, 1, MAX_NUM_PROMPTS)
        _bounded("--warmup", self.warmup, 0, MAX_WARMUP)
        if self.output_len is not None:
            _bounded("--output-len", self.output_len, 1, MAX_TOKENS_PER_PROMPT)
        if self.dataset == "random":
            _bounded("--input-len", self.input_len, 1, MAX_TOKENS_PER_PROMPT)
            _bounded("--prefix-len", self.prefix_len, 0, MAX_TOKENS_PER_PROMPT)
            self._check_dataset_tokens()
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise BenchError("--max-concurrency must be at least 1")
        if self.timeout is not None and not 0 < self.timeout <= MAX_SECONDS:
            raise BenchError(f"--timeout must be a positive number of seconds, at most {MAX_SECONDS:g}")
        if not 0 <= self.ramp_up_seconds <= MAX_SECONDS:
            raise BenchError(f"--ramp-up-seconds must be between 0 and {MAX_SECONDS:g}")
        if self.progress not in PROGRESS_MODES:
            raise BenchError(f"progress must be one of {', '.join(PROGRESS_MODES)}")
        if self.input_tokens not in INPUT_TOKEN_DEFINITIONS:
            raise BenchError(f"--input-tokens must be one of {', '.join(INPUT_TOKEN_DEFINITIONS)}")
        if self.peak_concurrency not in CONCURRENCY_DEFINITIONS:
            raise BenchError(f"--peak-concurrency must be one of {', '.join(CONCURRENCY_DEFINITIONS)}")
        unknown = sorted(set(self.sampling) - set(SAMPLING_PARAMETERS))
        if unknown:
            raise BenchError(f"unknown sampling parameter {unknown[0]!r}")
        self._validate_workload()

    def _validate_workload(self) -> None:
        """The session, shared-prefix, trace and cache options, within the same bounds."""
        if self.sessions and self.endpoint_kind != "chat":
            raise BenchError(
                f"--dataset {self.dataset} sends sessions of messages: it needs the chat endpoint"
            )
        if self.dataset == SHARED_PREFIX:
            shape = self.shared_prefix
            _bounded("--gsp-num-groups", shape.num_groups, 1, MAX_NUM_PROMPTS)
            _bounded("--gsp-system-prompt-len", shape.system_prompt_len, 0, MAX_TOKENS_PER_PROMPT)
            _bounded("--gsp-question-len", shape.question_len, 1, MAX_TOKENS_PER_PROMPT)
            _bounded("--gsp-num-turns", shape.num_turns, 1, MAX_TURNS)
            total = shape.num_groups * shape.system_prompt_len + (
                self.warmup + self.num_prompts
            ) * shape.num_turns * math.ceil(shape.question_len * (1.0 + max(self.range_ratio, 0.0)))
            if total > MAX_DATASET_TOKENS:
                raise BenchError(
                    f"the --gsp-* options make {total:,} prompt tokens; perflab bench builds at most "
                    f"{MAX_DATASET_TOKENS:,}"
                )
        if self.max_turns is not None:
            _bounded("--agentic-max-turns", self.max_turns, 1, MAX_TURNS)
        for flag, value in (
            ("--conversation-turn-delay-mean", self.turn_delay_mean_ms),
            ("--conversation-turn-delay-stddev", self.turn_delay_stddev_ms),
        ):
            if not 0 <= value <= MAX_SECONDS * 1000.0:
                raise BenchError(f"{flag} must be between 0 and {MAX_SECONDS * 1000.0:g} ms")
        if self.use_trace_timestamps and self.dataset != TRACE_DATASET:
            raise BenchError(f"--use-trace-timestamps applies to --dataset {TRACE_DATASET} only")
        if not 0 < self.slowdown_factor <= MAX_SLOWDOWN:
            raise BenchError(f"--mooncake-slowdown-factor must be above 0 and at most {MAX_SLOWDOWN:g}")
        _bounded("--mooncake-block-size", self.block_size, 1, MAX_TOKENS_PER_PROMPT)
        for flag, seconds in (
            ("--max-seconds", self.max_seconds),
            ("--flush-cache-timeout", self.flush_cache_timeout),
        ):
            if seconds is not None and not 0 < seconds <= MAX_SECONDS:
                raise BenchError(f"{flag} must be a positive number of seconds, at most {MAX_SECONDS:g}")
        if not 0 <= self.min_duration_s <= MAX_SECONDS:
            raise BenchError(f"--perflab-min-duration must be between 0 and {MAX_SECONDS:g} seconds")
        _bounded("--perflab-min-requests", self.min_requests, 0, MAX_NUM_PROMPTS)

    def _check_dataset_tokens(self) -> None:
        """Refuse a random dataset of more than :data:`MAX_DATASET_TOKENS` prompt tokens in all."""
        longest = math.ceil(self.input_len * (1.0 + self.range_ratio)) if 0 <= self.range_ratio < 1 else 0
        total = (self.warmup + self.num_prompts) * (self.prefix_len + longest)
        if total > MAX_DATASET_TOKENS:
            tokens = self.prefix_len + longest
            raise BenchError(
                f"--num-prompts {self.num_prompts} and --warmup {self.warmup} of up to {tokens} tokens "
                f"(--prefix-len, --input-len, --range-ratio) make {total:,} prompt tokens; "
                f"perflab bench builds at most {MAX_DATASET_TOKENS:,}"
            )

    def dataset_spec(self) -> DatasetSpec:
        """The dataset for the warmup requests followed by the measured ones."""
        return DatasetSpec(
            kind=self.dataset,
            path=self.dataset_path,
            count=self.warmup + self.num_prompts,
            input_len=self.input_len,
            output_len=self.output_len,
            range_ratio=self.range_ratio,
            prefix_len=self.prefix_len,
            seed=self.seed,
            shared_prefix=self.shared_prefix,
            max_turns=self.max_turns,
            block_size=self.block_size,
        )

    def workload_fields(self) -> Dict[str, Any]:
        """The dataset options beyond vLLM's that shape this run's workload (the result's ``dataset``)."""
        fields: Dict[str, Any] = {}
        if self.dataset == SHARED_PREFIX:
            fields["shared_prefix"] = asdict(self.shared_prefix)
        if self.sessions:
            fields.update(
                max_turns=self.max_turns,
                turn_delay_mean_ms=self.turn_delay_mean_ms,
                turn_delay_stddev_ms=self.turn_delay_stddev_ms,
            )
        if self.dataset == TRACE_DATASET:
            fields.update(
                use_trace_timestamps=self.use_trace_timestamps,
                slowdown_factor=self.slowdown_factor,
                max_seconds=self.max_seconds,
                block_size=self.block_size,
            )
        return fields

    def to_argv(self) -> List[str]:
        """The ``perflab bench`` flags that reproduce these options (the API key left out)."""
        argv: List[str] = []
        for url in self.base_urls:
            argv += ["--base-url", url]
        if self.model:
            argv += ["--model", self.model]
        for flag, value in (
            ("--served-model-name", self.served_model_name),
            ("--backend", self.backend),
            ("--endpoint", self.endpoint),
        ):
            if value is not None:
                argv += [flag, value]
        argv += ["--dataset", self.dataset]
        if self.dataset_path is not None:
            argv += ["--dataset-path", self.dataset_path]
        argv += ["--input-len", str(self.input_len)]
        if self.output_len is not None:
            argv += ["--output-len", str(self.output_len)]
        argv += [
            "--range-ratio",
            f"{self.range_ratio:g}",
            "--prefix-len",
            str(self.prefix_len),
            "--num-prompts",
            str(self.num_prompts),
            "--request-rate",
            f"{self.request_rate:g}",
            "--burstiness",
            f"{self.burstiness:g}",
            "--ramp-up-seconds",
            f"{self.ramp_up_seconds:g}",
        ]
        if self.max_concurrency is not None:
            argv += ["--max-concurrency", str(self.max_concurrency)]
        argv += [
            "--seed",
            str(self.seed),
            "--warmup",
            str(self.warmup),
            "--percentiles",
            ",".join(f"{p:g}" for p in self.percentiles),
        ]
        if self.percentile_metrics != LATENCY_METRICS:
            argv += ["--percentile-metrics", ",".join(self.percentile_metrics)]
        if self.goodput:
            argv += ["--goodput"] + [f"{name}:{limit:g}" for name, limit in self.goodput.items()]
        if self.tokenizer is not None:
            argv += ["--tokenizer", self.tokenizer]
        if self.trust_remote_code:
            argv.append("--trust-remote-code")
        if self.timeout is not None:
            argv += ["--timeout", f"{self.timeout:g}"]
        if not self.ignore_eos:
            argv.append("--no-ignore-eos")
        if self.temperature is not None:
            argv += ["--temperature", f"{self.temperature:g}"]
        for name, value in self.sampling.items():
            argv += ["--" + name.replace("_", "-"), f"{value:g}"]
        if self.extra_body:
            argv += ["--extra-body", json.dumps(self.extra_body, sort_keys=True)]
        if self.extra_headers:
            argv += ["--header"] + [f"{key}={value}" for key, value in self.extra_headers.items()]
        if self.request_id_prefix is not None:
            argv += ["--request-id-prefix", self.request_id_prefix]
        argv += ["--input-tokens", self.input_tokens, "--peak-concurrency", self.peak_concurrency]
        if self.wall_clock:
            argv.append("--wall-clock")
        argv += self._workload_argv()
        if self.label is not None:
            argv += ["--label", self.label]
        return argv

    def _workload_argv(self) -> List[str]:
        """The session, trace and cache flags of these options (SGLang's and AIPerf's names)."""
        flags = {
            "max_turns": "--agentic-max-turns",
            "turn_delay_mean_ms": "--conversation-turn-delay-mean",
            "turn_delay_stddev_ms": "--conversation-turn-delay-stddev",
            "slowdown_factor": "--mooncake-slowdown-factor",
            "max_seconds": "--max-seconds",
            "block_size": "--mooncake-block-size",
        }
        argv: List[str] = []
        fields = self.workload_fields()
        for name, value in fields.pop("shared_prefix", {}).items():
            if value is not None:
                argv += [SHARED_PREFIX_FLAGS[name], _flag_value(value)]
        for name, value in fields.items():
            if name == "use_trace_timestamps":
                argv += ["--use-trace-timestamps"] if value else []
            elif value is not None:
                argv += [flags[name], _flag_value(value)]
        if self.flush_cache:
            argv += ["--flush-cache", "--flush-cache-timeout", f"{self.flush_cache_timeout:g}"]
        if self.min_duration_s:
            argv += ["--perflab-min-duration", f"{self.min_duration_s:g}"]
        if self.min_requests:
            argv += ["--perflab-min-requests", str(self.min_requests)]
        return argv

    def request_deadline(self, output_len: int) -> float:
        """Seconds one request asking for ``output_len`` tokens may take: ``--timeout`` when given,
        else the TTFT allowance plus the per-token limit for each token."""
        if self.timeout is not None:
            return self.timeout
        return TTFT_ALLOWANCE_S + PER_TOKEN_LIMIT_S * output_len

    def headers(self) -> Dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept-Encoding": "identity",
            "User-Agent": "perflab-bench",
        }
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        headers.update(self.extra_headers)
        return headers
