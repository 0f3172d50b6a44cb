"""One configuration of a study as a prediction case: what AIConfigurator is asked, or why it cannot be.

A :class:`Case` is the serving point both predictors model: one engine replica (``tp`` accelerators, or
``tp × dp`` with attention data-parallel for an MoE model) of a model on one accelerator type, serving
``batch`` requests at a time of ``isl`` prompt and ``osl`` output tokens, with at most ``ctx_tokens``
tokens per scheduler step. Its batch is the tuning profile's concurrency per replica (its
``max_concurrency``, else all its prompts at once, split among the replicas), capped by the engine's
``max_num_seqs``; the engine's effective limits (its defaults where the configuration sets none) come
from perflab's simulator, which resolves a configuration as the engine would
(:func:`sim_deployment`), so both predictors see the same limits. The simulator resolves it at the
hosts' engine version where the study knows one (:attr:`Case.engine_version`: a vLLM before 0.23 runs
a hybrid model's mixed steps another way), else at its simulated engine's own version.

:func:`case_of` raises :class:`NotCovered` with a one-line reason where AIConfigurator has nothing to
say: an engine it has no tables for (MindIE, vLLM-Ascend; TensorRT-LLM is not mapped by perflab yet),
an accelerator it has no tables for (Ascend NPUs, …), a workload it does not model (lengths that are
not fixed, a swept or rate-limited load), knobs it cannot express (speculative decoding, a weight
quantization set by flag, a KV-cache dtype other than fp8). Knobs it does not model but that leave
the case meaningful (attention backend, prefix caching, chunked prefill, memory fraction, extra flags)
are listed in :attr:`Case.ignored`.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass

from perflab.engines import EngineConfig, get_adapter
from perflab.profiles import BenchmarkProfile
from perflab.sim.deployment import Deployment, resolve_deployment
from perflab.sim.engines import sglang as sim_sglang
from perflab.sim.engines import vllm as sim_vllm
from perflab.sim.failures import EngineFailure
from perflab.sim.hardware import ACCELERATORS, Accelerator, find_accelerator

# perflab's engines → AIConfigurator's backends (its ``--backend``).
BACKENDS = {"vllm": "vllm", "sglang": "sglang"}
# perflab's accelerators (perflab.sim.hardware keys) → AIConfigurator's systems (``--system``).
SYSTEMS = {"A100": "a100_sxm", "H100": "h100_sxm", "H200": "h200_sxm", "L40S": "l40s"}
ENGINE_TITLES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM", "mindie": "MindIE"}
FP8_KV_CACHE = ("fp8", "fp8_e4m3")
# Knobs that change what AIConfigurator would predict but that it has no argument for.
IGNORED_KNOBS = (
    "attention_backend",
    "enable_prefix_caching",
    "enable_chunked_prefill",
    "performance_mode",
    "gpu_memory_utilization",
    "max_model_len",
)


class NotCovered(Exception):
    """AIConfigurator does not cover this case; the message says why, in one line."""


@dataclass(frozen=True)
class Case:
    """What one prediction is asked (see the module)."""

    model: str
    engine: str
    system: str
    accelerator: str
    isl: int
    osl: int
    batch: int
    ctx_tokens: int
    tp: int
    attention_dp: int
    moe_tp: int | None
    moe_ep: int | None
    kv_fp8: bool
    gpus: int  # the configuration's accelerators (every replica)
    prompts: int  # the tuning profile's prompts on one replica (perflab's simulator sends them all)
    ignored: tuple[str, ...] = ()
    engine_version: str | None = None  # the hosts' release of the engine, where the study knows it

    @property
    def backend(self) -> str:
        return BACKENDS[self.engine]

    @property
    def replica_gpus(self) -> int:
        return self.tp * self.attention_dp

    def key(self) -> str:
        """A digest of everything a prediction depends on (the cache key of its result)."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:24]


def accelerator_of(name: str) -> Accelerator | None:
    """perflab's accelerator called ``name``: a key or alias (``H200``), or the name ``nvidia-smi`` gives
    (``NVIDIA H200``, as a probed host's study stores it)."""
    found = find_accelerator(name)
    if found is None:
        found = next(
            (chip for chip in ACCELERATORS.values() if chip.name.lower() == name.strip().lower()), None
        )
    return found


def sim_deployment(config: EngineConfig, accelerator: str, version: str | None = None) -> Deployment:
    """``config`` as perflab's simulator resolves it on ``accelerator`` at the engine's ``version`` (None:
    the simulated engine's own): the engine's own argv read by the simulated engine's parser (vLLM,
    SGLang), then its defaults; raises :class:`NotCovered` for another
    engine and :class:`~perflab.sim.failures.EngineFailure` where the engine would refuse it."""
    chip = accelerator_of(accelerator)
    if chip is None:
        raise NotCovered(f"perflab's simulator does not know the accelerator {accelerator!r}")
    adapter = get_adapter(config.engine)
    try:
        argv = adapter.serve_argv(config, port=8000)[len(adapter.program) :]
    except ValueError as error:
        raise NotCovered(f"the configuration cannot be built: {error}") from None
    if config.engine == "vllm":
        knobs = sim_vllm.knobs_from_args(sim_vllm.build_parser().parse_args(sim_vllm.normalize_options(argv)))
    elif config.engine == "sglang":
        knobs = sim_sglang.knobs_from_args(sim_sglang.build_parser().parse_args(argv))
    else:
        raise NotCovered(f"perflab does not predict {ENGINE_TITLES.get(config.engine, config.engine)} yet")
    return resolve_deployment(config.engine, knobs, chip, version)


def check_workload(profile: BenchmarkProfile) -> None:
    """Raises :class:`NotCovered` for a tuning profile AIConfigurator does not model."""
    if profile.dataset != "random":
        raise NotCovered(
            f"the tuning profile's prompts are {profile.dataset} (lengths vary); AIConfigurator predicts "
            "fixed input and output lengths"
        )
    if profile.sweep is not None:
        raise NotCovered("the tuning profile sweeps its load; AIConfigurator predicts one concurrency")
    if math.isfinite(profile.request_rate) and profile.max_concurrency is None:
        raise NotCovered(
            f"the tuning profile sends {profile.request_rate:g} requests/s; AIConfigurator predicts a fixed "
            "concurrency (set max_concurrency, or send all at once)"
        )


def case_of(
    config: EngineConfig,
    accelerator: str | None,
    profile: BenchmarkProfile,
    engine_version: str | None = None,
) -> Case:
    """The prediction case of ``config`` on ``accelerator`` under the tuning ``profile``, on hosts whose
    engine is at ``engine_version`` (None where not known); raises
    :class:`NotCovered` (see the module)."""
    engine_title = ENGINE_TITLES.get(config.engine, config.engine)
    if config.engine not in BACKENDS:
        raise NotCovered(
            f"AIConfigurator has no tables for {engine_title} (only vLLM and SGLang are predicted)"
        )
    if not accelerator:
        raise NotCovered("the study's accelerator is not known")
    chip = accelerator_of(accelerator)
    if chip is not None and chip.is_npu:
        raise NotCovered(f"AIConfigurator has no tables for Ascend NPUs ({accelerator})")
    system = SYSTEMS.get(chip.key) if chip is not None else None
    if system is None:
        raise NotCovered(f"AIConfigurator has no tables for {accelerator}")
    check_workload(profile)
    if config.speculative_config:
        raise NotCovered("speculative decoding is not predicted")
    if config.quantization:
        raise NotCovered(f"a weight quantization set by flag ({config.quantization}) is not predicted")
    kv = (config.kv_cache_dtype or "auto").lower()
    if kv not in ("auto", *FP8_KV_CACHE):
        raise NotCovered(f"KV-cache dtype {config.kv_cache_dtype} is not predicted")
    try:
        deployment = sim_deployment(config, accelerator, engine_version)
    except EngineFailure as failure:
        raise NotCovered(
            f"perflab cannot resolve the engine's limits: {str(failure).splitlines()[0]}"
        ) from None
    input_len, output_len = int(profile.input_len or 0), int(profile.output_len or 0)
    replicas = config.replicas
    clients = profile.max_concurrency or profile.num_prompts
    per_rank = max(1, math.ceil(clients / (replicas * config.dp)))
    moe = deployment.model.arch.is_moe
    group = config.tp * config.dp
    ignored = tuple(knob for knob in IGNORED_KNOBS if getattr(config, knob) is not None)
    if config.extra_args:
        ignored += ("extra_args",)
    return Case(
        model=config.model,
        engine=config.engine,
        system=system,
        accelerator=chip.key,
        isl=input_len + profile.prefix_len,
        osl=output_len,
        batch=min(per_rank, deployment.max_num_seqs),
        ctx_tokens=deployment.max_num_batched_tokens,
        tp=config.tp,
        attention_dp=config.dp if moe else 1,
        moe_tp=(1 if config.ep > 1 else group) if moe else None,
        moe_ep=(group if config.ep > 1 else 1) if moe else None,
        kv_fp8=kv in FP8_KV_CACHE,
        gpus=config.gpus_needed,
        prompts=max(1, math.ceil(profile.num_prompts / replicas)),
        ignored=ignored,
        engine_version=engine_version,
    )
