"""What a simulated engine serves: the user's knobs resolved against engine defaults and hardware.

:class:`Knobs` is engine-neutral and filled by each engine shim's argv parser (or by ``sim serve``);
:func:`resolve_deployment` applies the engine's defaults (vLLM's max-num-batched-tokens per GPU class,
SGLang's chunked-prefill size, TensorRT-LLM's max_num_tokens, MindIE's ScheduleConfig…) and rejects
what the real engine rejects, raising :class:`~perflab.sim.failures.EngineFailure`.
"""

from __future__ import annotations

import json
import re
from typing import Dict, List, Optional

from perflab.sim import failures
from perflab.sim.catalog import ModelSpec, resolve_model
from perflab.sim.hardware import Accelerator
from perflab.sim.profiles import PROFILES, SPEC_ACCEPTANCE, EngineProfile

QUANTIZATION_FORMATS = {
    "fp8": "fp8",
    "awq": "int4",
    "awq_marlin": "int4",
    "gptq": "int4",
    "gptq_marlin": "int4",
    "compressed-tensors": None,
    "w8a8": "w8a8",
    "w8a8_int8": "w8a8",
    "w8a8_fp8": "fp8",
    "modelopt": "fp8",
    "bitsandbytes": "int4",
    "fbgemm_fp8": "fp8",
}


# The first vLLM release that runs the decoding sequences of a step with a prefill through the Gated
# DeltaNet recurrent kernel rather than the chunk kernel: 0.23.0's ``gdn_attn.py`` builds chunk
# metadata for the prefills alone (``prefill_query_start_loc``, vLLM PR #44700); 0.22.1's does not, and
# 0.17.1's ``Qwen3NextGatedDeltaNet._forward_core`` sends every non-speculative token of such a step to
# ``chunk_gated_delta_rule`` (read in the PyPI wheels).
VLLM_GDN_SPLIT_RELEASE = (0, 23, 0)


class Knobs:
    """Engine-neutral serving options, as parsed from an engine's argv or config.

    Parallelism: ``tp`` GPUs per attention rank, ``dp`` data-parallel ranks, ``pp`` pipeline stages,
    ``ep`` the expert-parallel size of MoE layers (1 = none). ``dp_attention`` says whether the ``dp``
    ranks run attention separately but share their MoE layers (one MoE group of ``dp × tp`` GPUs,
    vLLM's ``-dp`` on a MoE model, SGLang's ``--enable-dp-attention`` with ``--tp-size`` = ``dp × tp``)
    or are independent replicas; None leaves it to the engine's default (:func:`resolve_deployment`).
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self.served_names: List[str] = []
        self.tp = 1
        self.dp = 1
        self.pp = 1
        self.ep = 1
        self.dp_attention: Optional[bool] = None
        self.quantization: Optional[str] = None
        self.kv_cache_dtype: Optional[str] = None
        self.max_num_batched_tokens: Optional[int] = None
        self.max_num_seqs: Optional[int] = None
        self.max_prefill_seqs: Optional[int] = None
        self.prefix_caching: Optional[bool] = None
        self.chunked_prefill: Optional[bool] = None
        self.spec_method: Optional[str] = None
        self.spec_tokens = 0
        self.performance_mode: Optional[str] = None
        self.max_model_len: Optional[int] = None
        self.mem_fraction: Optional[float] = None
        self.attention_backend: Optional[str] = None
        self.reasoning_parser: Optional[str] = None
        self.enforce_eager = False
        # SGLang's --disaggregation-mode (null, prefill or decode), or the role vLLM's --kv-transfer-config
        # gives (prefill, decode, or both for NixlConnector's kv_both)
        self.disaggregation_mode = "null"
        self.transfer_backend = "mooncake"
        self.bootstrap_port = 8998
        self.api_key = ""
        self.host = "127.0.0.1"
        self.port = 8000


def speculative_from_json(text: str) -> tuple:
    """``(method, num_speculative_tokens)`` from vLLM's ``--speculative-config`` JSON."""
    try:
        config = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"--speculative-config is not valid JSON: {exc}") from exc
    if not isinstance(config, dict):
        raise ValueError("--speculative-config must be a JSON object")
    method = str(config.get("method") or ("draft_model" if config.get("model") else "")).lower()
    tokens = config.get("num_speculative_tokens")
    if not method or not isinstance(tokens, int) or tokens < 1:
        raise ValueError("--speculative-config needs 'method' and a positive 'num_speculative_tokens'")
    return method, tokens


class Deployment:
    """A fully resolved configuration the performance model can cost.

    Layout: ``dp`` independent replicas, each of ``attention_dp × tp × pp`` GPUs. Inside a replica,
    ``attention_dp`` attention ranks (each ``tp`` GPUs, its own batch and KV cache) step in lockstep and
    share the MoE layers, split over the replica's ``attention_dp × tp`` GPUs as ``moe_tp`` (tensor
    parallel) × ``moe_ep`` (expert parallel); ``ep`` is ``moe_ep``. A dense model has
    ``attention_dp = 1``, ``moe_tp = tp``, ``moe_ep = 1``.
    """

    def __init__(self, engine: str, model: ModelSpec, accel: Accelerator, knobs: Knobs) -> None:
        self.engine = engine
        self.profile: EngineProfile = PROFILES[engine]
        self.model = model
        self.accel = accel
        self.knobs = knobs
        self.tp = knobs.tp
        self.dp = knobs.dp
        self.pp = knobs.pp
        self.ep = knobs.ep
        self.attention_dp = 1
        self.moe_tp = knobs.tp
        self.moe_ep = 1
        self.weight_format = model.weight_format
        self.kv_bytes = 2
        self.max_num_batched_tokens = 8192
        self.max_num_seqs = 256
        # Sequences one prefill batch may start (0: no limit) and the tokens it may hold.
        self.max_prefill_seqs = 0
        self.prefill_tokens = 8192
        self.prefix_caching = False
        self.chunked_prefill = True
        self.spec_method = knobs.spec_method
        self.spec_tokens = knobs.spec_tokens
        self.spec_acceptance = SPEC_ACCEPTANCE.get(knobs.spec_method or "", 0.6)
        self.performance_mode = knobs.performance_mode or ""
        self.max_model_len = model.arch.max_position
        self.mem_fraction = 0.9
        self.attention_factor = 1.0
        # The most tokens a step may have and still run as a CUDA graph (0: every step runs eagerly);
        # None where the simulator does not model the engine's graphs.
        self.graph_tokens: Optional[int] = None
        # Whether a step that holds a prefill runs its decoding sequences through the Gated DeltaNet
        # chunk kernel too (vLLM before :data:`VLLM_GDN_SPLIT_RELEASE` on a hybrid model, without
        # speculative decoding, whose decodes take the recurrent kernel; perfmodel).
        self.gdn_mixed_chunks = False

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp * self.attention_dp

    @property
    def moe_group(self) -> int:
        """GPUs one MoE layer is split over (``moe_tp × moe_ep``, per pipeline stage)."""
        return self.moe_tp * self.moe_ep

    @property
    def gpus(self) -> int:
        return self.gpus_per_replica * self.dp

    @property
    def compute_format(self) -> str:
        """Number format of the tensor-core math: fp8 or int8 only where the chip supports it."""
        if self.weight_format == "fp8" and self.accel.supports_fp8:
            return "fp8"
        if self.weight_format == "w8a8" and self.accel.int8_tops:
            return "int8"
        return "bf16"

    @property
    def served_names(self) -> List[str]:
        return self.knobs.served_names or [self.model.model_id]


def vllm_graph_tokens(max_num_seqs: int, spec_tokens: int, enforce_eager: bool) -> int:
    """The largest step vLLM runs as a CUDA graph: by default ``max_cudagraph_capture_size`` =
    min(2 × max_num_seqs × (1 + speculative tokens), 512), 0 with ``--enforce-eager`` (vLLM 0.32,
    ``config/vllm.py``; 1,024 on Blackwell, which the catalogue does not hold). A larger step runs
    eagerly."""
    if enforce_eager:
        return 0
    return min(2 * max_num_seqs * (1 + spec_tokens), 512)


def _apply_engine_defaults(dep: Deployment) -> None:
    knobs = dep.knobs
    accel = dep.accel
    high_end = accel.memory_mib >= 70 * 1024 and accel.key != "A100"
    if dep.engine in ("vllm", "vllm-ascend"):
        dep.max_num_batched_tokens = knobs.max_num_batched_tokens or (8192 if high_end else 2048)
        dep.max_num_seqs = knobs.max_num_seqs or (1024 if high_end else 256)
        dep.prefix_caching = True if knobs.prefix_caching is None else knobs.prefix_caching
        dep.chunked_prefill = True if knobs.chunked_prefill is None else knobs.chunked_prefill
        dep.mem_fraction = knobs.mem_fraction or 0.9
    elif dep.engine == "sglang":
        dep.max_num_batched_tokens = knobs.max_num_batched_tokens or (
            16384 if accel.memory_mib > 100 * 1024 else 8192
        )
        dep.max_num_seqs = knobs.max_num_seqs or 4096
        dep.prefix_caching = True if knobs.prefix_caching is None else knobs.prefix_caching
        dep.chunked_prefill = dep.max_num_batched_tokens > 0
        static = 0.88 if dep.tp < 2 else 0.87 if dep.tp < 4 else 0.85 if dep.tp < 8 else 0.81
        dep.mem_fraction = knobs.mem_fraction or static
    elif dep.engine == "trtllm":
        dep.max_num_batched_tokens = knobs.max_num_batched_tokens or 8192
        dep.max_num_seqs = knobs.max_num_seqs or 2048
        dep.prefix_caching = True if knobs.prefix_caching is None else knobs.prefix_caching
        dep.chunked_prefill = bool(knobs.chunked_prefill)
        dep.mem_fraction = knobs.mem_fraction or 0.9
    else:  # mindie
        dep.max_num_batched_tokens = knobs.max_num_batched_tokens or 8192
        dep.max_num_seqs = knobs.max_num_seqs or 200
        dep.max_prefill_seqs = knobs.max_prefill_seqs or 50
        dep.prefix_caching = bool(knobs.prefix_caching)
        dep.chunked_prefill = bool(knobs.chunked_prefill)
        dep.mem_fraction = knobs.mem_fraction or 0.8
    if knobs.max_model_len:
        dep.max_model_len = knobs.max_model_len
    elif dep.engine == "mindie":
        dep.max_model_len = 2560
    dep.prefill_tokens = dep.max_num_batched_tokens
    if dep.engine == "mindie":
        # MindIE-LLM's Scheduler::Schedule budgets a batch at max(maxSeqLen, maxPrefillTokens) tokens,
        # so any prompt it accepted fits one prefill batch.
        dep.prefill_tokens = max(dep.max_model_len, dep.max_num_batched_tokens)


def _apply_layout(dep: Deployment) -> None:
    """Attention data parallelism and the MoE split, as each engine reads its parallel flags.

    vLLM (0.11–0.33 ``ParallelConfig``; docs "Data Parallel Deployment"): on a MoE model the ``-dp``
    ranks form one group whose expert layers are tensor parallel over ``dp × tp`` GPUs, or expert
    parallel with ``--enable-expert-parallel``; on a dense model they are independent replicas.
    SGLang and TensorRT-LLM share MoE layers across DP ranks only with DP attention
    (``--enable-dp-attention``, ``enable_attention_dp``); MindIE's ``dp`` ranks likewise.
    """
    knobs, arch = dep.knobs, dep.model.arch
    shared = knobs.dp_attention
    if shared is None:
        shared = dep.engine in ("vllm", "vllm-ascend") and arch.is_moe and knobs.dp > 1
    if shared and arch.is_moe:
        dep.attention_dp, dep.dp = knobs.dp, 1
    group = dep.attention_dp * dep.tp
    if not arch.is_moe:
        dep.moe_tp, dep.moe_ep, dep.ep = dep.tp, 1, 1
        return
    ep = max(1, knobs.ep)
    if group % ep:
        raise failures.layout_invalid(
            dep.engine, f"expert parallel size {ep} does not divide the MoE group of {group} GPUs"
        )
    dep.moe_ep, dep.moe_tp, dep.ep = ep, group // ep, ep


def _apply_quantization(dep: Deployment) -> None:
    method = dep.knobs.quantization
    if method:
        mapped = QUANTIZATION_FORMATS.get(method.lower())
        if mapped is not None and dep.weight_format == "bf16":
            dep.weight_format = mapped
    kv = (dep.knobs.kv_cache_dtype or "auto").lower()
    dep.kv_bytes = 1 if kv.startswith("fp8") or kv == "int8" else 2


def _check_quantization(dep: Deployment) -> None:
    engine, accel, arch = dep.engine, dep.accel, dep.model.arch
    fp8_on_sm80 = dep.weight_format == "fp8" and not accel.supports_fp8 and not accel.is_npu
    if fp8_on_sm80 and engine in ("sglang", "trtllm"):
        raise failures.fp8_unsupported(engine)
    if engine == "trtllm" and dep.weight_format == "int4" and accel.sm_version == 80:
        raise failures.trtllm_awq_on_sm80()
    if dep.weight_format == "fp8" and arch.is_moe and engine in ("vllm", "sglang"):
        shard = arch.moe_intermediate // dep.moe_tp
        if shard % 128:
            raise failures.fp8_block_not_divisible(engine, shard)


def release_numbers(version: str) -> tuple[int, ...]:
    """The numeric release of an engine version string: ``v0.17.1`` and ``0.17.1+cpu`` → (0, 17, 1);
    () when it names none (``nightly``)."""
    return tuple(int(part) for part in re.findall(r"\d+", version.lstrip("v").split("+", 1)[0])[:3])


def resolve_deployment(
    engine: str, knobs: Knobs, accel: Accelerator, version: Optional[str] = None
) -> Deployment:
    """Resolve ``knobs`` for ``engine`` at ``version`` (None: the simulated engine's own) on ``accel``;
    raises EngineFailure like the real engine would."""
    model = resolve_model(knobs.model)
    if model is None:
        raise failures.model_not_found(engine, knobs.model)
    dep = Deployment(engine, model, accel, knobs)
    _apply_engine_defaults(dep)
    _apply_layout(dep)
    _apply_quantization(dep)
    _check_quantization(dep)
    if engine == "mindie" and dep.prefix_caching and model.arch.is_moe:
        raise failures.prefix_cache_on_moe(model.arch.architecture)
    backend = knobs.attention_backend
    if backend and engine in ("vllm", "vllm-ascend"):
        backend = None if backend.lower() == "auto" else backend.upper()
    try:
        dep.attention_factor = dep.profile.backend_factor(backend, accel.sm_version)
    except KeyError:
        raise failures.unknown_attention_backend(engine, backend or "", dep.profile.backend_names()) from None
    except ValueError:
        raise failures.backend_rejects_device(engine, backend or "", dep.profile.backend_names()) from None
    if dep.performance_mode == "throughput":
        dep.attention_factor *= 1.03
    if not dep.spec_method:
        dep.spec_tokens = 0
    if engine == "vllm":
        dep.graph_tokens = vllm_graph_tokens(dep.max_num_seqs, dep.spec_tokens, knobs.enforce_eager)
        release = release_numbers(version or dep.profile.version)
        old_release = () < release < VLLM_GDN_SPLIT_RELEASE  # (): a build named without one, the newest
        dep.gdn_mixed_chunks = bool(model.arch.state_elements) and not dep.spec_tokens and old_release
    return dep


def describe(dep: Deployment) -> Dict[str, object]:
    """A summary of the resolved deployment (printed by ``sim serve`` at start-up)."""
    return {
        "engine": dep.engine,
        "model": dep.model.model_id,
        "accelerator": dep.accel.key,
        "tp": dep.tp,
        "dp": dep.dp,
        "attention_dp": dep.attention_dp,
        "moe_tp": dep.moe_tp,
        "moe_ep": dep.moe_ep,
        "weights": dep.weight_format,
        "compute": dep.compute_format,
        "kv_cache_bytes": dep.kv_bytes,
        "max_num_batched_tokens": dep.max_num_batched_tokens,
        "max_num_seqs": dep.max_num_seqs,
        "prefix_caching": dep.prefix_caching,
        "chunked_prefill": dep.chunked_prefill,
        "max_model_len": dep.max_model_len,
        "speculative": f"{dep.spec_method}x{dep.spec_tokens}" if dep.spec_tokens else None,
    }
