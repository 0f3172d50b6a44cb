"""Engine-specific scheduling of the simulated engines: MindIE's prefill-priority batches with a decode
batch of at most maxBatchSize, and SGLang's running limit on a hybrid (linear-attention) model."""

from __future__ import annotations

from perflab.sim.deployment import Knobs, resolve_deployment
from perflab.sim.hardware import find_accelerator
from perflab.sim.metrics import MetricsRecorder
from perflab.sim.perfmodel import plan_memory, running_limit, state_bytes_per_seq_per_gpu
from perflab.sim.scheduling import RankScheduler
from perflab.sim.sequence import Sequence

MINDIE_BLOCK = 128


def _mindie(max_batch: int = 200, max_prefill_batch: int = 50) -> RankScheduler:
    knobs = Knobs("Qwen/Qwen3-8B")
    knobs.max_num_seqs = max_batch
    knobs.max_prefill_seqs = max_prefill_batch
    knobs.max_model_len = 4096
    dep = resolve_deployment("mindie", knobs, find_accelerator("910B"))
    return RankScheduler(dep, 4000 * MINDIE_BLOCK, _deliver, MetricsRecorder())


def _deliver(seq: Sequence, count: int, now: float) -> None:
    seq.done = seq.generated >= seq.target_tokens  # as the engine marks a sequence that is done


def _burst(rank: RankScheduler, count: int, prompt: int = 128, output: int = 4) -> list[Sequence]:
    sequences = [Sequence(f"r{index}", 0.0, prompt, output, "length", index) for index in range(count)]
    for seq in sequences:
        rank.submit(seq)
    return sequences


def _step(rank: RankScheduler, step: int) -> list[tuple[Sequence, int]]:
    batch = rank.plan(0.0)
    rank.finish(batch, 0.0, step)
    return batch


def test_mindie_prefills_every_waiting_request_before_decoding_any():
    """A burst of 1000: prefill batches of maxPrefillBatchSize (50) run while requests wait — past
    maxBatchSize (200), which bounds only the decode batch — then decode batches of the first 200."""
    rank = _mindie()
    sequences = _burst(rank, 1000)
    prefills = [_step(rank, step) for step in range(20)]
    assert all(len(batch) == 50 and all(chunk == 128 for _, chunk in batch) for batch in prefills)
    assert not rank.waiting and len(rank.running) == 1000
    assert all(seq.generated == 1 for seq in sequences)
    decode = _step(rank, 20)
    assert [seq for seq, _ in decode] == sequences[:200] and all(chunk == 0 for _, chunk in decode)
    for step in range(21, 23):
        assert [seq for seq, _ in _step(rank, step)] == sequences[:200]
    # The first 200 are done (4 tokens each); the next 200 decode.
    assert all(seq.done for seq in sequences[:200])
    assert [seq for seq, _ in _step(rank, 23)] == sequences[200:400]


def test_mindie_keeps_a_reserve_of_free_blocks_for_decoding():
    """No prefill batch starts while fewer than 5 % of the KV blocks are free: the running sequences
    decode instead (MindIE-LLM's PRESERVED_FACTOR_FOR_DECODE)."""
    rank = _mindie(max_prefill_batch=1)
    # 1000-token prompts take 8 blocks of 128 each: after 476 of them 192 of 4000 blocks (4.8 %) are free.
    _burst(rank, 500, prompt=1000, output=16)
    for step in range(476):
        assert len(_step(rank, step)) == 1
    assert len(rank.running) == 476 and rank.gauges().kv_used_tokens == 3808 * MINDIE_BLOCK
    batch = _step(rank, 476)
    assert len(batch) == 200 and all(chunk == 0 for _, chunk in batch) and len(rank.waiting) == 24


def _sglang_hybrid() -> tuple:
    dep = resolve_deployment("sglang", Knobs("Qwen/Qwen3.5-35B-A3B"), find_accelerator("H200"))
    return dep, plan_memory(dep)


def test_sglang_runs_a_hybrid_model_with_a_third_of_its_recurrent_state_pool():
    """SGLang 0.5.9 gives a hybrid model's recurrent states 0.9 of the memory it gives the KV cache and
    runs at most a third as many requests as that pool holds (radix cache on)."""
    dep, plan = _sglang_hybrid()
    state = state_bytes_per_seq_per_gpu(dep)
    # Qwen3.5-35B-A3B: 30 Gated DeltaNet layers, a float32 32 × 128 × 128 state and a 3 × 8192 conv state.
    assert state == 30 * (32 * 128 * 128 * 4 + 3 * 8192 * 2)
    pool = 0.9 * plan.kv_bytes
    assert running_limit(dep, plan.kv_tokens) == int(pool // state) // 3 < dep.max_num_seqs
    vllm = resolve_deployment("vllm", Knobs("Qwen/Qwen3.5-35B-A3B"), find_accelerator("H200"))
    assert running_limit(vllm, plan_memory(vllm).kv_tokens) == vllm.max_num_seqs
    assert state_bytes_per_seq_per_gpu(vllm) == state  # vLLM reads the config's float32 mamba_ssm_dtype too
