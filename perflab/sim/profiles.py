"""Per-engine behaviour of the performance model.

Each :class:`EngineProfile` holds what differs between engines on the same hardware: a kernel
efficiency factor, the host cost of one engine step, the front end's streaming cost per sequence and
set-up cost per new request, the KV block size, how the scheduler composes steps (mixed, or prefill
batches first) and what output room it reserves at admission, the attention backends it accepts (with
their speed factors, and the SM versions they need). Sources and fits are in ``docs/simulator.md``:
SGLang's prefill-first scheduling and ``new_token_ratio`` reservation follow SGLang 0.5.23's scheduler
and environment defaults, TensorRT-LLM's full reservation its ``GUARANTEED_NO_EVICT`` capacity policy;
vLLM's front-end costs were fitted on seeds 001 and 003 (its reasoning parser's share measured on the
real vLLM CPU build, ``benchmarks/real_vllm_front_end.py``), SGLang's efficiency on seed 003 and
vLLM-Ascend's efficiency and step cost and MindIE's step cost on seed 004
(``benchmarks/sim_vs_seeds.py``).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

# Attention backend → (speed factor, minimum SM version, maximum SM version); 0 = no bound.
# vLLM's names are AttentionBackendEnum members (vLLM 0.32); the shim upper-cases the value as vLLM does.
_VLLM_BACKENDS = {
    "FLASH_ATTN": (1.0, 80, 0),
    "FLASHINFER": (1.0, 80, 0),
    "TRITON_ATTN": (0.93, 0, 0),
    "FLEX_ATTENTION": (0.85, 0, 0),
}
# vLLM 0.32 AttentionBackendEnum names the simulator does not model: vLLM knows them, and on the
# simulated GPUs it refuses them as not valid for the configuration (ROCm, XPU, CPU, MLA-only, …).
_VLLM_OTHER_BACKENDS = tuple(
    [
        "FLASH_ATTN_DIFFKV",
        "TRITON_ATTN_DIFFKV",
        "TRITON_FLASH_ATTN",
        "ROCM_ATTN",
        "ROCM_SEGMENTED_ATTN",
        "ROCM_AITER_MLA",
        "ROCM_AITER_TRITON_MLA",
        "ROCM_AITER_FA",
        "ROCM_AITER_MLA_SPARSE",
        "XPU_MLA_SPARSE",
        "TORCH_SDPA",
        "TRITON_FLASHINFER",
        "FLASHINFER_MLA",
        "TOKENSPEED_MLA",
        "FLASHINFER_MLA_SPARSE",
        "FLASHINFER_MLA_SPARSE_SM120",
        "FLASHINFER_MLA_SPARSE_SM90",
        "TRITON_MLA",
        "CUTLASS_MLA",
        "FLASHMLA",
        "FLASHMLA_SPARSE",
        "FLASHMLA_SPARSE_DSV4",
        "FLASHINFER_MLA_SPARSE_DSV4",
        "ROCM_FLASHMLA_SPARSE_DSV4",
        "FLASHMLA_SPARSE_DSV41",
        "FLASHINFER_MLA_SPARSE_DSV41",
        "FLASHMLA_MEGA_ATTN_DSV41",
        "B12X",
        "FLASH_ATTN_MLA",
        "FLASH_ATTN_MLA_SPARSE",
        "MINIMAX_M3_SPARSE",
        "CUTLASS_MSA",
        "TRITON_MSA",
        "NO_ATTENTION",
        "HPC_ATTN",
        "ROCM_AITER_UNIFIED_ATTN",
        "CPU_ATTN",
        "CPU_MLA",
        "AMX_MLA",
        "TURBOQUANT",
        "ULTRAQUANT",
    ]
)
_SGLANG_BACKENDS = {
    "fa3": (1.0, 80, 90),
    "flashinfer": (0.98, 0, 0),
    "triton": (0.94, 0, 0),
    "torch_native": (0.5, 0, 0),
    "flex_attention": (0.85, 0, 0),
    "ascend": (1.0, 0, 0),
    "trtllm_mha": (1.02, 100, 0),
    "fa4": (1.03, 100, 0),
}
_TRTLLM_BACKENDS = {"TRTLLM": (1.0, 0, 0), "FLASHINFER": (0.97, 0, 0), "VANILLA": (0.7, 0, 0)}


class EngineProfile:
    """Calibration of one engine."""

    def __init__(
        self,
        name: str,
        efficiency: float,
        step_overhead_ms: float,
        stream_overhead_us: float,
        block_size: int,
        backends: Dict[str, Tuple[float, int, int]],
        version: str,
        unmodelled_backends: Tuple[str, ...] = (),
        output_reserve: Tuple[float, float, int] = (0.0, 0.0, 1),
        prefill_first: bool = False,
        decode_batch_cap: bool = False,
        prefill_reserve: float = 0.0,
        ingress_ms: float = 0.0,
        reasoning_stream_factor: float = 1.0,
    ) -> None:
        self.name = name
        self.efficiency = efficiency
        self.step_overhead_s = step_overhead_ms / 1000.0
        # Front-end time per sequence and step (detokenizing and streaming its token).
        self.stream_overhead_s = stream_overhead_us / 1e6
        # That time for a chat token the server's reasoning parser reads, relative to a plain chat
        # token's (1.0 where no measurement says otherwise).
        self.reasoning_stream_factor = reasoning_stream_factor
        # API front-end time of a new request (parsing, chat template, tokenization, hand-over to the
        # scheduler), shared by the requests it holds (perflab.sim.ingress).
        self.ingress_s = ingress_ms / 1000.0
        self.block_size = block_size
        self.backends = backends
        self.version = version
        self.unmodelled_backends = unmodelled_backends
        # Share of each running and admitted sequence's remaining output an admission must leave room
        # for: (initial, floor, steps to decay from one to the other).
        self.output_reserve, self.output_reserve_floor, self.output_reserve_steps = output_reserve
        # Prefill batches run alone, before any decode step, whenever a prompt can be admitted.
        self.prefill_first = prefill_first
        # ``max_num_seqs`` bounds each decode batch (the first that many running sequences), not how
        # many sequences hold KV memory; admission is bounded by the blocks alone (MindIE's maxBatchSize).
        self.decode_batch_cap = decode_batch_cap
        # Share of the KV blocks that must be free for a prefill batch to start (MindIE keeps 5 % for
        # the running sequences' decode).
        self.prefill_reserve = prefill_reserve

    def backend_names(self) -> List[str]:
        """Every attention backend name the engine knows, modelled or not."""
        return [*self.backends, *self.unmodelled_backends]

    def backend_factor(self, backend: Optional[str], sm_version: int) -> float:
        """Speed factor of an attention backend.

        Raises KeyError when this engine has no such backend, ValueError when the GPU's SM version is
        outside the backend's range.
        """
        if not backend or not self.backends:
            return 1.0
        if backend in self.unmodelled_backends:
            raise ValueError(backend)
        if backend not in self.backends:
            raise KeyError(backend)
        factor, min_sm, max_sm = self.backends[backend]
        if (min_sm and sm_version < min_sm) or (max_sm and sm_version > max_sm):
            raise ValueError(backend)
        return factor


# vLLM's API server spends this many times a chat token's CPU on one its reasoning parser reads
# (benchmarks/real_vllm_front_end.py: the real vLLM 0.32 CPU build, --reasoning-parser qwen3 against none);
# vLLM-Ascend serves through the same API server.
VLLM_REASONING_STREAM_FACTOR = 1.39

PROFILES: Dict[str, EngineProfile] = {
    "vllm": EngineProfile(
        "vllm",
        1.0,
        0.5,
        80.0,
        16,
        _VLLM_BACKENDS,
        "0.11.0",
        _VLLM_OTHER_BACKENDS,
        ingress_ms=13.0,
        reasoning_stream_factor=VLLM_REASONING_STREAM_FACTOR,
    ),
    "sglang": EngineProfile(
        "sglang",
        1.2,
        2.5,
        6.0,
        16,
        _SGLANG_BACKENDS,
        "0.5.5.post1",
        output_reserve=(0.7, 0.098, 600),
        prefill_first=True,
    ),
    "trtllm": EngineProfile(
        "trtllm",
        1.08,
        2.0,
        5.0,
        32,
        _TRTLLM_BACKENDS,
        "1.0.0",
        output_reserve=(1.0, 1.0, 1),
    ),
    "mindie": EngineProfile(
        "mindie",
        1.0,
        13.0,
        10.0,
        128,
        {},
        "2.1.RC1",
        prefill_first=True,
        decode_batch_cap=True,
        prefill_reserve=0.05,
    ),
    "vllm-ascend": EngineProfile(
        "vllm-ascend",
        0.35,
        110.0,
        15.0,
        128,
        {},
        "0.11.0rc0",
        ingress_ms=13.0,
        reasoning_stream_factor=VLLM_REASONING_STREAM_FACTOR,
    ),
}

# Speculative methods → default per-token acceptance rate of the drafts.
SPEC_ACCEPTANCE = {
    "mtp": 0.75,
    "nextn": 0.75,
    "deepseek_mtp": 0.75,
    "qwen3_next_mtp": 0.75,
    "eagle3": 0.7,
    "eagle": 0.65,
    "ngram": 0.35,
    "draft_model": 0.6,
    "medusa": 0.6,
    "standalone": 0.6,
}
# Speculative methods whose draft is a single extra layer (cheap to run).
LIGHT_DRAFTS = ("mtp", "nextn", "deepseek_mtp", "qwen3_next_mtp", "eagle", "eagle3")
