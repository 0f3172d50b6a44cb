"""The performance model: memory plan and the duration of one engine step.

A replica has ``attention_dp`` attention ranks of ``tp × pp`` GPUs each (one rank without attention
data parallelism); its MoE layers are split over the ``attention_dp × tp`` GPUs as ``moe_tp × moe_ep``
(:class:`~perflab.sim.deployment.Deployment`).

Memory (per GPU):

- weights = (non-expert bytes) / (tp·pp) + (expert bytes) / (moe_tp·moe_ep·pp): every attention rank
  holds its own copy of attention and dense layers, the MoE group shares the experts; FP8/INT8
  weights take ~1 byte per parameter, AWQ/GPTQ-Int4 ~0.56, embeddings 2.
- activations = a profiling peak for ``max_num_batched_tokens`` tokens plus the sampler's logits.
- KV cache = what the engine's memory rule leaves (vLLM: ``gpu_memory_utilization × total`` minus
  weights, activations and 0.4 GiB; SGLang: ``mem_fraction_static × total`` minus weights;
  TensorRT-LLM: ``0.9 ×`` the memory free after weights; MindIE: ``NPU_MEMORY_FRACTION × total``
  minus weights and runtime). KV bytes per token per GPU = 2 (K,V) × attention layers ×
  max(1, kv_heads / tp) × head_dim × (2 bytes, or 1 with an FP8 KV cache); MLA models store one
  latent vector per layer. Each attention rank has its own KV cache.

One step of the replica runs every attention rank's batch in lockstep (a rank without work runs a
dummy batch, as vLLM's DP ranks of a MoE model do). Rank r processes ``T_r`` tokens (prefill chunks
plus one token — or ``1 + k`` with speculative decoding — per decoding sequence); the step takes
``max_r dense_r + experts(ΣT_r) + communication + overhead`` (speeds scaled by the engine's
efficiency and the attention backend's factor) where

- dense_r = max(compute, memory) of attention and the non-expert layers on the rank's tp GPUs:
  compute = (2 · non-expert active params · T_r + 4 · attention layers · heads · head_dim · attended
  pairs) / (tp · peak FLOP/s · 0.45), the peak being FP8/INT8 where weights and chip allow it
  (weight-only formats run at the 16-bit peak with a 15 % dequantization cost); memory = (non-expert
  weights + KV bytes read) / (tp · bandwidth · 0.75);
- experts = max(compute, memory) of the MoE layers for all ranks' tokens on the MoE group's GPUs:
  2 · active expert params · ΣT flops, the touched share ``1 − (1 − k/E)^ΣT`` of the expert weights
  read; +10 % load imbalance with expert parallelism;
- communication = ring collectives over NVLink/HCCS (8 µs latency each, 15 µs on NPUs): two
  all-reduces per layer within a rank's tensor parallelism (one when attention is data parallel on a
  MoE model); with attention data parallelism an all-gather and a reduce-scatter of the group's tokens
  per MoE layer (tensor-parallel experts) or an all-to-all dispatch and combine (expert parallel);
- overhead = the engine's fixed step cost plus a per-sequence cost (scheduler, sampling, detokenize)
  for the busiest rank.
"""

from __future__ import annotations

from typing import Dict, List

from perflab.sim import failures
from perflab.sim.catalog import WEIGHT_BYTES
from perflab.sim.deployment import Deployment
from perflab.sim.profiles import LIGHT_DRAFTS

GIB = 1024**3
MFU = 0.45
MBU = 0.75
CUDA_CONTEXT_BYTES = 0.5 * GIB


class MemoryPlan:
    """Per-GPU memory of one deployment."""

    def __init__(
        self, weights: float, activations: float, kv_bytes: float, kv_per_token: float, used: float
    ) -> None:
        self.weights = weights
        self.activations = activations
        self.kv_bytes = kv_bytes
        self.kv_per_token = kv_per_token
        self.used = used

    @property
    def kv_tokens(self) -> int:
        return int(self.kv_bytes // self.kv_per_token) if self.kv_per_token else 0


def weight_split(dep: Deployment) -> Dict[str, float]:
    """Bytes of dense (non-expert) and expert weights of the whole model."""
    arch = dep.model.arch
    per_weight = WEIGHT_BYTES[dep.weight_format]
    experts = arch.expert_params * per_weight
    body = (arch.params_b * 1e9 - arch.embedding_params - arch.expert_params) * per_weight
    return {"dense": body + arch.embedding_params * 2.0, "experts": experts}


def kv_bytes_per_token_per_gpu(dep: Deployment) -> float:
    arch = dep.model.arch
    if arch.kv_dim_per_layer:
        return arch.kv_elements_per_token() * dep.kv_bytes / dep.pp
    heads_per_gpu = max(1.0, arch.kv_heads / dep.tp)
    return 2.0 * arch.attention_layers * heads_per_gpu * arch.head_dim * dep.kv_bytes / dep.pp


def plan_memory(dep: Deployment, busy_bytes: float = 0.0, device: int = 0) -> MemoryPlan:
    """Where each GPU's memory goes; raises the engine's out-of-memory failures."""
    arch = dep.model.arch
    total = float(dep.accel.memory_bytes)
    split = weight_split(dep)
    weights = split["dense"] / (dep.tp * dep.pp) + split["experts"] / (dep.moe_group * dep.pp)
    ffn = (arch.moe_intermediate * arch.experts_per_token if arch.is_moe else arch.intermediate) / dep.tp
    tokens = dep.max_num_batched_tokens
    activations = (
        tokens * arch.hidden * 2 * 16 + tokens * ffn * 4 + min(dep.max_num_seqs, tokens) * arch.vocab * 4
    )
    available = total - busy_bytes
    if (
        dep.engine in ("vllm", "vllm-ascend")
        and busy_bytes
        and available - CUDA_CONTEXT_BYTES < total * dep.mem_fraction
    ):
        # vLLM checks free memory against gpu_memory_utilization before it loads anything.
        raise failures.free_memory_too_low(
            dep.engine, available - CUDA_CONTEXT_BYTES, total, dep.mem_fraction
        )
    if weights + CUDA_CONTEXT_BYTES > available:
        tried = min(weights, 2.0 * weights / arch.layers + 0.25 * GIB)
        raise failures.out_of_memory(
            dep.engine, device, total, tried, max(0.0, available - CUDA_CONTEXT_BYTES)
        )
    if dep.engine in ("vllm", "vllm-ascend"):
        kv = total * dep.mem_fraction - weights - activations - 0.4 * GIB
        used = min(total, total * dep.mem_fraction + CUDA_CONTEXT_BYTES)
    elif dep.engine == "sglang":
        kv = total * dep.mem_fraction - weights
        used = min(total, total * dep.mem_fraction + activations + CUDA_CONTEXT_BYTES)
    elif dep.engine == "trtllm":
        free = min(available, total) - weights - activations - 1.0 * GIB
        kv = free * dep.mem_fraction
        used = weights + activations + 1.0 * GIB + max(0.0, kv)
    else:
        kv = total * dep.mem_fraction - weights - activations - 1.5 * GIB
        used = min(total, total * dep.mem_fraction + 1.5 * GIB)
    per_token = kv_bytes_per_token_per_gpu(dep)
    if dep.engine != "trtllm" and weights + max(kv, 0.0) + CUDA_CONTEXT_BYTES > available:
        raise failures.out_of_memory(dep.engine, device, total, max(kv, GIB), available - CUDA_CONTEXT_BYTES)
    if kv <= per_token * dep.profile.block_size:
        if dep.engine == "mindie":
            raise failures.out_of_memory(dep.engine, device, total, GIB, total * dep.mem_fraction)
        raise failures.no_kv_cache_memory(dep.engine)
    if dep.engine in ("vllm", "vllm-ascend") and kv < per_token * dep.max_model_len:
        raise failures.max_len_exceeds_kv(
            dep.engine, dep.max_model_len, per_token * dep.max_model_len, kv, int(kv // per_token) // 16 * 16
        )
    return MemoryPlan(weights, activations, kv, per_token, used)


class StepLoad:
    """What one attention rank computes in one step: ``tokens`` (prefill chunks plus decode tokens),
    attended query-key ``pairs``, ``kv_read`` cached tokens read, ``sequences`` in the batch, of which
    ``decoding`` decode."""

    __slots__ = ("tokens", "pairs", "kv_read", "sequences", "decoding")

    def __init__(
        self, tokens: int = 0, pairs: float = 0.0, kv_read: float = 0.0, sequences: int = 0, decoding: int = 0
    ) -> None:
        self.tokens = tokens
        self.pairs = pairs
        self.kv_read = kv_read
        self.sequences = sequences
        self.decoding = decoding


class PerfModel:
    """Costs engine steps of one replica of a deployment (its attention ranks in lockstep)."""

    def __init__(self, dep: Deployment) -> None:
        arch = dep.model.arch
        accel = dep.accel
        self.dep = dep
        split = weight_split(dep)
        peak_tflops = {"fp8": accel.fp8_tflops, "int8": accel.int8_tops}.get(
            dep.compute_format, accel.bf16_tflops
        )
        narrow_weights = dep.weight_format != "bf16" and dep.compute_format == "bf16"
        speed = dep.profile.efficiency * dep.attention_factor
        # Per GPU; a rank's dense work is split over its tp GPUs, the MoE work over the MoE group.
        self._compute_rate = peak_tflops * 1e12 * MFU * speed * (0.85 if narrow_weights else 1.0)
        self._bandwidth = accel.bandwidth_gbs * 1e9 * MBU * speed
        self._expert_hit = arch.experts_per_token / arch.experts if arch.is_moe else 0.0
        expert_active = arch.expert_params * self._expert_hit
        self._dense_flops_per_token = 2.0 * (arch.active_params_b * 1e9 - expert_active)
        self._expert_flops_per_token = 2.0 * expert_active
        self._flops_per_pair = 4.0 * arch.attention_layers * arch.heads * arch.head_dim
        self._dense_bytes = split["dense"]
        self._expert_bytes = split["experts"]
        self._kv_per_token = kv_bytes_per_token_per_gpu(dep) * dep.tp * dep.pp
        self._layers = arch.layers
        self._moe_layers = arch.layers if arch.is_moe else 0
        self._hidden = arch.hidden
        self._topk = arch.experts_per_token
        self._link = accel.link_gbs * 1e9
        self._latency = 15e-6 if accel.is_npu else 8e-6
        overhead = dep.profile.step_overhead_s
        self._overhead = overhead * 0.8 if dep.performance_mode == "throughput" else overhead
        self._per_seq = dep.profile.per_seq_overhead_s
        self._draft_per_token = 0.0
        if dep.spec_tokens:
            dense_seconds = self._dense_bytes / (dep.tp * self._bandwidth)
            if dep.spec_method in LIGHT_DRAFTS:
                self._draft_per_token = dense_seconds / arch.layers
            elif dep.spec_method != "ngram":
                self._draft_per_token = 0.1 * dense_seconds

    def _collective(self, tokens: int, gpus: int) -> float:
        """One ring all-gather or reduce-scatter of ``tokens`` activations over ``gpus`` GPUs."""
        return (gpus - 1) / gpus * tokens * self._hidden * 2.0 / self._link + self._latency

    def comm_seconds(self, tokens: int, group_tokens: int = -1) -> float:
        """Communication of one step: ``tokens`` of the busiest attention rank, ``group_tokens`` of
        the whole MoE group (the same without attention data parallelism)."""
        dep = self.dep
        group_tokens = tokens if group_tokens < 0 else group_tokens
        seconds = 0.0
        if dep.tp > 1:  # the all-reduce after attention (and after a dense MLP)
            per_layer = 2 * self._collective(tokens, dep.tp)
            seconds += self._layers * per_layer * (1 if dep.attention_dp > 1 and self._moe_layers else 2)
        if dep.attention_dp > 1 and self._moe_layers:
            if dep.moe_ep > 1:  # all-to-all: each GPU sends its tokens' top-k copies to the experts' owners
                sent = group_tokens / dep.moe_group * self._topk * (dep.moe_ep - 1) / dep.moe_ep
                per_layer = 2 * (sent * self._hidden * 2.0 / self._link + self._latency)
            else:  # tensor-parallel experts: gather the group's tokens, reduce-scatter the results
                per_layer = 2 * self._collective(group_tokens, dep.moe_group)
            seconds += self._moe_layers * per_layer
        return seconds

    def _dense_seconds(self, load: StepLoad) -> float:
        """Attention and the non-expert layers of one attention rank (on its tp GPUs)."""
        if load.tokens <= 0:
            return 0.0
        tp = self.dep.tp
        compute = (load.tokens * self._dense_flops_per_token + load.pairs * self._flops_per_pair) / (
            tp * self._compute_rate
        )
        memory = (self._dense_bytes + load.kv_read * self._kv_per_token) / (tp * self._bandwidth)
        return max(compute, memory)

    def _expert_seconds(self, tokens: int) -> float:
        """The MoE layers for the group's ``tokens`` (on the MoE group's GPUs)."""
        if tokens <= 0 or not self._expert_bytes:
            return 0.0
        gpus = self.dep.moe_group
        compute = tokens * self._expert_flops_per_token / (gpus * self._compute_rate)
        touched = self._expert_bytes * (1.0 - (1.0 - self._expert_hit) ** tokens)
        memory = touched / (gpus * self._bandwidth)
        seconds = max(compute, memory)
        return seconds * 1.1 if self.dep.moe_ep > 1 else seconds  # expert load imbalance

    def group_step_seconds(self, loads: List[StepLoad]) -> float:
        """Simulated duration of one lockstep step of the replica's attention ranks (before the time
        scale); 0 when no rank has work."""
        busiest = max(loads, key=lambda load: load.tokens)
        if busiest.tokens <= 0:
            return 0.0
        group_tokens = sum(load.tokens for load in loads)
        seconds = max(self._dense_seconds(load) for load in loads) + self._expert_seconds(group_tokens)
        seconds += self.comm_seconds(busiest.tokens, group_tokens)
        if self.dep.spec_tokens and any(load.decoding for load in loads):
            seconds += self.dep.spec_tokens * self._draft_per_token
        return seconds + self._overhead + max(load.sequences for load in loads) * self._per_seq

    def step_seconds(
        self, tokens: int, attended_pairs: float, kv_read_tokens: float, sequences: int, decoding: int = 0
    ) -> float:
        """Simulated duration of one step of a single attention rank (before the time scale)."""
        return self.group_step_seconds(
            [StepLoad(tokens, attended_pairs, kv_read_tokens, sequences, decoding)]
        )
