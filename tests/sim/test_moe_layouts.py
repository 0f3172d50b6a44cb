"""MoE layouts: attention data parallelism with tensor- or expert-parallel experts, as the engines read
their parallel flags, in the memory plan and in the step costs."""

from __future__ import annotations

import pytest

from perflab.sim.deployment import Knobs, resolve_deployment
from perflab.sim.failures import EngineFailure
from perflab.sim.hardware import find_accelerator
from perflab.sim.offline import RequestSpec, simulate
from perflab.sim.perfmodel import PerfModel, StepLoad, plan_memory, weight_split
from tests.sim.overlap import peak_running

MOE = "Qwen/Qwen3-30B-A3B"


def _deployment(model: str = MOE, engine: str = "vllm", **knobs: object):
    values = Knobs(model)
    for name, value in knobs.items():
        setattr(values, name, value)
    return resolve_deployment(engine, values, find_accelerator("H100"))


def test_vllm_data_parallel_ranks_share_the_experts_of_a_moe_model_only():
    layout = _deployment(dp=2)
    assert (layout.dp, layout.attention_dp, layout.moe_tp, layout.moe_ep) == (1, 2, 2, 1)
    assert layout.gpus == 2
    expert_parallel = _deployment(dp=2, ep=2)  # the vLLM shim's --enable-expert-parallel: ep = dp × tp
    assert (expert_parallel.attention_dp, expert_parallel.moe_tp, expert_parallel.moe_ep) == (2, 1, 2)
    dense = _deployment("Qwen/Qwen3-8B", dp=2)
    assert (dense.dp, dense.attention_dp, dense.gpus) == (2, 1, 2)


def test_sglang_shares_experts_across_dp_ranks_only_with_dp_attention():
    replicas = _deployment(engine="sglang", dp=2, ep=1)
    assert (replicas.dp, replicas.attention_dp, replicas.moe_tp) == (2, 1, 1)
    layout = _deployment(engine="sglang", dp=4, tp=2, dp_attention=True, ep=4)
    assert (layout.dp, layout.attention_dp, layout.moe_tp, layout.moe_ep, layout.gpus) == (1, 4, 2, 4, 8)
    with pytest.raises(EngineFailure) as failure:
        _deployment(engine="sglang", dp=2, dp_attention=True, ep=3)
    assert "does not divide the MoE group of 2 GPUs" in failure.value.lines[-1]


def test_attention_ranks_hold_their_own_dense_weights_and_kv_cache():
    tensor_parallel, attention_dp = _deployment(tp=2), _deployment(dp=2)
    split = weight_split(tensor_parallel)
    tp_plan, dp_plan = plan_memory(tensor_parallel), plan_memory(attention_dp)
    assert tp_plan.weights == pytest.approx(split["dense"] / 2 + split["experts"] / 2)
    assert dp_plan.weights == pytest.approx(split["dense"] + split["experts"] / 2)
    # Qwen3-30B-A3B has 4 KV heads: a TP1 rank stores all of them, a TP2 rank half.
    assert dp_plan.kv_per_token == pytest.approx(2 * tp_plan.kv_per_token)


def test_each_attention_rank_runs_its_own_batch():
    burst = [RequestSpec(0.0, 256, 32) for _ in range(64)]
    tensor_parallel, _ = simulate(_deployment(tp=2, max_num_seqs=8), burst)
    attention_dp, _ = simulate(_deployment(dp=2, max_num_seqs=8), burst)
    assert peak_running(tensor_parallel) == 8
    assert peak_running(attention_dp) == 16


def test_ranks_step_in_lockstep_and_the_experts_see_every_ranks_tokens():
    perf = PerfModel(_deployment(dp=2))
    busy = StepLoad(tokens=64, pairs=64 * 2048, kv_read=64 * 2048, sequences=64, decoding=64)
    alone = perf.group_step_seconds([busy, StepLoad()])
    both = perf.group_step_seconds([busy, busy])
    assert alone > 0 and both > alone  # the idle rank waits for the busy one; two busy ranks share experts
    assert both < 2 * alone
    assert perf.group_step_seconds([StepLoad(), StepLoad()]) == 0.0


def test_attention_data_parallelism_trades_all_reduces_for_expert_dispatch():
    tokens = 4096
    tensor_parallel = PerfModel(_deployment(tp=2)).comm_seconds(tokens)
    # Two ranks of half the tokens each: no attention all-reduce, one gather and one reduce-scatter
    # of the group's tokens per MoE layer (half the bytes of TP2's two all-reduces per layer).
    gathered = PerfModel(_deployment(dp=2)).comm_seconds(tokens // 2, tokens)
    assert 0 < gathered < tensor_parallel
    # Expert parallelism sends each token's top-8 copies to the experts' owners: on 2 GPUs that
    # moves more than gathering the tokens does.
    dispatched = PerfModel(_deployment(dp=2, ep=2)).comm_seconds(tokens // 2, tokens)
    assert dispatched > gathered
