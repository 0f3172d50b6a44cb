"""The bound on what a run's own prompts can serve one another from a prefix cache: each prompt's
longest prefix shared with any prompt sent before it (checked against the pairwise definition), the
chat template's tokens counted as shared, and what a run of unrelated prompts can account for."""

from __future__ import annotations

import os
import random

import pytest

from perflab.bench.prefix_share import common_length, own_prefix_share, shared_with_earlier


def _brute_force(texts: list[str]) -> list[int]:
    return [max((len(os.path.commonprefix([text, earlier])) for earlier in texts[:index]), default=0)
            for index, text in enumerate(texts)]  # fmt: skip


@pytest.mark.parametrize("seed", range(20))
def test_each_prompts_shared_prefix_is_the_longest_with_any_earlier_one(seed: int) -> None:
    rng = random.Random(seed)
    stems = ["", "system: be brief. ", "system: be brief. user ", "tool output 1", "tool"]
    texts = [
        rng.choice(stems) + "".join(rng.choice("abc ") for _ in range(rng.randint(0, 12))) for _ in range(60)
    ]
    texts += rng.sample(texts, 10)  # repeats, as a pool reused by rounds sends
    rng.shuffle(texts)
    assert shared_with_earlier(texts) == _brute_force(texts)


def test_common_length_of_two_texts() -> None:
    assert common_length("abcdef", "abcxyz") == 3
    assert common_length("abc", "abcdef") == 3 == common_length("abcdef", "abc")
    assert common_length("", "abc") == 0 == common_length("xbc", "abc")


def test_unrelated_prompts_account_only_for_their_template() -> None:
    measured = [("alpha beta", 100, 110), ("gamma delta", 100, 110), ("epsilon", 100, 110)]
    # ten template tokens a request (usage 110 of its own 100), nothing shared
    assert own_prefix_share([], measured) == pytest.approx(100.0 * 30 / 330)
    assert own_prefix_share([], [(text, own, None) for text, own, _ in measured]) == 0.0


def test_prompts_sent_again_or_warmed_up_account_for_themselves() -> None:
    first, second = "a" * 40, "b" * 40
    assert own_prefix_share([], [(first, 10, None), (first, 10, None)]) == pytest.approx(50.0)
    assert own_prefix_share([first], [(first, 10, None), (second, 10, None)]) == pytest.approx(50.0)
    # half of a prompt shared with an earlier one: half its tokens
    assert own_prefix_share([], [(first, 10, None), ("a" * 20 + "c" * 20, 10, None)]) == pytest.approx(25.0)
    assert own_prefix_share([], []) is None
