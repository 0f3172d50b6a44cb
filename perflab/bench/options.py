"""``BenchOptions``: everything one benchmark run needs, with the parsers and checks for it.

The CLI fills it from argv; the app can build one directly and call ``perflab.bench.run_benchmark``.
``validate()`` raises ``BenchError`` with a one-line message for every bad value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from perflab.bench.datasets.base import DATASET_KINDS, DatasetSpec
from perflab.bench.errors import BenchError
from perflab.bench.metrics import DEFAULT_PERCENTILES, SLO_METRICS

ENDPOINTS = ("chat", "completions")
DEFAULT_TIMEOUT_S = 6 * 3600.0
PROGRESS_MODES = ("bar", "json", "none")


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
    """One benchmark run's settings (the CLI flags, by the same names)."""

    base_urls: List[str]
    model: str
    endpoint: str = "chat"
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
    goodput: Dict[str, float] = field(default_factory=dict)
    tokenizer: Optional[str] = None
    api_key: Optional[str] = None
    range_ratio: float = 0.0
    prefix_len: int = 0
    ramp_up_seconds: float = 0.0
    timeout: float = DEFAULT_TIMEOUT_S
    ignore_eos: bool = True
    temperature: Optional[float] = 0.0
    label: Optional[str] = None
    progress: str = "bar"

    def validate(self) -> None:
        if not self.base_urls:
            raise BenchError("--base-url is required")
        self.base_urls = [normalize_base_url(url) for url in self.base_urls]
        if not self.model.strip():
            raise BenchError("--model must not be empty")
        if self.endpoint not in ENDPOINTS:
            raise BenchError(f"--endpoint must be one of {', '.join(ENDPOINTS)}")
        if self.dataset not in DATASET_KINDS:
            raise BenchError(f"--dataset must be one of {', '.join(DATASET_KINDS)}")
        if self.num_prompts < 1:
            raise BenchError("--num-prompts must be at least 1")
        if self.warmup < 0:
            raise BenchError("--warmup must not be negative")
        if self.output_len is not None and self.output_len < 1:
            raise BenchError("--output-len must be at least 1")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise BenchError("--max-concurrency must be at least 1")
        if not self.timeout > 0:
            raise BenchError("--timeout must be positive")
        if self.progress not in PROGRESS_MODES:
            raise BenchError(f"progress must be one of {', '.join(PROGRESS_MODES)}")

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
        )

    def to_argv(self) -> List[str]:
        """The ``perflab bench`` flags that reproduce these options (the API key left out)."""
        argv: List[str] = []
        for url in self.base_urls:
            argv += ["--base-url", url]
        argv += ["--model", self.model, "--endpoint", self.endpoint, "--dataset", self.dataset]
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
        if self.goodput:
            argv += ["--goodput"] + [f"{name}:{limit:g}" for name, limit in self.goodput.items()]
        if self.tokenizer is not None:
            argv += ["--tokenizer", self.tokenizer]
        argv += ["--timeout", f"{self.timeout:g}"]
        if not self.ignore_eos:
            argv.append("--no-ignore-eos")
        if self.temperature is not None:
            argv += ["--temperature", f"{self.temperature:g}"]
        if self.label is not None:
            argv += ["--label", self.label]
        return argv

    def headers(self) -> Dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept-Encoding": "identity",
            "User-Agent": "perflab-bench",
        }
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers
