"""Dataset model shared by the dataset kinds, and the registry that loads one by its kind.

Each kind's module defines a loader ``(DatasetSpec, Optional[Tokenizer]) -> Dataset``; the package's
face (``perflab.bench.datasets``) registers them with :func:`register`, so this module imports none of
them. A dataset holds single-turn ``samples``, or ``sessions`` (conversations replayed turn by turn with
the server's real replies in the history), and for a trace the arrival time of each sample.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from perflab.bench.errors import BenchError
from perflab.bench.tokenizer import Tokenizer

DEFAULT_OUTPUT_LEN = 128
GROUP_DISTRIBUTIONS = ("uniform", "zipf")


@dataclass
class Sample:
    """One prompt to send: its text, its length in tokens when known, and max_tokens to ask for."""

    prompt: str
    prompt_tokens: Optional[int]
    output_len: int


Message = Dict[str, str]


@dataclass
class Turn:
    """One turn of a session: the messages it adds (never the assistant's reply, which the server
    gives), their length in tokens when known, and max_tokens to ask for."""

    messages: List[Message]
    prompt_tokens: Optional[int]
    output_len: int


@dataclass
class Session:
    """A conversation: its turns in order, and the shared-prefix group it belongs to (if any)."""

    turns: List[Turn]
    group: Optional[int] = None


@dataclass
class SharedPrefixSpec:
    """The generated-shared-prefix workload (SGLang's ``--gsp-*`` options, 0.5.23 defaults)."""

    num_groups: int = 64
    system_prompt_len: int = 2048
    question_len: int = 128
    num_turns: int = 1
    distribution: str = "uniform"
    zipf_alpha: Optional[float] = None


@dataclass
class DatasetSpec:
    """Which dataset to build and how (the bench's dataset options). ``count`` is the number of
    prompts, or of sessions for a session dataset."""

    kind: str = "random"
    path: Optional[str] = None
    count: int = 1000
    input_len: int = 1024
    output_len: Optional[int] = None
    range_ratio: float = 0.0
    prefix_len: int = 0
    seed: int = 0
    shared_prefix: SharedPrefixSpec = field(default_factory=SharedPrefixSpec)
    max_turns: Optional[int] = None
    block_size: int = 512


@dataclass
class Dataset:
    """The samples (or sessions) plus how their token lengths were established; ``arrivals_s`` gives
    a trace's due time of each sample (seconds from the first, before any time scale)."""

    samples: List[Sample]
    prompt_tokens_source: str
    notes: List[str] = field(default_factory=list)
    sessions: Optional[List[Session]] = None
    arrivals_s: Optional[List[float]] = None


Loader = Callable[[DatasetSpec, Optional[Tokenizer]], Dataset]
# kind → (loader, whether it reads --dataset-path)
_LOADERS: Dict[str, Tuple[Loader, bool]] = {}


def register(kind: str, loader: Loader, needs_path: bool) -> None:
    """Make ``kind`` loadable by ``loader`` (``needs_path``: it reads the file ``--dataset-path``)."""
    _LOADERS[kind] = (loader, needs_path)


def dataset_kinds() -> Tuple[str, ...]:
    """Every registered dataset kind, in registration order."""
    return tuple(_LOADERS)


def prompt_length(tokenizer: Optional[Tokenizer], text: str) -> Optional[int]:
    return tokenizer.count(text) if tokenizer is not None else None


def lengths_source(tokenizer: Optional[Tokenizer], fallback: str) -> str:
    return tokenizer.kind if tokenizer is not None else fallback


def cycle_to(
    items: List, count: int, what: str, notes: List[str], unit: str = "prompts", uses: str = "requests"
) -> List:
    """Exactly ``count`` items, reusing them in order when the source has fewer."""
    if len(items) < count:
        notes.append(f"{what} has {len(items)} usable {unit}; reusing them for {count} {uses}")
    return [items[i % len(items)] for i in range(count)]


def load_dataset(spec: DatasetSpec, tokenizer: Optional[Tokenizer]) -> Dataset:
    """Build the dataset ``spec`` describes; raises ``DatasetError``/``BenchError`` on bad input."""
    entry = _LOADERS.get(spec.kind)
    if entry is None:
        raise BenchError(f"unknown dataset {spec.kind!r}; choose one of {', '.join(dataset_kinds())}")
    loader, needs_path = entry
    if needs_path and spec.path is None:
        raise BenchError(f"--dataset {spec.kind} needs --dataset-path")
    return loader(spec, tokenizer)
