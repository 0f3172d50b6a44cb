"""``vllm`` on a simulated host: ``vllm serve MODEL [options]`` as vLLM parses and logs it.

``--help`` and ``--help=all`` print the options (perflab's preflight reads them). Options use vLLM's
names (``-tp/--tensor-parallel-size``, ``-dp``, ``--enable-expert-parallel``,
``--quantization``, ``--max-num-batched-tokens``, ``--max-num-seqs``, ``--[no-]enable-prefix-caching``,
``--kv-cache-dtype``, ``--[no-]enable-chunked-prefill``, ``--speculative-config JSON``,
``--performance-mode``, ``--max-model-len`` (``32k`` allowed), ``--gpu-memory-utilization``,
``--reasoning-parser``, ``--attention-backend`` (an AttentionBackendEnum name, any case) or
``VLLM_ATTENTION_BACKEND``, ``--kv-transfer-config`` with NixlConnector or MooncakeConnector (a prefill
or decode worker of :mod:`perflab.sim.disagg`, behind vllm-router) …; choices and names follow vLLM 0.32,
logs vLLM 0.11); underscores in
option names are accepted as vLLM's FlexibleArgumentParser does. Unknown options fail with
argparse's ``unrecognized arguments``. On an Ascend host the same CLI runs as vLLM-Ascend.
The readiness line is uvicorn's ``Application startup complete.``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import List

from perflab.sim.deployment import Deployment, Knobs, speculative_from_json
from perflab.sim.disagg import VLLM_CONNECTORS, VLLM_ROLES
from perflab.sim.engines.launch import EngineLog, Launch, host_or_none, run_engine
from perflab.sim.perfmodel import MemoryPlan
from perflab.sim.server import Console

GIB = 1024**3
# vLLM 0.32's QuantizationMethods and CacheDType (vllm-ascend adds "ascend").
QUANTIZATION_METHODS = [
    "awq",
    "auto_awq",
    "fp8",
    "fbgemm_fp8",
    "fp_quant",
    "modelopt",
    "modelopt_fp4",
    "modelopt_mxfp8",
    "modelopt_mixed",
    "auto_gptq",
    "gptq",
    "gptq_marlin",
    "awq_marlin",
    "humming",
    "compressed-tensors",
    "experts_int8",
    "quark",
    "moe_wna16",
    "torchao",
    "inc",
    "mxfp4",
    "gpt_oss_mxfp4",
    "deepseek_v4_fp8",
    "online",
    "fp8_per_tensor",
    "fp8_per_block",
    "fp8_per_channel",
    "int8_per_channel_weight_only",
    "nvfp4_per_token",
    "mxfp8",
    "ascend",
]
KV_CACHE_DTYPES = [
    "auto",
    "float16",
    "bfloat16",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "fp8_inc",
    "fp8_ds_mla",
    "nvfp4_ds_mla",
    "turboquant_k8v4",
    "turboquant_4bit_nc",
    "turboquant_k3v4_nc",
    "turboquant_3bit_nc",
    "ultraquant_4bit",
    "int4_per_token_head",
    "int8_per_token_head",
    "fp8_per_token_head",
    "nvfp4",
    "nvfp4_4over6",
]
PERFORMANCE_MODES = ["balanced", "interactivity", "throughput"]
SUBCOMMANDS = ["chat", "complete", "serve", "bench", "collect-env", "run-batch"]


def human_int(text: str) -> int:
    """vLLM's readable integers: ``32768``, ``32k`` (×1000), ``32K`` (×1024), ``1m``, ``1M``."""
    multipliers = {"k": 1000, "K": 1024, "m": 1000**2, "M": 1024**2}
    if text and text[-1] in multipliers:
        return int(float(text[:-1]) * multipliers[text[-1]])
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vllm serve", usage="vllm serve [model_tag] [options]")
    add = parser.add_argument
    add("model_tag", nargs="?", default=None)
    add("--model", default=None)
    add("--host", default="0.0.0.0")
    add("--port", type=int, default=8000)
    add("--api-key", default="")
    add("--served-model-name", nargs="+", default=None)
    add("--tokenizer", default=None)
    add("--trust-remote-code", action="store_true")
    add("--dtype", default="auto")
    add("--seed", type=int, default=0)
    add("--max-model-len", type=human_int, default=None)
    add("--gpu-memory-utilization", "--device-memory-utilization", type=float, default=0.9)
    add("-tp", "--tensor-parallel-size", type=int, default=1)
    add("-pp", "--pipeline-parallel-size", type=int, default=1)
    add("-dp", "--data-parallel-size", type=int, default=1)
    add("--enable-expert-parallel", "-ep", action=argparse.BooleanOptionalAction, default=False)
    add("-q", "--quantization", choices=QUANTIZATION_METHODS, default=None)
    add("--max-num-batched-tokens", type=human_int, default=None)
    add("--max-num-seqs", type=int, default=None)
    add("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=None)
    add("--kv-cache-dtype", choices=KV_CACHE_DTYPES, default="auto")
    add("--enable-chunked-prefill", action=argparse.BooleanOptionalAction, default=None)
    add("--speculative-config", "-sc", default=None)
    add("--performance-mode", choices=PERFORMANCE_MODES, default=None)
    add("--reasoning-parser", default=None)
    add("--attention-backend", default=None)
    add("--enforce-eager", action="store_true")
    add("--block-size", type=int, default=None)
    add("--swap-space", type=float, default=4)
    add("--distributed-executor-backend", default=None)
    add("--download-dir", default=None)
    add("--load-format", default="auto")
    add("--revision", default=None)
    add("--generation-config", default="auto")
    add("--chat-template", default=None)
    add("--enable-auto-tool-choice", action="store_true")
    add("--tool-call-parser", default=None)
    add("--async-scheduling", action="store_true")
    add("-O", "--compilation-config", default=None)
    add("--hf-overrides", default=None)
    add("--max-logprobs", type=int, default=20)
    add("--disable-custom-all-reduce", action="store_true")
    add("--disable-log-requests", action="store_true")
    add("--enable-log-requests", action="store_true")
    add("--disable-log-stats", action="store_true")
    add("--disable-uvicorn-access-log", action="store_true")
    add("--uvicorn-log-level", default="info")
    add("--scheduling-policy", choices=["fcfs", "priority"], default="fcfs")
    add("--long-prefill-token-threshold", type=int, default=0)
    add("--limit-mm-per-prompt", default=None)
    add("--kv-transfer-config", default=None)
    return parser


def normalize_options(argv: List[str]) -> List[str]:
    """``--max_num_seqs=8`` → ``--max-num-seqs=8`` (vLLM accepts both spellings)."""
    normalized = []
    for arg in argv:
        if arg.startswith("--") and arg != "--":
            name, sep, value = arg.partition("=")
            arg = name.replace("_", "-") + sep + value
        normalized.append(arg)
    return normalized


def knobs_from_args(args: argparse.Namespace) -> Knobs:
    knobs = Knobs(args.model_tag or args.model or "")
    knobs.served_names = list(args.served_model_name or [])
    knobs.tp = args.tensor_parallel_size
    knobs.pp = args.pipeline_parallel_size
    knobs.dp = args.data_parallel_size
    knobs.ep = knobs.tp * knobs.dp if args.enable_expert_parallel else 1
    knobs.quantization = args.quantization
    knobs.kv_cache_dtype = args.kv_cache_dtype
    knobs.max_num_batched_tokens = args.max_num_batched_tokens
    knobs.max_num_seqs = args.max_num_seqs
    knobs.prefix_caching = args.enable_prefix_caching
    knobs.chunked_prefill = args.enable_chunked_prefill
    knobs.performance_mode = args.performance_mode
    knobs.max_model_len = args.max_model_len
    knobs.mem_fraction = args.gpu_memory_utilization
    knobs.attention_backend = args.attention_backend or os.environ.get("VLLM_ATTENTION_BACKEND")
    knobs.reasoning_parser = args.reasoning_parser
    knobs.enforce_eager = args.enforce_eager
    knobs.api_key = args.api_key or os.environ.get("VLLM_API_KEY", "")
    knobs.host, knobs.port = args.host, args.port
    if args.speculative_config:
        knobs.spec_method, knobs.spec_tokens = speculative_from_json(args.speculative_config)
    if args.kv_transfer_config:
        _read_kv_transfer(knobs, args.kv_transfer_config)
    return knobs


def _read_kv_transfer(knobs: Knobs, text: str) -> None:
    """``--kv-transfer-config`` as vLLM 0.32 reads it (``KVTransferConfig.__post_init__``,
    ``KVConnectorFactory``): a connector perflab's workers simulate, its role, and its side channel's port
    from ``VLLM_NIXL_SIDE_CHANNEL_PORT`` (default 5600) or the prefill's ``VLLM_MOONCAKE_BOOTSTRAP_PORT``
    (default 8998); ValueError with vLLM's words otherwise."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"argument --kv-transfer-config: invalid loads value: {text!r} ({exc.msg})"
        ) from None
    if not isinstance(config, dict):
        raise ValueError(f"argument --kv-transfer-config: invalid loads value: {text!r}")
    connector, role = config.get("kv_connector"), config.get("kv_role")
    if connector is not None and role is None:
        raise ValueError(
            f"Please specify kv_role when kv_connector is set, supported roles are {tuple(VLLM_ROLES)}"
        )
    if role is not None and role not in VLLM_ROLES:
        raise ValueError(f"Unsupported kv_role: {role}. Supported roles are {tuple(VLLM_ROLES)}")
    if connector not in VLLM_CONNECTORS:
        raise ValueError(f"Unsupported connector type: {connector}")
    knobs.transfer_backend = VLLM_CONNECTORS[connector]
    knobs.disaggregation_mode = VLLM_ROLES[role]
    if knobs.transfer_backend == "nixl":
        knobs.bootstrap_port = int(os.environ.get("VLLM_NIXL_SIDE_CHANNEL_PORT", "5600"))
    else:
        knobs.bootstrap_port = int(os.environ.get("VLLM_MOONCAKE_BOOTSTRAP_PORT", "8998"))


class VllmLog(EngineLog):
    """vLLM 0.11's log format: ``(APIServer pid=N) INFO MM-DD HH:MM:SS [file.py:line] message``."""

    bind_early = True
    startup_seconds = 12.0
    warmup_seconds = 30.0

    def __init__(self, console: Console, ascend: bool) -> None:
        super().__init__(console)
        self.ascend = ascend
        pid = os.getpid()
        self.api = f"(APIServer pid={pid}) "
        self.core = f"(EngineCore_DP0 pid={pid}) "
        self._uvicorn = Console(self.api)
        self.version = ""

    @property
    def uvicorn_console(self) -> Console:
        return self._uvicorn

    def _info(self, prefix: str, where: str, message: str) -> None:
        self.line(f"{prefix}INFO {time.strftime('%m-%d %H:%M:%S')} [{where}] {message}")

    def preamble(self, knobs: Knobs, version: str) -> None:
        self.version = version
        platform = "ascend" if self.ascend else "cuda"
        if self.ascend:
            self._info("", "__init__.py:42", "plugin ascend loaded.")
            self._info("", "__init__.py:207", "Platform plugin ascend is activated")
        else:
            self._info("", "__init__.py:216", f"Automatically detected platform {platform}.")
        self._info(self.api, "api_server.py:1839", f"vLLM API server version {version}")
        args = {"model_tag": knobs.model, "model": knobs.model}
        if knobs.tp != 1:
            args["tensor_parallel_size"] = knobs.tp
        if knobs.dp != 1:
            args["data_parallel_size"] = knobs.dp
        if knobs.ep != 1:
            args["enable_expert_parallel"] = True
        self._info(self.api, "utils.py:233", f"non-default args: {args}")

    def loading(self, dep: Deployment) -> None:
        self._info(self.api, "model.py:547", f"Resolved architecture: {dep.model.arch.architecture}")
        self._info(self.api, "model.py:1510", f"Using max model len {dep.max_model_len}")
        if dep.chunked_prefill:
            self._info(
                self.api,
                "scheduler.py:205",
                f"Chunked prefill is enabled with max_num_batched_tokens={dep.max_num_batched_tokens}.",
            )
        if dep.weight_format == "fp8" and not dep.accel.supports_fp8 and not dep.accel.is_npu:
            self.line(
                f"{self.core}WARNING {time.strftime('%m-%d %H:%M:%S')} [marlin_utils_fp8.py:57] Your GPU "
                "does not have native support for FP8 computation but FP8 quantization is being used. "
                "Weight-only FP8 compression will be used leveraging the Marlin kernel. This may degrade "
                "performance for compute-heavy workloads."
            )
        self._info(
            self.core,
            "core.py:77",
            (
                f"Initializing a V1 LLM engine (v{self.version}) with config: model='{dep.knobs.model}', "
                f"tensor_parallel_size={dep.tp}, pipeline_parallel_size={dep.pp}, "
                f"data_parallel_size={dep.dp}, quantization={dep.knobs.quantization}, "
                f"max_seq_len={dep.max_model_len}, kv_cache_dtype={dep.knobs.kv_cache_dtype or 'auto'}, "
                f"enable_prefix_caching={dep.prefix_caching}, chunked_prefill_enabled={dep.chunked_prefill}"
            ),
        )
        self._info(self.core, "gpu_model_runner.py:2602", f"Starting to load model {dep.knobs.model}...")

    def loaded(self, dep: Deployment, plan: MemoryPlan, load_seconds: float) -> None:
        self._info(self.core, "default_loader.py:267", f"Loading weights took {load_seconds:.2f} seconds")
        self._info(
            self.core,
            "gpu_model_runner.py:2653",
            f"Model loading took {plan.weights / GIB:.4f} GiB and {load_seconds + 0.9:.2f} seconds",
        )
        self._info(
            self.core, "gpu_worker.py:298", f"Available KV cache memory: {plan.kv_bytes / GIB:.2f} GiB"
        )
        self._info(self.core, "kv_cache_utils.py:1087", f"GPU KV cache size: {plan.kv_tokens:,} tokens")
        self._info(
            self.core,
            "kv_cache_utils.py:1091",
            (
                f"Maximum concurrency for {dep.max_model_len:,} tokens per request: "
                f"{plan.kv_tokens / dep.max_model_len:.2f}x"
            ),
        )

    def ready(self, host: str, port: int) -> None:
        """uvicorn's ``Application startup complete.`` (printed by the server) is vLLM's readiness."""

    def process_name(self, rank: int, dep: Deployment) -> str:
        return f"VLLM::Worker_TP{rank}" if dep.tp > 1 else "VLLM::EngineCore"


def main(argv: List[str]) -> int:
    """``vllm ARGV...``: only ``serve`` (and ``--version``) are simulated."""
    host = host_or_none("vllm")
    if host is None:
        return 1
    ascend = host.accelerator.is_npu
    version = host.version("vllm")
    if argv and argv[0] in ("-v", "--version"):
        print(version)
        return 0
    if not argv or argv[0] != "serve":
        choice = argv[0] if argv else ""
        print("usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...", file=sys.stderr)
        message = (
            "the following arguments are required: subparser"
            if not argv
            else f"argument subparser: invalid choice: '{choice}' (choose from "
            + ", ".join(f"'{name}'" for name in SUBCOMMANDS)
            + ")"
        )
        print(f"vllm: error: {message}", file=sys.stderr, flush=True)
        return 2
    if any(arg == "--help" or arg.startswith("--help=") or arg == "-h" for arg in argv[1:]):
        print(build_parser().format_help(), end="", flush=True)  # vLLM's --help=all lists every flag
        return 0
    try:
        args = build_parser().parse_args(normalize_options(argv[1:]))
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        knobs = knobs_from_args(args)
    except ValueError as exc:
        print(f"vllm serve: error: {exc}", file=sys.stderr, flush=True)
        return 2
    if not knobs.model:
        print(
            "vllm serve: error: the following arguments are required: model_tag", file=sys.stderr, flush=True
        )
        return 2
    engine = "vllm-ascend" if ascend else "vllm"
    devices_env = "ASCEND_RT_VISIBLE_DEVICES" if ascend else "CUDA_VISIBLE_DEVICES"
    log = VllmLog(Console(), ascend)
    launch = Launch(
        engine, knobs, host, log, devices_env, access_log=not args.disable_uvicorn_access_log, version=version
    )
    return run_engine(launch)
