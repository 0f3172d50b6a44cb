"""``trtllm-serve`` on a simulated host, as TensorRT-LLM's click command parses and logs it.

``trtllm-serve [serve] MODEL [OPTIONS]`` with the real option names (``--tp_size``, ``--ep_size``,
``--pp_size``, ``--max_num_tokens``, ``--max_batch_size``, ``--max_seq_len``,
``--kv_cache_free_gpu_memory_fraction``, ``--backend``, ``--host``, ``--port``,
``--enable_chunked_prefill``, ``--extra_llm_api_options FILE`` …), ``--opt value`` or ``--opt=value``.
Unknown options fail as click fails (``Error: No such option: --x``, exit 2); ``--help`` lists the
options in click's layout. The YAML options file
may set ``kv_cache_config`` (``enable_block_reuse``, ``dtype``, ``free_gpu_memory_fraction``),
``enable_chunked_prefill``, ``max_batch_size``, ``max_num_tokens``, ``max_seq_len``, ``attn_backend``,
``speculative_config`` (``decoding_type``, ``max_draft_len`` / the deprecated ``num_nextn_predict_layers``)
and a few more; unknown keys fail like TensorRT-LLM's pydantic validation. ``--served_model_name`` (1.3)
names the served model. Prometheus gauges on ``/prometheus/metrics`` need ``return_perf_metrics: true``
in that file, as in TensorRT-LLM. The readiness line is uvicorn's ``Application startup complete.``
"""

from __future__ import annotations

import sys
import time
from typing import Dict, List, Optional, Tuple

from perflab.sim import yamlish
from perflab.sim.deployment import Deployment, Knobs
from perflab.sim.engines.launch import EngineLog, Launch, host_or_none, run_engine
from perflab.sim.perfmodel import MemoryPlan
from perflab.sim.server import Console

GIB = 1024**3
USAGE = "Usage: trtllm-serve serve [OPTIONS] MODEL\nTry 'trtllm-serve serve --help' for help.\n"
# option → (destination, type); type is "str", "int", "float", "flag" or a tuple of choices.
OPTIONS: Dict[str, Tuple[str, object]] = {
    "--tokenizer": ("tokenizer", "str"),
    "--custom_tokenizer": ("custom_tokenizer", "str"),
    "--host": ("host", "str"),
    "--port": ("port", "int"),
    "--backend": ("backend", ("pytorch", "tensorrt", "trt", "_autodeploy")),
    "--custom_module_dirs": ("custom_module_dirs", "str"),
    "--log_level": ("log_level", ("internal_error", "error", "warning", "info", "verbose", "debug", "trace")),
    "--max_beam_width": ("max_beam_width", "int"),
    "--max_batch_size": ("max_batch_size", "int"),
    "--max_num_tokens": ("max_num_tokens", "int"),
    "--max_seq_len": ("max_seq_len", "int"),
    "--tensor_parallel_size": ("tp_size", "int"),
    "--tp_size": ("tp_size", "int"),
    "--pipeline_parallel_size": ("pp_size", "int"),
    "--pp_size": ("pp_size", "int"),
    "--context_parallel_size": ("cp_size", "int"),
    "--cp_size": ("cp_size", "int"),
    "--moe_expert_parallel_size": ("ep_size", "int"),
    "--ep_size": ("ep_size", "int"),
    "--moe_cluster_parallel_size": ("cluster_size", "int"),
    "--cluster_size": ("cluster_size", "int"),
    "--gpus_per_node": ("gpus_per_node", "int"),
    "--free_gpu_memory_fraction": ("kv_fraction", "float"),
    "--kv_cache_free_gpu_memory_fraction": ("kv_fraction", "float"),
    "--num_postprocess_workers": ("num_postprocess_workers", "int"),
    "--trust_remote_code": ("trust_remote_code", "flag"),
    "--revision": ("revision", "str"),
    "--config": ("extra_llm_api_options", "str"),
    "--extra_llm_api_options": ("extra_llm_api_options", "str"),
    "--reasoning_parser": ("reasoning_parser", ("deepseek-r1", "qwen3")),
    "--tool_parser": ("tool_parser", "str"),
    "--metadata_server_config_file": ("metadata_server_config_file", "str"),
    "--server_role": ("server_role", "str"),
    "--fail_fast_on_attention_window_too_large": ("fail_fast", "flag"),
    "--otlp_traces_endpoint": ("otlp_traces_endpoint", "str"),
    "--disagg_cluster_uri": ("disagg_cluster_uri", "str"),
    "--enable_chunked_prefill": ("enable_chunked_prefill", "flag"),
    "--media_io_kwargs": ("media_io_kwargs", "str"),
    "--chat_template": ("chat_template", "str"),
    "--served_model_name": ("served_model_name", "str"),
}
DEFAULTS: Dict[str, object] = {
    "host": "localhost",
    "port": 8000,
    "backend": "pytorch",
    "max_batch_size": 2048,
    "max_num_tokens": 8192,
    "max_seq_len": None,
    "tp_size": 1,
    "pp_size": 1,
    "ep_size": None,
    "kv_fraction": 0.9,
    "enable_chunked_prefill": False,
    "extra_llm_api_options": None,
    "reasoning_parser": None,
    "served_model_name": None,
}
EXTRA_KEYS = {
    "kv_cache_config",
    "enable_chunked_prefill",
    "max_batch_size",
    "max_num_tokens",
    "max_seq_len",
    "attn_backend",
    "speculative_config",
    "enable_attention_dp",
    "cuda_graph_config",
    "print_iter_log",
    "disable_overlap_scheduler",
    "tensor_parallel_size",
    "moe_expert_parallel_size",
    "moe_config",
    "scheduler_config",
    "enable_iter_perf_stats",
    "stream_interval",
    "torch_compile_config",
    "enable_autotuner",
    "num_postprocess_workers",
    "return_perf_metrics",
    "kv_cache_dtype",
}


_METAVARS = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "flag": ""}


def help_text() -> str:
    """``trtllm-serve serve --help`` in click's layout: one line per option with its metavar or choices."""
    lines = [USAGE.splitlines()[0], "", "Options:"]
    for option, (_, kind) in OPTIONS.items():
        metavar = f"[{'|'.join(kind)}]" if isinstance(kind, tuple) else _METAVARS[str(kind)]
        lines.append(f"  {option} {metavar}".rstrip())
    lines.append("  --help                          Show this message and exit.")
    return "\n".join(lines) + "\n"


class ClickError(Exception):
    """A command-line error worded as click words it."""


def _convert(option: str, kind: object, value: str) -> object:
    if kind == "int":
        try:
            return int(value)
        except ValueError:
            raise ClickError(f"Invalid value for '{option}': '{value}' is not a valid integer.") from None
    if kind == "float":
        try:
            return float(value)
        except ValueError:
            raise ClickError(f"Invalid value for '{option}': '{value}' is not a valid float.") from None
    if isinstance(kind, tuple) and value not in kind:
        choices = ", ".join(f"'{choice}'" for choice in kind)
        raise ClickError(f"Invalid value for '{option}': '{value}' is not one of {choices}.")
    return value


def parse_argv(argv: List[str]) -> Dict[str, object]:
    """Options and the MODEL argument of ``trtllm-serve [serve] ...``; raises ClickError."""
    values: Dict[str, object] = dict(DEFAULTS)
    model: Optional[str] = None
    args = list(argv[1:] if argv and argv[0] == "serve" else argv)
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg.startswith("--"):
            name, sep, inline = arg.partition("=")
            if name not in OPTIONS:
                raise ClickError(f"No such option: {name}")
            dest, kind = OPTIONS[name]
            if kind == "flag":
                if sep:
                    raise ClickError(f"Option '{name}' does not take a value.")
                values[dest] = True
                continue
            if not sep:
                if index >= len(args):
                    raise ClickError(f"Option '{name}' requires an argument.")
                inline = args[index]
                index += 1
            values[dest] = _convert(name, kind, inline)
        elif model is None:
            model = arg
        else:
            raise ClickError(f"Got unexpected extra argument ({arg})")
    if model is None:
        raise ClickError("Missing argument 'MODEL'.")
    values["model"] = model
    return values


def load_extra_options(path: str) -> Dict[str, object]:
    """Merge the ``--extra_llm_api_options`` YAML file; raises ValueError like TensorRT-LLM."""
    try:
        with open(path, encoding="utf-8") as handle:
            extra = yamlish.loads(handle.read())
    except OSError as exc:
        raise ValueError(f"FileNotFoundError: [Errno {exc.errno}] {exc.strerror}: '{path}'") from None
    except ValueError as exc:
        raise ValueError(f"yaml.scanner.ScannerError: {exc}") from None
    if not isinstance(extra, dict):
        raise ValueError(f"ValueError: {path} must contain a mapping of LLM API options")
    unknown = sorted(set(extra) - EXTRA_KEYS)
    if unknown:
        lines = [
            f"pydantic_core._pydantic_core.ValidationError: {len(unknown)} validation error"
            f"{'s' if len(unknown) > 1 else ''} for TorchLlmArgs"
        ]
        for key in unknown:
            lines.extend(
                [key, f"  Extra inputs are not permitted [type=extra_forbidden, input_value={extra[key]!r}]"]
            )
        raise ValueError("\n".join(lines))
    return extra


def knobs_from_values(values: Dict[str, object], extra: Dict[str, object]) -> Knobs:
    merged = dict(values)
    for key in ("max_batch_size", "max_num_tokens", "max_seq_len", "enable_chunked_prefill"):
        if key in extra:
            merged[key] = extra[key]
    knobs = Knobs(str(merged["model"]))
    if merged["served_model_name"]:
        knobs.served_names = [str(merged["served_model_name"])]
    knobs.tp = int(extra.get("tensor_parallel_size") or merged["tp_size"])  # type: ignore[arg-type]
    knobs.pp = int(merged["pp_size"])  # type: ignore[arg-type]
    knobs.ep = int(extra.get("moe_expert_parallel_size") or merged["ep_size"] or 1)  # type: ignore[arg-type]
    knobs.max_num_seqs = int(merged["max_batch_size"])  # type: ignore[arg-type]
    knobs.max_num_batched_tokens = int(merged["max_num_tokens"])  # type: ignore[arg-type]
    knobs.max_model_len = merged["max_seq_len"]  # type: ignore[assignment]
    knobs.chunked_prefill = bool(merged["enable_chunked_prefill"])
    kv_config = extra.get("kv_cache_config") or {}
    knobs.mem_fraction = float(kv_config.get("free_gpu_memory_fraction", merged["kv_fraction"]))  # type: ignore
    knobs.prefix_caching = bool(kv_config.get("enable_block_reuse", True))  # type: ignore[union-attr]
    knobs.kv_cache_dtype = kv_config.get("dtype") or extra.get("kv_cache_dtype")  # type: ignore[union-attr]
    knobs.attention_backend = extra.get("attn_backend")  # type: ignore[assignment]
    spec = extra.get("speculative_config") or {}
    if spec:
        knobs.spec_method = str(spec.get("decoding_type", "mtp")).lower()  # type: ignore[union-attr]
        knobs.spec_tokens = int(spec.get("max_draft_len") or spec.get("num_nextn_predict_layers") or 1)  # type: ignore
    knobs.reasoning_parser = merged["reasoning_parser"]  # type: ignore[assignment]
    knobs.host, knobs.port = str(merged["host"]), int(merged["port"])  # type: ignore[arg-type]
    return knobs


class TrtllmLog(EngineLog):
    """TensorRT-LLM's ``[MM/DD/YYYY-HH:MM:SS] [TRT-LLM] [I] message`` lines."""

    bind_early = True
    startup_seconds = 15.0
    warmup_seconds = 25.0

    def _info(self, message: str) -> None:
        self.line(f"[{time.strftime('%m/%d/%Y-%H:%M:%S')}] [TRT-LLM] [I] {message}")

    def preamble(self, knobs: Knobs, version: str) -> None:
        self.line(f"[TensorRT-LLM] TensorRT-LLM version: {version}")
        self._info("Using LLM with PyTorch backend")
        self._info("Set PluginConfig.nccl_plugin to None.")

    def loading(self, dep: Deployment) -> None:
        self._info(f"Loading model {dep.knobs.model} (tp_size={dep.tp}, ep_size={dep.ep})")

    def loaded(self, dep: Deployment, plan: MemoryPlan, load_seconds: float) -> None:
        total = dep.accel.memory_bytes / GIB
        self.line(
            f"[TensorRT-LLM][INFO] Memory usage when calculating max tokens in paged kv cache: "
            f"total: {total:.2f} GiB, available: {plan.kv_bytes / GIB:.2f} GiB"
        )
        blocks = plan.kv_tokens // dep.profile.block_size
        self.line(f"[TensorRT-LLM][INFO] Number of blocks in KV cache primary pool: {blocks}")
        self.line(f"[TensorRT-LLM][INFO] Number of tokens per block: {dep.profile.block_size}.")
        self._info(
            f"max_seq_len={dep.max_model_len}, max_num_requests={dep.max_num_seqs}, "
            f"max_num_tokens={dep.max_num_batched_tokens}, max_batch_size={dep.max_num_seqs}"
        )


def main(argv: List[str]) -> int:
    """``trtllm-serve ARGV...``."""
    host = host_or_none("trtllm-serve")
    if host is None:
        return 1
    if "--help" in argv:
        print(help_text(), end="", flush=True)
        return 0
    try:
        values = parse_argv(argv)
    except ClickError as error:
        print(f"{USAGE}\nError: {error}", file=sys.stderr, flush=True)
        return 2
    try:
        extra = (
            load_extra_options(str(values["extra_llm_api_options"]))
            if values["extra_llm_api_options"]
            else {}
        )
    except ValueError as exc:
        print(f"Traceback (most recent call last):\n{exc}", file=sys.stderr, flush=True)
        return 1
    knobs = knobs_from_values(values, extra)
    launch = Launch(
        "trtllm",
        knobs,
        host,
        TrtllmLog(Console()),
        "CUDA_VISIBLE_DEVICES",
        metrics_enabled=bool(extra.get("return_perf_metrics")),
        version=host.version("tensorrt_llm"),
    )
    return run_engine(launch)
