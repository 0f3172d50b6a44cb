"""The ``random`` dataset: prompts of exact token lengths built from random token ids.

Each prompt is ``prefix_len`` shared tokens plus ``input_len`` own tokens, where ``input_len`` is
drawn uniformly from ``[input_len·(1−r), input_len·(1+r)]`` for range ratio ``r`` (outputs alike).
Token ids are sampled, decoded, and the text is re-encoded; since decoding and re-encoding can merge
or split tokens, ids are trimmed or appended until the text encodes to exactly the wanted count.
Without any tokenizer the prompts are made of common words (about one token each) and their lengths
are reported as unverified. ``align_to_server`` brings prompts a local tokenizer made to their length in
the server's tokenizer when the two disagree (as ``vllm bench serve`` 0.32.0 re-aligns its random
prompts): too long, cut at the server's token boundary; too short, filled up.
"""

from __future__ import annotations

import math
import random
from typing import List, Optional, Tuple

from perflab.bench.datasets.base import DEFAULT_OUTPUT_LEN, Dataset, DatasetSpec, Sample
from perflab.bench.errors import BenchError
from perflab.bench.tokenizer import FILLER_WORDS, Tokenizer

MAX_FIXUP_ROUNDS = 40


def length_bounds(length: int, range_ratio: float) -> Tuple[int, int]:
    """Inclusive bounds of a length drawn with ``range_ratio`` around ``length``."""
    return max(1, math.floor(length * (1.0 - range_ratio))), max(1, math.ceil(length * (1.0 + range_ratio)))


def exact_text(
    tokenizer: Tokenizer, rng: random.Random, prefix: str, prefix_count: int, target: int
) -> Tuple[str, int]:
    """Text starting with ``prefix`` (``prefix_count`` tokens) that encodes to ``target`` tokens (or the
    closest reached).

    Too many tokens: drop that many ids from the end (or draw afresh when that would drop them all);
    too few: append that many. A few rounds settle it for real tokenizers.
    """
    own = max(target - prefix_count, 0)
    ids: List[int] = tokenizer.filler_ids(rng, own)
    text, count = prefix, -1
    for _ in range(MAX_FIXUP_ROUNDS):
        text = prefix + tokenizer.decode(ids) if ids else prefix
        count = tokenizer.count(text)
        excess = count - target
        if not excess:
            break
        if excess < 0:
            ids.extend(tokenizer.filler_ids(rng, -excess))
        elif excess < len(ids):
            del ids[len(ids) - excess :]
        else:
            ids = tokenizer.filler_ids(rng, own)
    return text, count


def word_text(rng: random.Random, words: int) -> str:
    """``words`` common words (about one token each): the text of prompts made without a tokenizer."""
    return " ".join(rng.choice(FILLER_WORDS) for _ in range(words))


def filled_text(tokenizer: Optional[Tokenizer], rng: random.Random, length: int) -> Tuple[str, Optional[int]]:
    """Text of ``length`` tokens and its count (of words, count None, without a tokenizer)."""
    if tokenizer is None:
        return word_text(rng, length), None
    return exact_text(tokenizer, rng, "", 0, length)


def random_dataset(spec: DatasetSpec, tokenizer: Optional[Tokenizer]) -> Dataset:
    if spec.input_len < 1:
        raise BenchError("--input-len must be at least 1")
    if not 0.0 <= spec.range_ratio < 1.0:
        raise BenchError("--range-ratio must be in [0, 1)")
    if spec.prefix_len < 0:
        raise BenchError("--prefix-len must not be negative")
    rng = random.Random(spec.seed)
    output_len = spec.output_len if spec.output_len is not None else DEFAULT_OUTPUT_LEN
    in_low, in_high = length_bounds(spec.input_len, spec.range_ratio)
    out_low, out_high = length_bounds(output_len, spec.range_ratio)
    notes: List[str] = []
    samples: List[Sample] = []
    if tokenizer is None:
        prefix = word_text(rng, spec.prefix_len) + " " if spec.prefix_len else ""
        for _ in range(spec.count):
            text = prefix + word_text(rng, rng.randint(in_low, in_high))
            samples.append(Sample(text, None, rng.randint(out_low, out_high)))
        notes.append("no tokenizer and no server /tokenize: exact input lengths could not be verified")
        return Dataset(samples, "unverified", notes)

    # Counted once: a server's /tokenize costs a round trip per call.
    prefix, prefix_count = "", 0
    if spec.prefix_len:
        prefix, prefix_count = exact_text(tokenizer, rng, "", 0, spec.prefix_len)
        if prefix_count != spec.prefix_len:
            notes.append(f"shared prefix has {prefix_count} tokens instead of {spec.prefix_len}")
    inexact = 0
    for _ in range(spec.count):
        target = spec.prefix_len + rng.randint(in_low, in_high)
        text, count = exact_text(tokenizer, rng, prefix, prefix_count, target)
        inexact += count != target
        samples.append(Sample(text, count, rng.randint(out_low, out_high)))
    if inexact:
        notes.append(f"{inexact} prompts could not be brought to their exact token length")
    return Dataset(samples, tokenizer.kind, notes)


def align_prompt(server: Tokenizer, rng: random.Random, prompt: str, target: int) -> Tuple[str, int]:
    """``prompt`` brought to ``target`` tokens of ``server`` (or the closest reached)."""
    ids = server.encode(prompt)
    if len(ids) > target:
        prompt = server.decode(ids[:target])
        count = server.count(prompt)
        if count >= target:
            return prompt, count
        ids = ids[:count]
    return exact_text(server, rng, prompt, len(ids), target) if len(ids) < target else (prompt, target)


def align_to_server(dataset: Dataset, server: Tokenizer, seed: int) -> int:
    """Re-make every prompt whose length in ``server`` tokens differs from its local count; returns how
    many changed. The samples' lengths are then the server's (``prompt_tokens_source`` ``server``)."""
    rng = random.Random(seed)
    changed = 0
    for sample in dataset.samples:
        target = sample.prompt_tokens
        if target is None:
            continue
        prompt, count = align_prompt(server, rng, sample.prompt, target)
        if prompt != sample.prompt:
            changed += 1
            sample.prompt, sample.prompt_tokens = prompt, count
    dataset.prompt_tokens_source = server.kind
    return changed
