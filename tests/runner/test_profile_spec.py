"""``--profile`` specs: presets, overrides, new profiles, sweeps, and the errors for bad ones."""

from __future__ import annotations

import math

import pytest

from perflab.profiles import PRESETS
from perflab.runner.profile_spec import ProfileSpecError, parse_profile


def test_a_preset_name_is_the_preset() -> None:
    assert parse_profile("medium") == PRESETS["medium"]


def test_keys_override_a_preset() -> None:
    profile = parse_profile("short:n=50,concurrency=8,ttft=500,name=short-50")
    assert (profile.name, profile.input_len, profile.output_len) == ("short-50", 128, 4)
    assert profile.num_prompts == 50 and profile.max_concurrency == 8 and profile.seed == 42
    assert profile.goodput.ttft_ms == 500


def test_a_dataset_base_makes_a_new_profile() -> None:
    profile = parse_profile("random:in=1024,out=128,n=100,rate=inf,range=0.1,prefix=16,endpoint=completions")
    assert (profile.dataset, profile.input_len, profile.output_len, profile.num_prompts) == (
        "random",
        1024,
        128,
        100,
    )
    assert math.isinf(profile.request_rate)
    assert (profile.range_ratio, profile.prefix_len, profile.endpoint) == (0.1, 16, "completions")
    assert parse_profile("custom:path=prompts.jsonl,n=5").dataset_ref == "prompts.jsonl"


def test_a_sweep_lists_its_points_lowest_first() -> None:
    profile = parse_profile("throughput:sweep=concurrency:64/16/256,flat=no")
    assert profile.sweep is not None and profile.sweep.kind == "max_concurrency"
    assert [point.max_concurrency for point in profile.sweep_points()] == [16, 64, 256]
    assert profile.sweep.stop_when_flat is False
    assert parse_profile("short:sweep=rate:2/4").sweep.stop_when_flat is True


def test_scale_keeps_lengths_and_shrinks_prompts() -> None:
    profile = parse_profile("long:scale=0.1")
    assert (profile.input_len, profile.num_prompts, profile.scale) == (4000, 50, 0.1)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("bogus", "'bogus' is neither a preset"),
        ("short:n", "'n' is not KEY=VALUE"),
        ("short:n=", "'n=' is not KEY=VALUE"),
        ("short:colour=red", "unknown key 'colour'"),
        ("short:n=1,n=2", "key 'n' is given twice"),
        ("short:n=many", "num_prompts: Input should be a valid integer"),
        ("random:n=5", "a random dataset needs input_len and output_len"),
        ("sharegpt:in=5", "input_len comes from the sharegpt dataset"),
        ("short:sweep=size:1/2", "sweep must be rate:V1/V2/..."),
        ("short:sweep=rate:1/-2", "sweep.values: sweep values must be > 0"),
        ("short:sweep=rate:1/2,flat=maybe", "flat must be yes or no"),
        ("short:flat=no", "flat applies to a sweep only"),
        ("short:scale=0", "scale: scale factor must be > 0"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec: str, message: str) -> None:
    with pytest.raises(ProfileSpecError) as raised:
        parse_profile(spec)
    assert str(raised.value).startswith(f"--profile {spec!r}: ")
    assert message in str(raised.value)
