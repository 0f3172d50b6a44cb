"""vLLM before 0.23.0 on a Gated DeltaNet hybrid (Qwen3.5, Qwen3-Next): a step that holds a prefill runs
its decoding sequences through the chunk kernel as one-token chunks and copies every sequence's SSM
state out and back (``perflab.sim.perfmodel``). Decode-only steps, later releases, speculative decoding
and models without a recurrent state keep their cost."""

from __future__ import annotations

import statistics

import pytest

from perflab.sim.deployment import Deployment, Knobs, release_numbers, resolve_deployment
from perflab.sim.hardware import find_accelerator
from perflab.sim.offline import RequestSpec, simulate
from perflab.sim.perfmodel import PerfModel, StepLoad

HYBRID = "Qwen/Qwen3.5-35B-A3B"
# Qwen3.5-35B-A3B: 30 Gated DeltaNet layers of 32 value heads × 128 × 128, float32 SSM state
LAYER_SSM_BYTES = 32 * 128 * 128 * 4
# NVIDIA's H200 vLLM 0.24.0 kernel table (AIConfigurator 0.12.0), this model at TP1, per layer: the
# chunk kernel on one-token sequences 79.2 µs for 32 and 150.3 µs for 64; the recurrent decode kernel
# 267.4 µs for 256 and 528.4 µs for 512
ONE_TOKEN_CHUNK_EXTRA_S = (150.284e-6 - 79.244e-6) / 32 - (528.428e-6 - 267.426e-6) / 256


def _deployment(version: str, model: str = HYBRID, engine: str = "vllm", **knobs: object) -> Deployment:
    values = Knobs(model)
    for name, value in knobs.items():
        setattr(values, name, value)
    return resolve_deployment(engine, values, find_accelerator("H200"), version)


@pytest.mark.parametrize(
    ("text", "release"),
    [("v0.17.1", (0, 17, 1)), ("0.32.0+cpu", (0, 32, 0)), ("0.11.0rc0", (0, 11, 0)), ("nightly", ())],
)
def test_an_engine_version_reads_as_its_release(text: str, release: tuple) -> None:
    assert release_numbers(text) == release


def test_only_vllm_before_0_23_on_a_hybrid_model_runs_decodes_as_chunks() -> None:
    assert _deployment("v0.17.1").gdn_mixed_chunks
    assert _deployment("0.22.1").gdn_mixed_chunks
    assert not _deployment("0.23.0").gdn_mixed_chunks
    assert not _deployment("0.32.0").gdn_mixed_chunks
    assert not _deployment("nightly").gdn_mixed_chunks  # a build without a release number: the newest
    assert not _deployment("0.17.1", model="Qwen/Qwen3-32B").gdn_mixed_chunks
    assert not _deployment("0.5.9", engine="sglang").gdn_mixed_chunks
    # without a version, the simulated engine's own (vLLM 0.11.0)
    assert resolve_deployment("vllm", Knobs(HYBRID), find_accelerator("H200")).gdn_mixed_chunks


def _mixed(decoding: int, prefill_tokens: int) -> StepLoad:
    """``decoding`` sequences one token each at 600 tokens of context and one prompt's chunk."""
    return StepLoad(
        tokens=decoding + prefill_tokens,
        pairs=decoding * 600 + prefill_tokens * prefill_tokens / 2,
        kv_read=decoding * 600,
        sequences=decoding + 1,
        decoding=decoding,
    )


def test_a_mixed_step_pays_the_chunk_kernel_and_the_state_copies() -> None:
    old, new = _deployment("0.17.1"), _deployment("0.23.0")
    load = _mixed(370, 450)
    extra = PerfModel(old).group_step_seconds([load]) - PerfModel(new).group_step_seconds([load])
    bandwidth = old.accel.bandwidth_gbs * 1e9 * 0.75  # the decode attention's share of the H200's
    pass_s = 30 * LAYER_SSM_BYTES / bandwidth  # one pass over a sequence's state, all 30 layers
    assert extra == pytest.approx((4 * 371 + 2 * 370) * pass_s, rel=1e-9)
    # the two passes of a one-token chunk are what the kernel table measures, within 5 %
    assert 2 * pass_s / 30 == pytest.approx(ONE_TOKEN_CHUNK_EXTRA_S, rel=0.05)
    assert 0.030 < extra < 0.050  # about 13 ms of one-token chunks and 26 ms of copies at 370 sequences


def test_a_decode_only_step_costs_the_same_in_every_release() -> None:
    load = StepLoad(tokens=370, pairs=370 * 600, kv_read=370 * 600, sequences=370, decoding=370)
    old, new = PerfModel(_deployment("0.17.1")), PerfModel(_deployment("0.23.0"))
    assert old.group_step_seconds([load]) == new.group_step_seconds([load])


def test_speculative_decodes_take_the_recurrent_kernel_in_a_mixed_step() -> None:
    knobs = {"spec_method": "mtp", "spec_tokens": 2}
    assert not _deployment("0.17.1", **knobs).gdn_mixed_chunks
    load = _mixed(100, 450)
    old, new = PerfModel(_deployment("0.17.1", **knobs)), PerfModel(_deployment("0.23.0", **knobs))
    assert old.group_step_seconds([load]) == new.group_step_seconds([load])


def test_requests_arriving_while_others_decode_take_longer_a_token_before_0_23() -> None:
    """Continuous arrivals keep a prefill in most steps: the decodes beside it run as chunks."""
    requests = [RequestSpec(index * 0.01, 400, 200) for index in range(400)]

    def mean_tpot(version: str) -> float:
        timings, _ = simulate(_deployment(version), requests, max_concurrency=256)
        return statistics.fmean(timing.tpot for timing in timings)

    assert mean_tpot("0.17.1") > 1.2 * mean_tpot("0.23.0")
