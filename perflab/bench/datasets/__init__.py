"""Benchmark datasets: ``random`` (exact token lengths), ``sharegpt`` and ``custom`` files.

``load_dataset(spec, tokenizer)`` returns the prompts for the warmup and measured requests. Every
sample carries its prompt length in tokens when a tokenizer (local or the server's ``/tokenize``)
could count it; ``Dataset.prompt_tokens_source`` says how the lengths were obtained: ``tokenizer``,
``server``, ``estimate`` (about four characters per token) or ``unverified``.
"""

from __future__ import annotations

from perflab.bench.datasets.base import Dataset, DatasetSpec, Sample, load_dataset

__all__ = ["Dataset", "DatasetSpec", "Sample", "load_dataset"]
