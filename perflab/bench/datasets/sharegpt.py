"""The ``sharegpt`` dataset: the first human turn is the prompt, the reply sets the output length.

Follows the filtering ``vllm bench serve`` applies to ShareGPT_V3 files: conversations need two
turns or more; pairs with a prompt or reply under 4 tokens, a prompt over 1024 tokens, or prompt plus
reply over 2048 tokens are skipped (the reply check is skipped when ``--output-len`` fixes the
output length). Entries are shuffled with the seed before sampling.
"""

from __future__ import annotations

import random
from typing import Any, List, Optional, Tuple

from perflab.bench.datasets.base import Dataset, DatasetSpec, Sample, cycle_to, lengths_source
from perflab.bench.datasets.jsonscan import iter_array, read_text
from perflab.bench.errors import DatasetError
from perflab.bench.tokenizer import Tokenizer

MIN_TOKENS = 4
MAX_PROMPT_TOKENS = 1024
MAX_TOTAL_TOKENS = 2048
CHARS_PER_TOKEN = 4


def _turn_text(path: str, line: int, conversations: List[Any], turn: int) -> str:
    entry = conversations[turn]
    field = f"conversations[{turn}].value"
    if not isinstance(entry, dict) or "value" not in entry:
        raise DatasetError(path, "missing", line=line, field=field)
    value = entry["value"]
    if not isinstance(value, str):
        raise DatasetError(path, f"must be a string, not {type(value).__name__}", line=line, field=field)
    return value


def _later_texts(conversations: List[Any], start: int) -> List[str]:
    """The texts of the turns from ``start`` on, up to the first that has none."""
    texts: List[str] = []
    for entry in conversations[start:]:
        value = entry.get("value") if isinstance(entry, dict) else None
        if not isinstance(value, str):
            break
        texts.append(value)
    return texts


def read_conversations(path: str, checked_turns: int = 2) -> List[Tuple[int, List[str]]]:
    """``(line, texts)`` of every conversation with at least two turns: the texts of its turns in
    order, the first ``checked_turns`` validated (an error names the line), later ones up to the first
    without a text."""
    found: List[Tuple[int, List[str]]] = []
    for line, entry in iter_array(path, read_text(path)):
        if not isinstance(entry, dict):
            raise DatasetError(path, f"each entry must be an object, not {type(entry).__name__}", line=line)
        conversations = entry.get("conversations")
        if not isinstance(conversations, list):
            problem = (
                "missing" if conversations is None else f"must be a list, not {type(conversations).__name__}"
            )
            raise DatasetError(path, problem, line=line, field="conversations")
        if len(conversations) < 2:
            continue
        checked = min(checked_turns, len(conversations))
        texts = [_turn_text(path, line, conversations, turn) for turn in range(checked)]
        found.append((line, texts + _later_texts(conversations, checked)))
    return found


def read_pairs(path: str) -> List[Tuple[str, str]]:
    """(prompt, reply) of every conversation with at least two turns, validating each entry."""
    return [(texts[0], texts[1]) for _, texts in read_conversations(path)]


def estimated_length(tokenizer: Optional[Tokenizer], text: str) -> int:
    if tokenizer is not None:
        return tokenizer.count(text)
    return max(1, round(len(text) / CHARS_PER_TOKEN))


def sharegpt_dataset(spec: DatasetSpec, tokenizer: Optional[Tokenizer]) -> Dataset:
    path = spec.path or ""
    pairs = read_pairs(path)
    random.Random(spec.seed).shuffle(pairs)
    notes: List[str] = []
    samples: List[Sample] = []
    fixed_output = spec.output_len
    for prompt, reply in pairs:
        if len(samples) == spec.count:
            break
        prompt_len = estimated_length(tokenizer, prompt)
        output_len = fixed_output if fixed_output is not None else estimated_length(tokenizer, reply)
        if prompt_len < MIN_TOKENS or (fixed_output is None and output_len < MIN_TOKENS):
            continue
        if prompt_len > MAX_PROMPT_TOKENS or prompt_len + output_len > MAX_TOTAL_TOKENS:
            continue
        samples.append(Sample(prompt, prompt_len, output_len))
    if not samples:
        raise DatasetError(
            path, "no conversation passes the ShareGPT filters (two turns, 4..1024 prompt tokens)"
        )
    source = lengths_source(tokenizer, "estimate")
    if tokenizer is None:
        notes.append("no tokenizer: ShareGPT lengths were estimated at 4 characters per token")
    return Dataset(cycle_to(samples, spec.count, path, notes), source, notes)
