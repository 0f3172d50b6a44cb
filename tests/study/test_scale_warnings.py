"""What the new-study form says of its prompt scale before a study is created: every benchmark is
sized to the floor of evidence whatever the scale, and a profile whose rounds would hold one prompt
is named."""

from __future__ import annotations

from perflab.profiles import PRESETS
from perflab.runner.evidence import MIN_COMPLETED, MIN_DURATION_S
from perflab.study.views import SCALE_HELP, SIMULATED_SCALE, scale_warnings

FORM_PROFILES = [PRESETS[name] for name in ("sharegpt", "very_long", "long", "medium", "short")]


def test_the_demo_scale_leaves_nothing_to_warn_of_and_the_help_says_why() -> None:
    assert scale_warnings(SIMULATED_SCALE, FORM_PROFILES) == []
    assert f"at least {MIN_DURATION_S:g} s of the engine's time and {MIN_COMPLETED} requests" in SCALE_HELP


def test_a_scale_that_leaves_one_prompt_a_round_is_named() -> None:
    (warning,) = scale_warnings(0.01, FORM_PROFILES)  # very_long: 100 prompts → 1
    assert warning.startswith("Very Long Prompt: at a scale of 0.01 each round sends 1 of its 100 prompts")
