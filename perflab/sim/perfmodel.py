"""The performance model: memory plan and the duration of one engine step.

Memory (per GPU of a replica of ``tp × pp`` GPUs):

- weights = (non-expert bytes) / (tp·pp) + (expert bytes) / (tp·pp, or the EP size with expert
  parallelism); FP8/INT8 weights take ~1 byte per parameter, AWQ/GPTQ-Int4 ~0.56, embeddings 2.
- activations = a profiling peak for ``max_num_batched_tokens`` tokens plus the sampler's logits.
- KV cache = what the engine's memory rule leaves (vLLM: ``gpu_memory_utilization × total`` minus
  weights, activations and 0.4 GiB; SGLang: ``mem_fraction_static × total`` minus weights;
  TensorRT-LLM: ``0.9 ×`` the memory free after weights; MindIE: ``NPU_MEMORY_FRACTION × total``
  minus weights and runtime). KV bytes per token per GPU = 2 (K,V) × attention layers ×
  max(1, kv_heads / tp) × head_dim × (2 bytes, or 1 with an FP8 KV cache); MLA models store one
  latent vector per layer.

One step processes ``T`` tokens (prefill chunks plus one token — or ``1 + k`` with speculative
decoding — per decoding sequence) and takes
``max(compute, memory) / (efficiency × backend factor) + communication + overhead`` where

- compute = (2 · active params · T + 4 · attention layers · heads · head_dim · attended pairs)
  / (tp · peak FLOP/s · 0.45), the peak being FP8/INT8 where weights and chip allow it (weight-only
  formats run at the 16-bit peak with a 15 % dequantization cost);
- memory = (dense weights + expert weights × fraction of experts touched by T tokens + KV bytes
  read) / (tp · bandwidth · 0.75); the touched fraction is ``1 − (1 − k/E)^T``;
- communication = 2 all-reduces per layer for tensor parallelism (ring: 2·(tp−1)/tp of the
  activations over the link, plus 8 µs latency each) and, with expert parallelism, 2 all-to-alls
  per MoE layer with a 10 % load-imbalance cost;
- overhead = the engine's fixed step cost plus a per-sequence cost (scheduler, sampling, detokenize).
"""

from __future__ import annotations

from typing import Dict

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
    shards = dep.tp * dep.pp
    expert_shards = dep.ep if dep.ep > 1 else shards
    weights = split["dense"] / shards + split["experts"] / expert_shards
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


class PerfModel:
    """Costs engine steps of one replica of a deployment."""

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
        self._compute_rate = dep.tp * peak_tflops * 1e12 * MFU * speed * (0.85 if narrow_weights else 1.0)
        self._bandwidth = dep.tp * accel.bandwidth_gbs * 1e9 * MBU * speed
        self._flops_per_token = 2.0 * arch.active_params_b * 1e9
        self._flops_per_pair = 4.0 * arch.attention_layers * arch.heads * arch.head_dim
        self._dense_bytes = split["dense"]
        self._expert_bytes = split["experts"]
        self._expert_hit = arch.experts_per_token / arch.experts if arch.is_moe else 0.0
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
            if dep.spec_method in LIGHT_DRAFTS:
                self._draft_per_token = (self._dense_bytes / arch.layers) / self._bandwidth
            elif dep.spec_method != "ngram":
                self._draft_per_token = 0.1 * self._dense_bytes / self._bandwidth

    def comm_seconds(self, tokens: int) -> float:
        dep = self.dep
        seconds = 0.0
        activation_bytes = tokens * self._hidden * 2.0
        if dep.tp > 1:
            per_reduce = 2.0 * (dep.tp - 1) / dep.tp * activation_bytes / self._link + self._latency
            seconds += 2 * self._layers * per_reduce
        if dep.ep > 1 and self._moe_layers:
            per_all_to_all = (
                dep.ep - 1
            ) / dep.ep * activation_bytes * self._topk / self._link + self._latency
            seconds += 2 * self._moe_layers * per_all_to_all
        return seconds

    def step_seconds(
        self, tokens: int, attended_pairs: float, kv_read_tokens: float, sequences: int, decoding: int = 0
    ) -> float:
        """Simulated duration of one step (before the time scale)."""
        if tokens <= 0:
            return 0.0
        compute = (
            tokens * self._flops_per_token + attended_pairs * self._flops_per_pair
        ) / self._compute_rate
        weights = self._dense_bytes
        if self._expert_bytes:
            weights += self._expert_bytes * (1.0 - (1.0 - self._expert_hit) ** tokens)
        memory = (weights + kv_read_tokens * self._kv_per_token) / self._bandwidth
        if self.dep.ep > 1:
            memory *= 1.1
        seconds = max(compute, memory) + self.comm_seconds(tokens)
        if decoding and self.dep.spec_tokens:
            seconds += self.dep.spec_tokens * self._draft_per_token
        return seconds + self._overhead + sequences * self._per_seq
