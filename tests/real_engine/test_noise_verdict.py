"""A study that measures its noise on the real vLLM (CPU build) over a real sshd: a candidate that changes
nothing that matters here (prefix caching off, on prompts that share no prefix) is not kept, and the
study shows the spread it measured.

Whether such a candidate ends "within noise" or "not better" depends on the noise the machine gives
(a quiet machine can rightly call a no-op "not better" than a 5 % minimum gain), so the test asserts
what holds for either: the verdict is one of the two, it agrees with its own interval, and the
baseline stays the recommendation.

Kept as small as a verdict allows: two launches of each configuration (a verdict needs a spread across
launches), two runs of eight short prompts on each.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.fixtures.real_vllm import StudyOutcome

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(1200)]


def test_a_candidate_that_changes_nothing_is_not_kept_on_real_vllm(
    real_vllm_study: Callable[[dict], StudyOutcome],
) -> None:
    min_gain_pct = 5
    outcome = real_vllm_study(
        {
            "name": "noise on CPU",
            "gpus": 1,
            "min_gain_pct": min_gain_pct,
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
    assert verdict["outcome"] in ("within_noise", "not_better")
    assert candidate["decision"] == verdict["outcome"]
    assert candidate["verdict"] == {key: verdict[key] for key in candidate["verdict"]}
    assert (verdict["n_candidate"], verdict["n_reference"]) == (2, 2)
    assert verdict["half_width_pct"] is not None
    upper = verdict["gain_pct"] + verdict["half_width_pct"]
    lower = verdict["gain_pct"] - verdict["half_width_pct"]
    if verdict["outcome"] == "not_better":
        assert upper < min_gain_pct and "not better" in candidate["note"]
    else:
        assert lower <= min_gain_pct <= upper and "within noise (±" in candidate["note"]
    recommended = outcome.listed["recommended_command"]
    assert recommended and "prefix-caching" not in recommended
    spread = shown["spread"]["measured"]
    assert spread["launches"] == 2 and spread["repetitions"] == 4
