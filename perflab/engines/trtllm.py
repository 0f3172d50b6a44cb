"""TensorRT-LLM (``trtllm-serve MODEL``, PyTorch backend; the 1.3.0 release candidates' source, see
:mod:`perflab.engines.tables.trtllm`).

Command-line flags follow ``tensorrt_llm/commands/serve.py`` (click, underscore names): ``--tp_size``,
``--ep_size``, ``--max_batch_size``, ``--max_num_tokens``, ``--max_seq_len``, ``--enable_chunked_prefill``,
``--reasoning_parser``, ``--served_model_name`` (1.3.0rc, NVIDIA/TensorRT-LLM#11711) and
``--extra_llm_api_options FILE`` (a YAML of LLM API arguments that overrides the flags). Knobs without a
flag go into that YAML, which :meth:`TrtllmAdapter.files` writes: ``attn_backend`` (TRTLLM, FLASHINFER,
VANILLA, FLASHINFER_STAR_ATTENTION), ``kv_cache_config.enable_block_reuse`` (prefix caching),
``kv_cache_config.dtype`` (fp8) and
``speculative_config`` (``decoding_type: MTP`` or ``NGram`` with ``max_draft_len``; MTP's older
``num_nextn_predict_layers`` is deprecated for ``max_draft_len``).

The YAML always carries ``return_perf_metrics: true`` and ``enable_iter_perf_stats: true`` at launch: with
them trtllm-serve publishes Prometheus gauges on ``/prometheus/metrics`` (``tensorrt_llm/metrics/
collector.py``: ``trtllm_num_requests_running``, ``trtllm_num_requests_waiting``,
``trtllm_kv_cache_utilization``, a fraction). Like SGLang's ``--enable-metrics`` this plumbing is not part
of the display command, which names the file only when a knob needs it.

Quantization is read from the checkpoint (pick a quantized model id such as ``Qwen/Qwen3-32B-FP8``), there
is no data-parallel flag (attention DP is a different feature; use replicas), and
``--kv_cache_free_gpu_memory_fraction`` is a share of the memory left after loading weights rather than
of the whole device, so ``gpu_memory_utilization`` is refused instead of being mistranslated. Default port
8000, ``GET /health``; readiness is uvicorn's "Application startup complete.".
"""

from __future__ import annotations

from typing import Any

import yaml

from perflab.engines.base import EngineAdapter, EngineMetrics
from perflab.engines.config import EngineConfig
from perflab.engines.errors import InvalidKnobValue
from perflab.engines.failures import COMMON_SIGNATURES, Signature
from perflab.engines.flags import Flag, FlagTable, parse_int
from perflab.engines.tables.trtllm import TRTLLM_RELEASES
from perflab.engines.vllm import VLLM_FLAGS

EXTRA_OPTIONS_FILE = "extra_llm_api_options.yaml"
EXTRA_OPTIONS_FLAG = "--extra_llm_api_options"
# LLM API arguments perflab adds at launch so /prometheus/metrics carries the queue and KV gauges.
METRICS_OPTIONS = {"return_perf_metrics": True, "enable_iter_perf_stats": True}

TRTLLM_FLAGS = FlagTable(
    (
        Flag("tp", "--tp_size", aliases=("--tensor_parallel_size",), convert=parse_int),
        Flag("ep", "--ep_size", aliases=("--moe_expert_parallel_size",), convert=parse_int),
        Flag("max_num_batched_tokens", "--max_num_tokens", convert=parse_int),
        Flag("max_num_seqs", "--max_batch_size", convert=parse_int),
        Flag("enable_chunked_prefill", "--enable_chunked_prefill", kind="switch"),
        Flag("max_model_len", "--max_seq_len", convert=parse_int),
        Flag("reasoning_parser", "--reasoning_parser"),
        Flag("served_model_name", "--served_model_name"),
    )
)


class TrtllmAdapter(EngineAdapter):
    name = "trtllm"
    display_name = "TensorRT-LLM"
    default_port = 8000
    health_path = "/health"
    visible_devices_env = "CUDA_VISIBLE_DEVICES"
    metrics = EngineMetrics(
        running="trtllm_num_requests_running",
        waiting="trtllm_num_requests_waiting",
        kv_cache_usage="trtllm_kv_cache_utilization",
        path="/prometheus/metrics",
    )
    program = ("trtllm-serve",)
    help_argv = ("trtllm-serve", "serve", "--help")
    flags = TRTLLM_FLAGS
    file_knobs = frozenset(
        {"attention_backend", "enable_prefix_caching", "kv_cache_dtype", "speculative_config"}
    )
    unsupported = {
        "dp": "run replicas for data parallelism instead",
        "quantization": "it reads quantization from the checkpoint: pick a quantized model id such as "
        "Qwen/Qwen3-32B-FP8",
        "performance_mode": "tune max_num_seqs and max_num_batched_tokens instead",
        "gpu_memory_utilization": "its --kv_cache_free_gpu_memory_fraction is a share of the memory left "
        "after the weights, not of the device; pass that flag in extra_args if you need it",
    }
    lookalike_flags = VLLM_FLAGS
    releases = TRTLLM_RELEASES
    vocabulary = TRTLLM_RELEASES.any_release()
    bare_switches = ("--trust_remote_code", "--fail_fast_on_attention_window_too_large")
    ready_markers = ("Application startup complete",)
    # TensorRT-LLM (_torch/pyexecutor/_util.py) has no start-up check of memory held by other processes:
    # it sizes its KV cache from the memory left free, so memory taken by others shows as its OOM.
    signatures = (
        *COMMON_SIGNATURES,
        Signature.of("unknown_argument", r"Error: (?:No such option|Invalid value for|Missing argument)"),
        Signature.of("oom", r"insufficient (?:GPU )?memory", ignore_case=True),
    )

    def file_flags(self) -> tuple[str, ...]:
        return (EXTRA_OPTIONS_FLAG,)

    def check_values(self, config: EngineConfig) -> None:
        if config.tp % config.ep:
            raise InvalidKnobValue(
                self.display_name, "ep", f"({config.ep}) must divide tp ({config.tp}): MoE TP × EP = TP"
            )
        if config.speculative_config is not None:
            self._speculative_options(config)

    def extra_options(self, config: EngineConfig) -> dict[str, Any]:
        """The LLM API arguments that have no trtllm-serve flag, as written to the YAML file."""
        options: dict[str, Any] = {}
        if config.attention_backend is not None:
            options["attn_backend"] = config.attention_backend.upper()
        kv_cache: dict[str, Any] = {}
        if config.enable_prefix_caching is not None:
            kv_cache["enable_block_reuse"] = config.enable_prefix_caching
        if config.kv_cache_dtype is not None:
            kv_cache["dtype"] = config.kv_cache_dtype
        if kv_cache:
            options["kv_cache_config"] = kv_cache
        if config.speculative_config is not None:
            options["speculative_config"] = self._speculative_options(config)
        return options

    def _speculative_options(self, config: EngineConfig) -> dict[str, Any]:
        request = self.speculative_request(config, frozenset({"prompt_lookup_max"}))
        self.check_word("speculative_config", request.method)
        decoding_type = "MTP" if request.method == "mtp" else "NGram"
        options: dict[str, Any] = {"decoding_type": decoding_type, "max_draft_len": request.num_tokens}
        if "prompt_lookup_max" in request.extra:
            options["max_matching_ngram_size"] = request.extra["prompt_lookup_max"]
        return options

    def file_args(self, config: EngineConfig) -> list[str]:
        return [EXTRA_OPTIONS_FLAG, EXTRA_OPTIONS_FILE] if self.extra_options(config) else []

    def launch_file_args(self, config: EngineConfig) -> list[str]:
        return [EXTRA_OPTIONS_FLAG, EXTRA_OPTIONS_FILE]

    def files(
        self, config: EngineConfig, *, port: int, host: str = "127.0.0.1", engine_version: str | None = None
    ) -> dict[str, str]:
        self.validate(config)
        options = {**self.extra_options(config), **METRICS_OPTIONS}
        return {EXTRA_OPTIONS_FILE: yaml.safe_dump(options, sort_keys=False)}
