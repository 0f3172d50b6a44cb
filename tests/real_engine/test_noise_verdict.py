"""A study that measures its noise on the real vLLM (CPU build) over a real sshd: a candidate that changes
nothing that matters here (prefix caching off, on prompts that share no prefix) ends "within noise" with
its interval, and the study shows the spread it measured.

Kept as small as a verdict allows: two launches of each configuration (a verdict needs a spread across
launches), two runs of eight short prompts on each.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.fixtures.real_vllm import StudyOutcome

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(1200)]


def test_a_candidate_that_changes_nothing_ends_within_noise_on_real_vllm(
    real_vllm_study: Callable[[dict], StudyOutcome],
) -> None:
    outcome = real_vllm_study(
        {
            "name": "noise on CPU",
            "gpus": 1,
            "min_gain_pct": 5,
            "repeats": 2,
            "relaunches": 2,
            "max_launches": 2,
            "stages": [{"name": "Prefix cache", "candidates": [{"enable_prefix_caching": False}]}],
        }
    )
    assert outcome.listed["status"] == "done"
    shown = outcome.shown
    (stage,) = shown["stages"]
    (candidate,) = stage["candidates"]
    (verdict,) = shown["verdicts"]
    assert candidate["decision"] == "within_noise" and verdict["outcome"] == "within_noise"
    assert (verdict["n_candidate"], verdict["n_reference"]) == (2, 2)
    assert verdict["half_width_pct"] is not None and "within noise (±" in candidate["note"]
    assert candidate["verdict"] == {key: verdict[key] for key in candidate["verdict"]}
    spread = shown["spread"]["measured"]
    assert spread["launches"] == 2 and spread["repetitions"] == 4
