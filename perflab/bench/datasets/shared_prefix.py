"""The ``generated-shared-prefix`` dataset (SGLang 0.5.23's, its ``--gsp-*`` options): groups of
requests that share a system prompt, optionally as multi-turn sessions.

Each of ``num_groups`` groups has a system prompt of ``system_prompt_len`` tokens (what an agent's
instructions or a tool preamble are to a server); each request belongs to one group — every group in
turn (``uniform``), or drawn with Zipf popularity ``p(rank) = rank^-alpha / Σ k^-alpha``, group 0 the
hottest (``zipf``) — and asks its own question of ``question_len`` tokens. The first message is
``system prompt + "\\n\\n" + question``, as SGLang sends it. With ``num_turns`` above 1 every request is
a session whose later turns each ask one more question, with the server's real replies in between, so
the history grows turn by turn. Lengths vary by ``range_ratio`` as in the random dataset, and every text
comes from the seed: another seed draws other system prompts and questions.
"""

from __future__ import annotations

import math
import random
from typing import List, Optional

from perflab.bench.datasets.base import (
    DEFAULT_OUTPUT_LEN,
    GROUP_DISTRIBUTIONS,
    Dataset,
    DatasetSpec,
    Sample,
    Session,
    Turn,
    lengths_source,
)
from perflab.bench.datasets.synthetic import filled_text, length_bounds
from perflab.bench.errors import BenchError
from perflab.bench.tokenizer import Tokenizer

SEPARATOR = "\n\n"


def group_assignment(
    rng: random.Random, count: int, groups: int, distribution: str, alpha: Optional[float]
) -> List[int]:
    """The group of each of ``count`` requests: each group equally often in a shuffled order
    (``uniform``), or drawn by Zipf rank (``zipf``, exponent ``alpha``)."""
    if distribution == "zipf":
        weights = [1.0 / rank ** float(alpha or 1.0) for rank in range(1, groups + 1)]
        return rng.choices(range(groups), weights=weights, k=count)
    assignment = [index % groups for index in range(count)]
    rng.shuffle(assignment)
    return assignment


def check_shared_prefix(spec: DatasetSpec) -> None:
    """Raise ``BenchError`` for a workload SGLang's options would refuse too."""
    shape = spec.shared_prefix
    if shape.num_groups < 1:
        raise BenchError("--gsp-num-groups must be at least 1")
    if shape.system_prompt_len < 0 or shape.question_len < 1:
        raise BenchError(
            "--gsp-system-prompt-len must not be negative and --gsp-question-len must be at least 1"
        )
    if shape.num_turns < 1:
        raise BenchError("--gsp-num-turns must be at least 1")
    if shape.distribution not in GROUP_DISTRIBUTIONS:
        raise BenchError(f"--gsp-group-distribution must be one of {', '.join(GROUP_DISTRIBUTIONS)}")
    alpha = shape.zipf_alpha
    if shape.distribution == "zipf" and (alpha is None or not math.isfinite(alpha) or alpha <= 0):
        raise BenchError("--gsp-group-distribution zipf needs --gsp-zipf-alpha, a finite number above 0")
    if shape.distribution == "uniform" and alpha is not None:
        raise BenchError("--gsp-zipf-alpha applies to --gsp-group-distribution zipf only")
    if not 0.0 <= spec.range_ratio < 1.0:
        raise BenchError("--range-ratio must be in [0, 1)")


def shared_prefix_dataset(spec: DatasetSpec, tokenizer: Optional[Tokenizer]) -> Dataset:
    check_shared_prefix(spec)
    shape = spec.shared_prefix
    rng = random.Random(spec.seed)
    ratio = spec.range_ratio
    system_low, system_high = length_bounds(max(shape.system_prompt_len, 1), ratio)
    question_low, question_high = length_bounds(shape.question_len, ratio)
    out_low, out_high = length_bounds(spec.output_len or DEFAULT_OUTPUT_LEN, ratio)
    systems = [
        filled_text(tokenizer, rng, rng.randint(system_low, system_high))[0]
        if shape.system_prompt_len
        else ""
        for _ in range(shape.num_groups)
    ]
    assignment = group_assignment(rng, spec.count, shape.num_groups, shape.distribution, shape.zipf_alpha)
    samples: List[Sample] = []
    sessions: List[Session] = []
    for group in assignment:
        turns: List[Turn] = []
        for number in range(shape.num_turns):
            question, _ = filled_text(tokenizer, rng, rng.randint(question_low, question_high))
            text = systems[group] + SEPARATOR + question if number == 0 and systems[group] else question
            count = tokenizer.count(text) if tokenizer is not None else None
            turns.append(Turn([{"role": "user", "content": text}], count, rng.randint(out_low, out_high)))
        if shape.num_turns == 1:
            turn = turns[0]
            samples.append(Sample(turn.messages[0]["content"], turn.prompt_tokens, turn.output_len))
        else:
            sessions.append(Session(turns, group))
    notes: List[str] = []
    if tokenizer is None:
        notes.append("no tokenizer and no server /tokenize: exact input lengths could not be verified")
    return Dataset(samples, lengths_source(tokenizer, "unverified"), notes, sessions if sessions else None)
