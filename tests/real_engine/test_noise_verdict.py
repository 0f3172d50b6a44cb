"""A study made from the defaults on the real vLLM (CPU build) over a real sshd: a candidate that changes
nothing that matters (``--seed=7``) is not kept, and the study shows the spread it used, every verdict
with its interval and the smallest gain it could have seen.

Whether such a candidate ends "within noise" or "not better" depends on the noise the machine gives (a
quiet machine can rightly call a no-op "not better" than the 1 % minimum gain), and how many launches it
takes depends on its verdict at each look, so the test asserts what holds for every correct outcome: the
verdict is one of the two, the note carries it, the baseline stays the recommendation.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.fixtures.real_vllm import StudyOutcome

# A guard against a hang, not a time to meet: its launches depend on the verdicts, and on a loaded 2-core
# machine the whole suite's run has taken 745–1,330 s.
pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(2400)]


def test_a_candidate_that_changes_nothing_is_not_kept_on_real_vllm(
    real_vllm_study: Callable[[dict], StudyOutcome],
) -> None:
    outcome = real_vllm_study(
        {
            "name": "a no-op on CPU",
            "gpus": 1,
            "stages": [
                {"name": "Seed", "candidates": [{"label": "seed 7", "set": {"extra_args": ["--seed=7"]}}]}
            ],
        }
    )
    assert outcome.listed["status"] == "done"
    shown = outcome.shown
    (stage,) = shown["stages"]
    (candidate,) = stage["candidates"]
    (verdict,) = shown["verdicts"]
    assert verdict["outcome"] in ("within_noise", "not_better")
    assert candidate["decision"] == verdict["outcome"]
    assert candidate["note"].startswith(verdict["text"])
    # the launches of the baseline beside the candidate's measured the spread: every verdict has an interval
    assert verdict["half_width_pct"] is not None and verdict["n_reference"] >= 2
    recommended = outcome.listed["recommended_command"]
    assert recommended and "--seed" not in recommended
    spread = shown["spread"]
    assert spread["study"]["cv_pct"] is not None and spread["study"]["measured_df"] >= 1
    assert spread["baseline"]["launches"] >= 2
    assert spread["detectable_gain_pct"] is not None and spread["detectable_gain_pct"] > 1.0
