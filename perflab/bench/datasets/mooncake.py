"""The ``mooncake`` dataset: a Mooncake-format trace replayed with its arrival times.

A JSONL file, one request per line: ``timestamp`` (milliseconds), ``input_length`` and
``output_length`` (tokens) and ``hash_ids``, the ids of the prompt's blocks of ``block_size`` tokens
(512 in Mooncake's published traces): two requests whose prompts start with the same ids share that
many blocks of prefix, which is what the trace records of its cache reuse. Each id becomes the same
block of filler text wherever it appears (drawn from the seed and the id, so another seed makes other
text with the same sharing). With a tokenizer, a block is text that encodes to ``block_size`` tokens by
itself (:func:`~perflab.bench.datasets.synthetic.exact_text`: sampled token ids decoded do not re-encode
to as many tokens, so the text is fixed up until it does), and the prompt — the blocks' texts one after
the other — is cut at its ``input_length``-th token and brought to exactly that length
(:func:`~perflab.bench.datasets.synthetic.align_prompt`), so its length is the trace's wherever the
tokenizer allows it and the blocks start where the trace's do; without one, blocks are words and the
prompt is cut at ``input_length`` words. Requests are
taken in time order, the first ``count`` of them; ``Dataset.arrivals_s`` holds each one's time since
the first, which the bench scales by ``--mooncake-slowdown-factor`` (SGLang 0.5.23's option: 2 replays
twice as slowly) when ``--use-trace-timestamps`` is given.
"""

from __future__ import annotations

import itertools
import random
from typing import Any, Dict, List, Optional, Tuple

from perflab.bench.datasets.base import Dataset, DatasetSpec, Sample, lengths_source
from perflab.bench.datasets.jsonscan import iter_json_lines, json_object, read_text
from perflab.bench.datasets.synthetic import align_prompt, exact_text, word_text
from perflab.bench.errors import BenchError, DatasetError
from perflab.bench.tokenizer import Tokenizer

# (timestamp ms, input length, output length, hash ids)
TraceRow = Tuple[float, int, int, List[int]]


def _count(path: str, line: int, entry: Dict[str, Any], field: str, minimum: int) -> int:
    value = entry.get(field)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DatasetError(
            path, f"must be an integer of at least {minimum}, not {value!r}", line=line, field=field
        )
    return value


def read_trace(path: str) -> List[TraceRow]:
    """Every request of the trace, validated (an error names the line and field)."""
    rows: List[TraceRow] = []
    for line, value in iter_json_lines(path, read_text(path)):
        entry = json_object(path, line, value)
        timestamp = entry.get("timestamp")
        if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)) or timestamp < 0:
            raise DatasetError(
                path, f"must be a number of milliseconds, not {timestamp!r}", line=line, field="timestamp"
            )
        hash_ids = entry.get("hash_ids", [])
        if not isinstance(hash_ids, list) or not all(
            isinstance(item, int) and not isinstance(item, bool) for item in hash_ids
        ):
            raise DatasetError(path, "must be a list of integers", line=line, field="hash_ids")
        rows.append(
            (
                float(timestamp),
                _count(path, line, entry, "input_length", 1),
                _count(path, line, entry, "output_length", 1),
                hash_ids,
            )
        )
    if not rows:
        raise DatasetError(path, "the trace holds no requests")
    rows.sort(key=lambda row: row[0])
    return rows


class BlockText:
    """The text of each block id, made once from the seed and the id: text of ``block_size`` tokens
    (words, without a tokenizer)."""

    def __init__(self, tokenizer: Optional[Tokenizer], block_size: int, seed: int) -> None:
        self._tokenizer = tokenizer
        self._size = block_size
        self._seed = seed
        self._texts: Dict[Any, str] = {}
        self._words: Dict[Any, str] = {}
        self._own = itertools.count()

    def prompt(self, hash_ids: List[Any], length: int) -> Tuple[str, Optional[int]]:
        """The prompt of ``length`` tokens whose blocks are ``hash_ids`` (own blocks past them), and its
        count (None without a tokenizer)."""
        blocks = -(-length // self._size)
        keys: List[Any] = list(hash_ids[:blocks])
        keys += [("own", next(self._own)) for _ in range(blocks - len(keys))]
        if self._tokenizer is None:
            words = " ".join(self._block_words(key) for key in keys).split(" ")[:length]
            return " ".join(words), None
        text = "".join(self._block_text(key) for key in keys)
        return align_prompt(self._tokenizer, self._rng(("fill", keys[-1])), text, length)

    def _rng(self, key: Any) -> random.Random:
        return random.Random(f"{self._seed}:{key}")

    def _block_text(self, key: Any) -> str:
        if key not in self._texts:
            assert self._tokenizer is not None
            self._texts[key], _ = exact_text(self._tokenizer, self._rng(key), "", 0, self._size)
        return self._texts[key]

    def _block_words(self, key: Any) -> str:
        if key not in self._words:
            self._words[key] = word_text(self._rng(key), self._size)
        return self._words[key]


def mooncake_dataset(spec: DatasetSpec, tokenizer: Optional[Tokenizer]) -> Dataset:
    if spec.block_size < 1:
        raise BenchError("--mooncake-block-size must be at least 1")
    path = spec.path or ""
    rows = read_trace(path)[: spec.count]
    blocks = BlockText(tokenizer, spec.block_size, spec.seed)
    samples: List[Sample] = []
    for _, input_length, output_length, hash_ids in rows:
        text, count = blocks.prompt(hash_ids, input_length)
        samples.append(Sample(text, count, spec.output_len or output_length))
    notes: List[str] = []
    if len(rows) < spec.count:
        notes.append(f"{path} holds {len(rows)} requests; all of them are replayed")
    if tokenizer is None:
        notes.append("no tokenizer and no server /tokenize: exact input lengths could not be verified")
    first = rows[0][0]
    arrivals = [(row[0] - first) / 1000.0 for row in rows]
    return Dataset(samples, lengths_source(tokenizer, "unverified"), notes, arrivals_s=arrivals)
