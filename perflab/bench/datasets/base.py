"""Dataset model shared by the dataset kinds, and the dispatcher that loads one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from perflab.bench.errors import BenchError
from perflab.bench.tokenizer import Tokenizer

DATASET_KINDS = ("random", "sharegpt", "custom")


@dataclass
class Sample:
    """One prompt to send: its text, its length in tokens when known, and max_tokens to ask for."""

    prompt: str
    prompt_tokens: Optional[int]
    output_len: int


@dataclass
class DatasetSpec:
    """Which dataset to build and how (the bench's dataset options)."""

    kind: str = "random"
    path: Optional[str] = None
    count: int = 1000
    input_len: int = 1024
    output_len: Optional[int] = None
    range_ratio: float = 0.0
    prefix_len: int = 0
    seed: int = 0


@dataclass
class Dataset:
    """The samples plus how their token lengths were established."""

    samples: List[Sample]
    prompt_tokens_source: str
    notes: List[str] = field(default_factory=list)


DEFAULT_OUTPUT_LEN = 128


def prompt_length(tokenizer: Optional[Tokenizer], text: str) -> Optional[int]:
    return tokenizer.count(text) if tokenizer is not None else None


def lengths_source(tokenizer: Optional[Tokenizer], fallback: str) -> str:
    return tokenizer.kind if tokenizer is not None else fallback


def cycle_to(samples: List[Sample], count: int, what: str, notes: List[str]) -> List[Sample]:
    """Exactly ``count`` samples, reusing them in order when the source has fewer."""
    if len(samples) < count:
        notes.append(f"{what} has {len(samples)} usable prompts; reusing them for {count} requests")
    return [samples[i % len(samples)] for i in range(count)]


def load_dataset(spec: DatasetSpec, tokenizer: Optional[Tokenizer]) -> Dataset:
    """Build the dataset ``spec`` describes; raises ``DatasetError``/``BenchError`` on bad input."""
    if spec.kind == "random":
        from perflab.bench.datasets.synthetic import random_dataset

        return random_dataset(spec, tokenizer)
    if spec.path is None:
        raise BenchError(f"--dataset {spec.kind} needs --dataset-path")
    if spec.kind == "sharegpt":
        from perflab.bench.datasets.sharegpt import sharegpt_dataset

        return sharegpt_dataset(spec, tokenizer)
    if spec.kind == "custom":
        from perflab.bench.datasets.custom import custom_dataset

        return custom_dataset(spec, tokenizer)
    raise BenchError(f"unknown dataset {spec.kind!r}; choose one of {', '.join(DATASET_KINDS)}")
