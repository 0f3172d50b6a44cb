"""What a prediction is asked, and what it refuses to predict: configurations and tuning profiles as
AIConfigurator cases, and its printed estimate read back defensively (no AIConfigurator needed)."""

from __future__ import annotations

import pytest

from perflab.engines import EngineConfig
from perflab.predict.aiconfigurator import EstimateError, failure_line, parse_estimate
from perflab.predict.case import NotCovered, case_of
from perflab.predict.figures import PredictedFigures, Prediction
from perflab.predict.simulated import simulated_figures
from perflab.profiles import BenchmarkProfile

BURST = BenchmarkProfile(
    name="t", title="t", dataset="random", input_len=1024, output_len=256, num_prompts=512
)


def test_a_dense_configuration_is_one_replica_at_the_profiles_concurrency() -> None:
    case = case_of(
        EngineConfig(engine="vllm", model="Qwen/Qwen3-32B", tp=2, replicas=4), "NVIDIA H200", BURST
    )
    assert (case.system, case.backend, case.tp, case.gpus) == ("h200_sxm", "vllm", 2, 8)
    assert (case.isl, case.osl, case.batch, case.prompts) == (1024, 256, 128, 128)  # 512 prompts over 4
    assert case.moe_tp is None and case.moe_ep is None and not case.kv_fp8
    # the engine's max_num_seqs caps the batch; a client concurrency caps it first
    capped = case_of(EngineConfig(engine="vllm", model="Qwen/Qwen3-32B", max_num_seqs=64), "H200", BURST)
    assert capped.batch == 64
    clients = BURST.model_copy(update={"max_concurrency": 16})
    assert case_of(EngineConfig(engine="vllm", model="Qwen/Qwen3-32B"), "H200", clients).batch == 16
    assert case.key() != capped.key()


def test_an_moe_configuration_maps_to_attention_dp_and_moe_parallelism() -> None:
    tp = case_of(EngineConfig(engine="vllm", model="Qwen/Qwen3-30B-A3B", tp=4, replicas=2), "H100", BURST)
    assert (tp.attention_dp, tp.moe_tp, tp.moe_ep) == (1, 4, 1)
    ep = case_of(EngineConfig(engine="vllm", model="Qwen/Qwen3-30B-A3B", tp=2, dp=2, ep=4), "H100", BURST)
    assert (ep.attention_dp, ep.moe_tp, ep.moe_ep, ep.gpus) == (2, 1, 4, 4)
    sglang = case_of(EngineConfig(engine="sglang", model="Qwen/Qwen3-30B-A3B", tp=4, ep=4), "H100", BURST)
    assert (sglang.backend, sglang.moe_tp, sglang.moe_ep) == ("sglang", 1, 4)
    fp8 = case_of(EngineConfig(engine="vllm", model="Qwen/Qwen3-32B", kv_cache_dtype="fp8"), "H200", BURST)
    assert fp8.kv_fp8
    ignored = case_of(
        EngineConfig(engine="vllm", model="Qwen/Qwen3-32B", enable_prefix_caching=False), "H200", BURST
    )
    assert ignored.ignored == ("enable_prefix_caching",)


def test_the_simulator_beside_a_prediction_runs_the_hosts_engine_release() -> None:
    """vLLM before 0.23 runs a Gated DeltaNet model's decodes as one-token chunks in a step that holds a
    prefill (perflab.sim.deployment): perflab's figure beside AIConfigurator's follows the hosts' release."""
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3.5-35B-A3B")
    clients = BURST.model_copy(update={"max_concurrency": 64})
    old, new = (case_of(config, "H200", clients, version) for version in ("v0.17.1", "0.24.0"))
    assert (old.engine_version, new.engine_version) == ("v0.17.1", "0.24.0") and old.key() != new.key()
    assert case_of(config, "H200", clients).engine_version is None
    slower, faster = simulated_figures(config, old), simulated_figures(config, new)
    assert slower is not None and faster is not None
    # in a burst of equal requests few steps mix a prefill with decodes, so the difference is small
    assert slower.mean_tpot_ms > faster.mean_tpot_ms and slower.output_tps_per_gpu < faster.output_tps_per_gpu
    # a dense model takes the same path in both releases
    dense = EngineConfig(engine="vllm", model="Qwen/Qwen3-32B")
    figures = [simulated_figures(dense, case_of(dense, "H200", clients, v)) for v in ("0.17.1", "0.24.0")]
    assert figures[0] == figures[1]


@pytest.mark.parametrize(
    ("config", "accelerator", "profile", "reason"),
    [
        (EngineConfig(engine="mindie", model="Qwen/Qwen3-32B"), "910B", BURST, "no tables for MindIE"),
        (
            EngineConfig(engine="vllm-ascend", model="Qwen/Qwen3-32B"),
            "910B",
            BURST,
            "no tables for vllm-ascend",
        ),
        (
            EngineConfig(engine="vllm", model="Qwen/Qwen3-32B"),
            "Ascend 910B",
            BURST,
            "no tables for Ascend NPUs",
        ),
        (EngineConfig(engine="vllm", model="Qwen/Qwen3-32B"), "A100-40GB", BURST, "no tables for A100-40GB"),
        (EngineConfig(engine="vllm", model="Qwen/Qwen3-32B"), None, BURST, "accelerator is not known"),
        (
            EngineConfig(engine="vllm", model="Qwen/Qwen3-32B"),
            "H200",
            BenchmarkProfile(name="s", title="s", dataset="sharegpt", num_prompts=100),
            "prompts are sharegpt",
        ),
        (
            EngineConfig(engine="vllm", model="Qwen/Qwen3-32B"),
            "H200",
            BURST.model_copy(update={"request_rate": 4.0}),
            "sends 4 requests/s",
        ),
        (
            EngineConfig(engine="vllm", model="Qwen/Qwen3-32B", speculative_config={"method": "ngram"}),
            "H200",
            BURST,
            "speculative decoding",
        ),
        (EngineConfig(engine="vllm", model="Qwen/Qwen3-32B", quantization="fp8"), "H200", BURST, "(fp8)"),
    ],
)
def test_what_aiconfigurator_does_not_cover_is_said_in_one_line(
    config: EngineConfig, accelerator: str | None, profile: BenchmarkProfile, reason: str
) -> None:
    with pytest.raises(NotCovered) as refused:
        case_of(config, accelerator, profile)
    assert reason in str(refused.value) and "\n" not in str(refused.value)


ESTIMATE = """
============================================================
  Performance Estimate (agg)
============================================================
  Model:            Qwen/Qwen3-32B
  System:           h200_sxm
  Backend:          vllm (0.24.0)
------------------------------------------------------------
  TTFT:             207.408 ms
  TPOT:             27.696 ms
  Request Latency:  7269.905 ms
  Power (per GPU):  unavailable (0.0% coverage)
------------------------------------------------------------
  tokens/s:         2,244.87
  tokens/s/gpu:     1,122.44
  tokens/s/user:    36.11
  seq/s:            8.803
  Concurrency:      64
  Memory (GPU):     44.45 GB
============================================================
"""


def test_the_printed_estimate_is_read_back_and_a_damaged_one_refused() -> None:
    estimate = parse_estimate("log line\n" + ESTIMATE, seconds=3.0)
    assert (estimate.ttft_ms, estimate.tpot_ms, estimate.tokens_per_s_per_gpu) == (207.408, 27.696, 1122.44)
    assert (estimate.tokens_per_s, estimate.seq_per_s, estimate.backend_version) == (2244.87, 8.803, "0.24.0")
    for damaged, why in (
        (ESTIMATE.replace("  TPOT:             27.696 ms\n", ""), "lacks TPOT"),
        (ESTIMATE.replace("27.696", "nan"), "no usable tpot_ms"),
        (ESTIMATE.replace("vllm (0.24.0)", "vllm"), "lacks the backend version"),
        ("Traceback: something else", "printed no aggregated estimate"),
    ):
        with pytest.raises(EstimateError, match=why):
            parse_estimate(damaged)
    assert failure_line("INFO x\nError: Requested batch_size (4096) exceeds capacity\n", 1) == (
        "AIConfigurator: Requested batch_size (4096) exceeds capacity"
    )
    assert failure_line("", -9) == "AIConfigurator exited with status -9: no output"


def test_two_predictors_disagree_past_one_and_a_half_times_either_way() -> None:
    def prediction(simulated_tps: float, simulated_tpot: float) -> Prediction:
        return Prediction(
            gpus=8,
            isl=1024,
            osl=256,
            tables="vLLM 0.24.0",
            seconds=15.0,
            figures=PredictedFigures(1000.0, 4.0, 30.0, 200.0),
            simulated=PredictedFigures(simulated_tps, 4.0, simulated_tpot, 200.0),
        )

    assert prediction(1400.0, 40.0).disagreement() is None
    assert "1,000 vs 600 tok/s/GPU (1.7×)" in (prediction(600.0, 30.0).disagreement() or "")
    assert "30 vs 50 ms TPOT (1.7×)" in (prediction(1000.0, 50.0).disagreement() or "")
    stored = prediction(600.0, 30.0)
    assert Prediction.from_dict(stored.to_dict()) == stored
    assert stored.values()["output_throughput"] == 8000.0
    assert stored.values()["total_token_throughput"] == 4.0 * 8 * (1024 + 256)
