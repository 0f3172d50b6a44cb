"""Benchmark datasets, by kind (each registered here, the face of the package):

- ``random``: prompts of exact token lengths; ``sharegpt`` and ``custom``: prompts from files;
- ``generated-shared-prefix``: groups of requests sharing a system prompt, optionally multi-turn;
- ``sharegpt-multi-turn`` and ``agentic-trace``: sessions replayed turn by turn with the server's
  real replies in the history;
- ``mooncake``: a trace replayed with its arrival times and shared blocks.

``load_dataset(spec, tokenizer)`` returns the prompts (or sessions) for the warmup and measured
requests. Every sample carries its prompt length in tokens when a tokenizer (local or the server's
``/tokenize``) could count it; ``Dataset.prompt_tokens_source`` says how the lengths were obtained:
``tokenizer``, ``server``, ``estimate`` (about four characters per token) or ``unverified``.
"""

from __future__ import annotations

from perflab.bench.datasets.base import (
    Dataset,
    DatasetSpec,
    Message,
    Sample,
    Session,
    SharedPrefixSpec,
    Turn,
    dataset_kinds,
    load_dataset,
    register,
)
from perflab.bench.datasets.conversations import agentic_trace_dataset, sharegpt_sessions_dataset
from perflab.bench.datasets.custom import custom_dataset
from perflab.bench.datasets.mooncake import mooncake_dataset
from perflab.bench.datasets.shared_prefix import shared_prefix_dataset
from perflab.bench.datasets.sharegpt import sharegpt_dataset
from perflab.bench.datasets.synthetic import random_dataset

register("random", random_dataset, needs_path=False)
register("sharegpt", sharegpt_dataset, needs_path=True)
register("custom", custom_dataset, needs_path=True)
register("generated-shared-prefix", shared_prefix_dataset, needs_path=False)
register("sharegpt-multi-turn", sharegpt_sessions_dataset, needs_path=True)
register("agentic-trace", agentic_trace_dataset, needs_path=True)
register("mooncake", mooncake_dataset, needs_path=True)

__all__ = [
    "Dataset",
    "DatasetSpec",
    "Message",
    "Sample",
    "Session",
    "SharedPrefixSpec",
    "Turn",
    "dataset_kinds",
    "load_dataset",
]
