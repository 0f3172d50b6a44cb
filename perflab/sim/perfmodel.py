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
  weights, the activation peak and vLLM's non-torch memory, as vLLM 0.11's
  ``determine_available_memory`` does — no CUDA-graph estimate, which vLLM subtracts only from 0.21
  on; SGLang: ``mem_fraction_static × total`` minus weights; TensorRT-LLM: ``0.9 ×`` the memory
  free after weights; MindIE: ``NPU_MEMORY_FRACTION × total`` minus weights and runtime). KV bytes
  per token per GPU = 2 (K,V) × attention layers × max(1, kv_heads / tp) × head_dim × (2 bytes, or
  1 with an FP8 KV cache); MLA models store one
latent vector per layer. Each attention rank has its own KV cache.

One step of the replica runs every attention rank's batch in lockstep (a rank without work runs a
dummy batch, as vLLM's DP ranks of a MoE model do). Rank r processes ``T_r`` tokens (prefill chunks
plus one token — or ``1 + k`` with speculative decoding — per decoding sequence). The step takes
``max(GPU + host, front end)``:

- GPU = ``max_r dense_r + experts(ΣT_r) + communication``. dense_r is the rank's GEMMs and attention
  on its tp GPUs plus fixed per-layer kernel latencies; experts are the MoE layers for all ranks'
  tokens on the MoE group's GPUs (only the touched share ``1 − (1 − k/E)^ΣT`` of the expert weights is
  read; +10 % load imbalance with expert parallelism). Each part is a roofline ``max(FLOPs / (peak ×
  compute efficiency), bytes / (bandwidth × memory efficiency))``; the efficiencies (module constants
  below) are fits to NVIDIA's measured vLLM kernel tables in AIConfigurator 0.12.0, times the engine's
  efficiency, the attention backend's factor and, for compute, what the seeds' engines achieved on the
  accelerator (:attr:`~perflab.sim.hardware.Accelerator.compute_achieved`). Hybrid models read and
  rewrite each sequence's recurrent state every step; on a vLLM before 0.23.0
  (:attr:`~perflab.sim.deployment.Deployment.gdn_mixed_chunks`) a step that holds a prefill also copies
  every sequence's state out and back and runs each decoding sequence through the Gated DeltaNet chunk
  kernel, more passes over the state (:data:`GDN_GATHER_SCATTER_PASSES`,
  :data:`GDN_ONE_TOKEN_CHUNK_PASSES`).
- communication = ring collectives over NVLink/HCCS at :data:`COLLECTIVE_EFFICIENCY` of the link: two
  all-reduces per layer within a rank's tensor parallelism (one when attention is data parallel on a
  MoE model); with attention data parallelism an all-gather and a reduce-scatter of the group's tokens
  per MoE layer (tensor-parallel experts) or an all-to-all dispatch and combine (expert parallel). A
  vLLM step too large for its CUDA graphs (:attr:`~perflab.sim.deployment.Deployment.graph_tokens`;
  every step with ``--enforce-eager``) launches each collective eagerly, which adds the accelerator's
  :attr:`~perflab.sim.hardware.Accelerator.eager_collective_s` to it.
- host = the engine's fixed step cost.
- front end = the engine's streaming cost per sequence in the busiest rank's batch (times the engine's
  reasoning-parser factor for a sequence whose chat output the server's reasoning parser reads): the API
  server works in its own process beside the GPU, so it only sets the pace when it is the slower.
"""

from __future__ import annotations

from typing import Dict, List

from perflab.sim import failures
from perflab.sim.catalog import WEIGHT_BYTES
from perflab.sim.deployment import Deployment
from perflab.sim.hardware import Accelerator
from perflab.sim.profiles import LIGHT_DRAFTS

GIB = 1024**3
# Kernel efficiencies: each is the fit of one roofline, max(flops / (peak × compute), bytes / (bandwidth ×
# memory)) + a fixed latency, to NVIDIA's measured vLLM kernel tables for A100, H100 and H200 in
# AIConfigurator 0.12.0 (aiconfigurator-core, systems/data/<gpu>/{gemm,attention,moe}/vllm).
GEMM_COMPUTE = 0.80  # BF16 GEMMs of LLM shapes (14,504 H100 shapes, median error 5 %; A100, H200 the same)
FP8_GEMM_COMPUTE = 0.45  # of the FP8 peak (H100/H200 per-tensor FP8 GEMMs)
FP8_MEMORY = 0.80  # FP8 weight streaming relative to BF16's (0.70–0.75 against 0.85–0.90)
GEMM_FLOOR_S = 5e-6  # per GEMM (4–6 µs); four GEMMs a layer (QKV, output, gate-up, down)
ATTENTION_COMPUTE = 0.55  # prefill attention (FlashAttention, causal), of the BF16 peak
ATTENTION_MEMORY = 0.75  # decode attention reading the KV cache
ATTENTION_FLOOR_S = 10e-6  # per attention layer
# Fused-MoE grouped GEMMs compute at :func:`moe_compute_efficiency` of the BF16 peak (the accelerator's
# curve over each GPU's slice of an expert); block-FP8 experts compute at the same rate (the tables'
# FP8 and BF16 curves differ by under 10 %), so FP8 only halves their bytes.
MOE_MEMORY = 0.78  # and 0.75–0.80 of bandwidth (BF16 and block-FP8 alike)
MOE_FLOOR_S = 20e-6  # per MoE layer
SMALL_KERNELS_S = 6e-6  # per layer: two norms at AIConfigurator's 3 µs per small memory-bound kernel
# Collectives (ring all-reduce, all-gather, reduce-scatter) move data at this share of the link bandwidth,
# after a fixed latency: vLLM's custom all-reduce on 2–8 A100/H100/H200 (AIConfigurator 0.12.0,
# systems/data/<gpu>/comm/vllm, 0.5–32 MiB on 8 GPUs: a line of 13 µs + 58 GB/s on A100, 10 µs +
# 107 GB/s on H100, i.e. 0.34–0.42 of the link after the ring's 2(n−1)/n).
COLLECTIVE_EFFICIENCY = 0.35
COLLECTIVE_LATENCY_S = 10e-6
# Weight-only quantized GEMMs (AWQ/GPTQ int4, FP8 without FP8 tensor cores: vLLM's Marlin kernels, dense
# and fused-MoE alike) dequantize inside the kernel and compute at the 16-bit peak with this efficiency
# penalty. No kernel table measures them; fitted on seed 001's vLLM FP8 and AWQ blocks on one A100
# (ShareGPT bursts: throughput 1.12 and 1.05, TPOT 0.99 and 1.04 of real).
WEIGHT_ONLY_COMPUTE = 0.6
CUDA_CONTEXT_BYTES = 0.5 * GIB
# Memory outside PyTorch's allocator that vLLM's profile counts against the KV cache (cuBLAS and NCCL
# workspaces): its start-up logs print "non_torch_memory takes 0.09–0.20 GiB" on one node.
VLLM_NON_TORCH_BYTES = 0.2 * GIB
# vLLM before 0.23.0, in a step that holds a prefill, sends every non-speculative sequence through
# the Gated DeltaNet chunk kernel (0.17.1 ``Qwen3NextGatedDeltaNet._forward_core``). Every sequence's SSM
# state is gathered into a new tensor and scattered back (``ssm_state[indices].contiguous()``,
# ``ssm_state[indices] =``): four more passes over it. A decoding sequence becomes a one-token chunk,
# which makes two more passes than the recurrent kernel of a decode-only step: the chunk kernel reads the
# initial state, writes the chunk's starting state out, reads it back and writes the final state, where
# the recurrent kernel reads and writes it once. NVIDIA's measured vLLM kernel table for the H200 in
# AIConfigurator 0.12.0 (``systems/data/h200_sxm/linear_attention/vllm/0.24.0``, Qwen3.5-35B-A3B at TP1)
# agrees: ``chunk_gated_delta_rule_flashinfer`` (the kernel vLLM runs on SM90) takes 2.22 µs for each
# one-token sequence more (79.2 µs for 32, 150.3 µs for 64), ``fused_recurrent_gated_delta_rule_packed_
# decode`` 1.02 µs for each sequence more (267 µs for 256, 528 µs for 512): 2.2 times, and the 1.20 µs
# between them are two passes over a layer's 2.1 MB float32 state at 3.5 TB/s, where the decode
# attention's bandwidth below (0.75 of 4.8 TB/s) gives 1.17 µs.
GDN_GATHER_SCATTER_PASSES = 4
GDN_ONE_TOKEN_CHUNK_PASSES = 2
# SGLang splits the memory left for caches of a hybrid (linear-attention) model between the recurrent
# states and the KV cache in this ratio (``--mamba-full-memory-ratio``, default 0.9 in SGLang 0.5.9).
SGLANG_MAMBA_FULL_MEMORY_RATIO = 0.9


def moe_compute_efficiency(accel: Accelerator, expert_slice: float) -> float:
    """The share of the BF16 peak a fused-MoE layer's grouped GEMMs reach when every expert has
    hundreds of tokens (prefill), for experts of ``expert_slice`` intermediate columns per GPU (the
    expert's intermediate size ÷ its tensor parallelism): ``peak × n / (n + half)`` with the
    accelerator's :attr:`~perflab.sim.hardware.Accelerator.moe_compute` (a constant where ``half`` is
    0). Narrow slices leave the tensor cores idle: on an H200 a 192-column slice (Qwen3-235B-A22B at
    TP8) reaches 0.24 of the peak and a 1,536-column one (TP1) 0.52."""
    peak, half = accel.moe_compute
    return peak * expert_slice / (expert_slice + half) if half else peak


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


def ssm_bytes_per_seq_per_gpu(dep: Deployment) -> float:
    """The SSM (temporal) state one running sequence holds on each GPU (hybrid models; heads split over
    TP). It takes the model config's ``mamba_ssm_dtype`` (vLLM's Qwen3.5 config hook and SGLang's
    ``mamba2_state_dtype`` read it); without one, vLLM keeps the model's 16 bits and SGLang float32."""
    arch = dep.model.arch
    element = arch.ssm_state_bytes or (4 if dep.engine == "sglang" else 2)
    return arch.state_elements * element / (dep.tp * dep.pp)


def state_bytes_per_seq_per_gpu(dep: Deployment) -> float:
    """Recurrent state one running sequence holds on each GPU: the SSM state and the 16-bit
    convolution state."""
    return ssm_bytes_per_seq_per_gpu(dep) + dep.model.arch.conv_state_elements * 2.0 / (dep.tp * dep.pp)


def running_limit(dep: Deployment, kv_tokens: int) -> int:
    """Sequences one attention rank may run at once: ``max_num_seqs``, and for SGLang on a hybrid model
    a third of its recurrent-state pool (SGLang 0.5.9 ``init_memory_pool``: ``max_mamba_cache_size //
    MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO`` (3) with the radix cache on; the pool holds
    ``mamba_full_memory_ratio`` (0.9) times the KV cache's memory, :func:`plan_memory`)."""
    state = state_bytes_per_seq_per_gpu(dep)
    if dep.engine != "sglang" or not state:
        return dep.max_num_seqs
    pool = kv_tokens * kv_bytes_per_token_per_gpu(dep) * SGLANG_MAMBA_FULL_MEMORY_RATIO
    slots = int(pool // state) // (3 if dep.prefix_caching else 1)
    return max(1, min(dep.max_num_seqs, slots))


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
        kv = total * dep.mem_fraction - weights - activations - VLLM_NON_TORCH_BYTES
        used = min(total, total * dep.mem_fraction + CUDA_CONTEXT_BYTES)
    elif dep.engine == "sglang":
        kv = total * dep.mem_fraction - weights
        if arch.state_elements:  # the recurrent-state pool takes 0.9 of the KV cache's share
            kv /= 1.0 + SGLANG_MAMBA_FULL_MEMORY_RATIO
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
    ``decoding`` decode and ``reasoning`` stream through the server's reasoning parser."""

    __slots__ = ("tokens", "pairs", "kv_read", "sequences", "decoding", "reasoning")

    def __init__(
        self,
        tokens: int = 0,
        pairs: float = 0.0,
        kv_read: float = 0.0,
        sequences: int = 0,
        decoding: int = 0,
        reasoning: int = 0,
    ) -> None:
        self.tokens = tokens
        self.pairs = pairs
        self.kv_read = kv_read
        self.sequences = sequences
        self.decoding = decoding
        self.reasoning = reasoning


class PerfModel:
    """Costs engine steps of one replica of a deployment (its attention ranks in lockstep)."""

    def __init__(self, dep: Deployment) -> None:
        arch = dep.model.arch
        accel = dep.accel
        self.dep = dep
        split = weight_split(dep)
        speed = dep.profile.efficiency * dep.attention_factor
        bandwidth = accel.bandwidth_gbs * 1e9 * accel.memory_efficiency * speed
        bf16_peak = accel.bf16_tflops * 1e12 * speed * accel.compute_achieved
        weight_only = (
            WEIGHT_ONLY_COMPUTE if dep.weight_format != "bf16" and dep.compute_format == "bf16" else 1.0
        )
        if dep.compute_format == "fp8":
            self._gemm_rate = accel.fp8_tflops * 1e12 * FP8_GEMM_COMPUTE * speed * accel.compute_achieved
        elif dep.compute_format == "int8":
            self._gemm_rate = accel.int8_tops * 1e12 * FP8_GEMM_COMPUTE * speed * accel.compute_achieved
        else:
            self._gemm_rate = bf16_peak * GEMM_COMPUTE * weight_only
        self._weight_bandwidth = bandwidth * (FP8_MEMORY if dep.weight_format != "bf16" else 1.0)
        self._attention_rate = bf16_peak * ATTENTION_COMPUTE
        self._kv_bandwidth = accel.bandwidth_gbs * 1e9 * ATTENTION_MEMORY * speed
        moe_slice = arch.moe_intermediate / dep.moe_tp if arch.is_moe else 0.0
        self._moe_rate = bf16_peak * moe_compute_efficiency(accel, moe_slice) * weight_only
        self._moe_bandwidth = accel.bandwidth_gbs * 1e9 * MOE_MEMORY * speed
        self._expert_hit = arch.experts_per_token / arch.experts if arch.is_moe else 0.0
        expert_active = arch.expert_params * self._expert_hit
        lm_head = arch.vocab * arch.hidden
        self._dense_flops_per_token = 2.0 * (arch.active_params_b * 1e9 - expert_active - 2 * lm_head)
        self._logits_flops = 2.0 * lm_head
        self._expert_flops_per_token = 2.0 * expert_active
        self._flops_per_pair = 4.0 * arch.attention_layers * arch.heads * arch.head_dim
        self._dense_bytes = split["dense"] - lm_head * 2.0  # the input embedding is only gathered
        self._expert_bytes = split["experts"]
        self._kv_per_token = kv_bytes_per_token_per_gpu(dep) * dep.tp * dep.pp
        self._state_bytes = state_bytes_per_seq_per_gpu(dep) * dep.tp * dep.pp
        self._ssm_bytes = ssm_bytes_per_seq_per_gpu(dep) * dep.tp * dep.pp
        self._layers = arch.layers
        self._moe_layers = arch.layers if arch.is_moe else 0
        self._floor = (
            arch.layers * (SMALL_KERNELS_S + (2 if arch.is_moe else 4) * GEMM_FLOOR_S)
            + arch.attention_layers * ATTENTION_FLOOR_S
        )
        self._hidden = arch.hidden
        self._topk = arch.experts_per_token
        self._link = accel.link_gbs * 1e9 * COLLECTIVE_EFFICIENCY
        self._latency = 15e-6 if accel.is_npu else COLLECTIVE_LATENCY_S
        overhead = dep.profile.step_overhead_s
        self._overhead = overhead * 0.8 if dep.performance_mode == "throughput" else overhead
        self._per_token = dep.profile.stream_overhead_s
        self._reasoning_extra = dep.profile.reasoning_stream_factor - 1.0
        self._draft_per_token = 0.0
        if dep.spec_tokens:
            dense_seconds = self._dense_bytes / (dep.tp * self._weight_bandwidth)
            if dep.spec_method in LIGHT_DRAFTS:
                self._draft_per_token = dense_seconds / arch.layers + self._floor / arch.layers
            elif dep.spec_method != "ngram":
                self._draft_per_token = 0.1 * (dense_seconds + self._floor)

    def _collective(self, tokens: int, gpus: int, extra: float) -> float:
        """One ring all-gather or reduce-scatter of ``tokens`` activations over ``gpus`` GPUs, and
        ``extra`` seconds for launching it."""
        return (gpus - 1) / gpus * tokens * self._hidden * 2.0 / self._link + self._latency + extra

    def comm_seconds(self, tokens: int, group_tokens: int = -1) -> float:
        """Communication of one step: ``tokens`` of the busiest attention rank, ``group_tokens`` of
        the whole MoE group (the same without attention data parallelism)."""
        dep = self.dep
        group_tokens = tokens if group_tokens < 0 else group_tokens
        eager = dep.graph_tokens is not None and tokens > dep.graph_tokens
        launch = dep.accel.eager_collective_s if eager else 0.0  # per collective launched eagerly
        seconds = 0.0
        if dep.tp > 1:  # the all-reduce after attention (and after a dense MLP): one launch, two halves
            per_layer = 2 * self._collective(tokens, dep.tp, launch / 2)
            seconds += self._layers * per_layer * (1 if dep.attention_dp > 1 and self._moe_layers else 2)
        if dep.attention_dp > 1 and self._moe_layers:
            if dep.moe_ep > 1:  # all-to-all: each GPU sends its tokens' top-k copies to the experts' owners
                sent = group_tokens / dep.moe_group * self._topk * (dep.moe_ep - 1) / dep.moe_ep
                per_layer = 2 * (sent * self._hidden * 2.0 / self._link + self._latency + launch)
            else:  # tensor-parallel experts: gather the group's tokens, reduce-scatter the results
                per_layer = 2 * self._collective(group_tokens, dep.moe_group, launch)
            seconds += self._moe_layers * per_layer
        return seconds

    def _dense_seconds(self, load: StepLoad) -> float:
        """Attention and the non-expert layers of one attention rank (on its tp GPUs)."""
        if load.tokens <= 0:
            return 0.0
        tp = self.dep.tp
        flops = load.tokens * self._dense_flops_per_token + load.sequences * self._logits_flops
        gemms = max(flops / self._gemm_rate, self._dense_bytes / self._weight_bandwidth)
        attention = max(
            load.pairs * self._flops_per_pair / self._attention_rate,
            (load.kv_read * self._kv_per_token + 2 * load.sequences * self._state_bytes) / self._kv_bandwidth,
        )
        if self.dep.gdn_mixed_chunks and load.decoding < load.sequences:  # the step holds a prefill
            passes = GDN_GATHER_SCATTER_PASSES * load.sequences + GDN_ONE_TOKEN_CHUNK_PASSES * load.decoding
            attention += passes * self._ssm_bytes / self._kv_bandwidth
        return (gemms + attention) / tp + self._floor

    def expert_seconds(self, tokens: int) -> float:
        """The MoE layers for the group's ``tokens`` (on the MoE group's GPUs)."""
        if tokens <= 0 or not self._expert_bytes:
            return 0.0
        touched = self._expert_bytes * (1.0 - (1.0 - self._expert_hit) ** tokens)
        seconds = max(tokens * self._expert_flops_per_token / self._moe_rate, touched / self._moe_bandwidth)
        seconds = seconds / self.dep.moe_group + self._moe_layers * MOE_FLOOR_S
        return seconds * 1.1 if self.dep.moe_ep > 1 else seconds  # expert load imbalance

    def group_step_seconds(self, loads: List[StepLoad]) -> float:
        """Simulated duration of one lockstep step of the replica's attention ranks (before the time
        scale); 0 when no rank has work."""
        busiest = max(loads, key=lambda load: load.tokens)
        if busiest.tokens <= 0:
            return 0.0
        group_tokens = sum(load.tokens for load in loads)
        seconds = max(self._dense_seconds(load) for load in loads) + self.expert_seconds(group_tokens)
        seconds += self.comm_seconds(busiest.tokens, group_tokens)
        if self.dep.spec_tokens and any(load.decoding for load in loads):
            seconds += self.dep.spec_tokens * self._draft_per_token
        # The front end streaming every sequence's tokens works beside the GPU in its own process, so a
        # step lasts as long as the slower of the two; a token through the reasoning parser costs more.
        front = (
            max(load.sequences + load.reasoning * self._reasoning_extra for load in loads) * self._per_token
        )
        return max(seconds + self._overhead, front)

    def step_seconds(
        self, tokens: int, attended_pairs: float, kv_read_tokens: float, sequences: int, decoding: int = 0
    ) -> float:
        """Simulated duration of one step of a single attention rank (before the time scale)."""
        return self.group_step_seconds(
            [StepLoad(tokens, attended_pairs, kv_read_tokens, sequences, decoding)]
        )
