"""The preflight asking vLLM 0.33.0 itself, from answers recorded from its own parser
(tests/data/engine_check, header of each): 0.33 spellings and new values pass, removed ones and unknown
flags are refused in vLLM's words with its version, and an extra argument that contradicts a typed knob is
refused naming both.

The host is real (a local transport running the wrapper of :mod:`perflab.engines.asking`); its ``vllm``
is a script whose interpreter replays the recorded answer instead of importing the multi-GB GPU build.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from perflab.engines import EngineConfig, InvalidKnobValue, get_adapter
from perflab.engines.asking import EngineAnswer, read_answer, with_plugin_words
from perflab.engines.preflight import HelpCache, contradictions, host_adapter, preflight
from tests.engines.replay import RECORDED, replaying_host

VLLM = get_adapter("vllm")
SPEC = {"method": "step5_mtp", "num_speculative_tokens": 1}


def test_prefix_caching_off_and_new_0_33_values_pass(tmp_path: Path) -> None:
    config = EngineConfig(
        engine="vllm", model="/m", enable_prefix_caching=False, kv_cache_dtype="octave_k3v4",
        enable_chunked_prefill=False, attention_backend="STEP5_DSA", speculative_config=SPEC,
    )  # fmt: skip
    cache = HelpCache(tmp_path / "cache")

    verdict = preflight(
        replaying_host(tmp_path, "vllm-0.33.0-accepted.txt"), VLLM, config, engine_version=None, cache=cache
    )

    assert verdict.ok and verdict.asked and verdict.version == "0.33.0"
    assert verdict.summary().endswith("accepts every flag and value of this configuration (its own parser)")
    assert verdict.effective is not None
    assert (verdict.effective["enable_prefix_caching"], verdict.effective["kv_cache_dtype"]) == (
        False,
        "octave_k3v4",
    )
    words = cache.load_words(("gpu-033", "vllm", "0.33.0"))
    assert words is not None and "octave_k3v3_compact" in words["kv_cache_dtype"]
    assert "FLASH_ATTN_MLA_SPARSE_FA4" in words["attention_backend"]
    assert "step5_mtp" in words["speculative_config"] and "medusa" not in words["speculative_config"]


def test_removed_values_and_unknown_flags_are_refused_in_vllms_words(tmp_path: Path) -> None:
    config = EngineConfig(
        engine="vllm", model="/m", kv_cache_dtype="fp4_e2m1",
        speculative_config={"method": "medusa", "num_speculative_tokens": 1}, extra_args=("--no-such-flag",),
    )  # fmt: skip

    verdict = preflight(
        replaying_host(tmp_path, "vllm-0.33.0-refused.txt"), VLLM, config, engine_version="0.33.0"
    )

    unknown, dtype, method = verdict.problems
    assert unknown == "vLLM 0.33.0 refuses --no-such-flag: unrecognized arguments: --no-such-flag"
    assert dtype.startswith(
        "vLLM 0.33.0 refuses --kv-cache-dtype 'fp4_e2m1': Value error, Invalid kv_cache_dtype"
    )
    assert method.startswith("vLLM 0.33.0 refuses --speculative-config 'medusa': Input should be 'ngram'")


def test_the_effective_value_contradicting_a_typed_knob_is_refused() -> None:
    config = EngineConfig(engine="vllm", model="/m", enable_prefix_caching=True)
    answer = read_answer((RECORDED / "vllm-0.33.0-contradicted.txt").read_text(), VLLM.engine_dests)
    assert isinstance(answer, EngineAnswer)
    sneaky = config.model_copy(update={"extra_args": ("--disable-prefix",)})

    assert contradictions(VLLM, sneaky, answer) == [
        "extra_args --disable-prefix makes vLLM read enable_prefix_caching as false, contradicting the typed "
        "knob enable_prefix_caching: true"
    ]


def test_an_engine_that_cannot_be_imported_falls_back_to_its_help(tmp_path: Path) -> None:
    answer = read_answer('{"import_error": "ModuleNotFoundError: No module named \'vllm\'"}', {})
    assert answer == "the engine could not be imported there (ModuleNotFoundError: No module named 'vllm')"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Traceback (most recent call last):",
        "[1, 2]",
        '{"problems": [1]}',
        '{"effective": [2], "version": 1}',
    ],
)
def test_output_without_an_answer_is_no_answer(text: str) -> None:
    assert read_answer(text, {}) == "the engine's check printed no answer"


def test_values_are_judged_for_the_hosts_engine_version(tmp_path: Path) -> None:
    """Cached registries of the host's version; perflab's table of that release, the newest one for an
    unknown version; else (a version no table follows, or an image) the engine's own check before launch."""
    cache = HelpCache(tmp_path)
    cache.store_words(("gpu-033", "vllm", "0.33.0"), {"kv_cache_dtype": ["auto", "octave_k3v4"]})
    octave = EngineConfig(engine="vllm", model="/m", kv_cache_dtype="octave_k3v4")
    fp4 = EngineConfig(engine="vllm", model="/m", kv_cache_dtype="fp4_e2m1")
    medusa = EngineConfig(
        engine="vllm", model="/m", speculative_config={"method": "medusa", "num_speculative_tokens": 1}
    )

    cached = host_adapter("vllm", host="gpu-033", version="0.33.0", cache=cache)
    cached.validate(octave)
    with pytest.raises(InvalidKnobValue, match="'fp4_e2m1' is not one of vLLM 0.33.0's values"):
        cached.validate(fp4)
    cpu_build = host_adapter("vllm", host="cpu", version="0.32.0+cpu", cache=cache)
    cpu_build.validate(medusa)
    with pytest.raises(InvalidKnobValue, match="'octave_k3v4' is not one of vLLM 0.32.0's values"):
        cpu_build.validate(octave)
    for version in (None, "0.33.0"):
        judged = host_adapter("vllm", host="other", version=version, cache=cache)
        judged.validate(octave)
        with pytest.raises(InvalidKnobValue, match="'medusa' is not one of vLLM 0.33.0's values"):
            judged.validate(medusa)
    host_adapter("vllm", host="newer", version="0.34.0", cache=cache).validate(fp4)
    host_adapter(
        "vllm", host="gpu-033", version=None, cache=cache, image="vllm/vllm-openai:v0.33.0"
    ).validate(fp4)


def test_vllm_ascend_keeps_the_quantization_its_plugin_registers() -> None:
    text = (
        '{"version": "0.33.0", "problems": [{"flag": "--quantization", "value": "ascend", "message": '
        '"Unknown quantization method: ascend."}], "vocabulary": {"quantization": ["fp8"]}}'
    )
    answer = read_answer(text, VLLM.engine_dests)
    assert isinstance(answer, EngineAnswer)

    ascend = with_plugin_words(answer, get_adapter("vllm-ascend"))
    plain = with_plugin_words(answer, VLLM)

    assert ascend.problems == () and ascend.vocabulary["quantization"] == ("fp8", "ascend")
    assert plain.problems == answer.problems


def test_the_same_argv_on_the_same_version_is_answered_from_the_cache(tmp_path: Path) -> None:
    config = EngineConfig(engine="vllm", model="/m", kv_cache_dtype="fp4_e2m1")
    cache = HelpCache(tmp_path / "cache")
    transport = replaying_host(tmp_path, "vllm-0.33.0-refused.txt")
    first = preflight(transport, VLLM, config, engine_version="0.33.0", cache=cache)
    (tmp_path / "bin" / "vllm").unlink()  # the host's engine cannot be asked any more

    again = preflight(transport, VLLM, config, engine_version="0.33.0", cache=cache)

    assert again == first and again.asked and len(again.problems) == 3
