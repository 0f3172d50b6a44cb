"""``python3 -m sglang.launch_server`` on a simulated host, as SGLang 0.5 parses and logs it (choices of
SGLang 0.5.23).

Options use SGLang's names (``--model-path``, ``--tp-size``, ``--dp-size``, ``--ep-size``,
``--attention-backend``, ``--chunked-prefill-size``, ``--max-running-requests``, ``--context-length``,
``--kv-cache-dtype``, ``--disable-radix-cache``, ``--quantization``, ``--mem-fraction-static``,
``--reasoning-parser``, ``--speculative-algorithm``/``--speculative-num-steps``…, and the prefill/decode
disaggregation flags ``--disaggregation-mode``, ``--disaggregation-transfer-backend`` and
``--disaggregation-bootstrap-port``, served by :mod:`perflab.sim.disagg`); unknown options fail
with argparse's ``unrecognized arguments``. Prometheus metrics are served only with
``--enable-metrics``, as in SGLang. The readiness line is ``The server is fired up and ready to roll!``.
"""

from __future__ import annotations

import argparse
import time
from typing import List

from perflab.sim.deployment import Deployment, Knobs
from perflab.sim.disagg import TRANSFER_BACKENDS
from perflab.sim.engines.launch import EngineLog, Launch, host_or_none, run_engine
from perflab.sim.perfmodel import MemoryPlan
from perflab.sim.server import Console

GB = 1e9
# SGLang 0.5.23's choices (sglang/srt/arg_groups/choices.py, fields/model.py, fields/spec.py).
ATTENTION_BACKENDS = [
    "triton",
    "torch_native",
    "flex_attention",
    "dsa",
    "nsa",
    "qsa",
    "dsv4",
    "compressed",
    "fa3",
    "fa4",
    "flashinfer",
    "llada2_cfg_flashinfer",
    "flashmla",
    "trtllm_mla",
    "cutedsl_mla",
    "tokenspeed_mla",
    "trtllm_mha",
    "hpc_ops",
    "minicpm_flashattn",
    "minicpm_flashinfer",
    "aiter",
    "wave",
    "intel_amx",
    "ascend",
    "intel_xpu",
]
QUANTIZATION_METHODS = [
    "awq",
    "fp8",
    "mxfp8",
    "gptq",
    "gptq_marlin",
    "awq_marlin",
    "bitsandbytes",
    "gguf",
    "modelopt",
    "modelopt_fp8",
    "modelopt_fp4",
    "nvfp4_online",
    "modelopt_mixed",
    "petit_nvfp4",
    "w8a8_int8",
    "w8a8_fp8",
    "moe_wna16",
    "w4afp8",
    "mxfp4",
    "auto-round",
    "auto-round-int8",
    "compressed-tensors",
    "modelslim",
    "mxfp_w4a8",
    "quark",
    "quark_int4fp8_moe",
    "quark_mxfp4",
    "mlx_q4",
    "mlx_q8",
    "unquant",
    "humming",
]
KV_CACHE_DTYPES = ["auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16"]
SPECULATIVE_ALGORITHMS = [
    "EAGLE",
    "EAGLE3",
    "NEXTN",
    "STANDALONE",
    "NGRAM",
    "DFLASH",
    "DSPARK",
    "UNO",
    "FROZEN_KV_MTP",
]
READY_LINE = "The server is fired up and ready to roll!"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="launch_server.py")
    add = parser.add_argument
    add("--model-path", "--model", dest="model_path", required=True)
    add("--tokenizer-path", default=None)
    add("--host", default="127.0.0.1")
    add("--port", type=int, default=30000)
    add("--tp-size", "--tensor-parallel-size", "--tp", dest="tp_size", type=int, default=1)
    add("--dp-size", "--data-parallel-size", "--dp", dest="dp_size", type=int, default=1)
    add("--ep-size", "--expert-parallel-size", "--ep", dest="ep_size", type=int, default=1)
    add("--pp-size", "--pipeline-parallel-size", dest="pp_size", type=int, default=1)
    add("--enable-dp-attention", action="store_true")
    add("--attn-dp-size", "--attention-data-parallel-size", dest="attn_dp_size", type=int, default=1)
    add("--attention-backend", choices=ATTENTION_BACKENDS, default=None)
    add("--prefill-attention-backend", choices=ATTENTION_BACKENDS, default=None)
    add("--decode-attention-backend", choices=ATTENTION_BACKENDS, default=None)
    add("--chunked-prefill-size", type=int, default=None)
    add("--max-prefill-tokens", type=int, default=16384)
    add("--max-running-requests", type=int, default=None)
    add("--max-total-tokens", type=int, default=None)
    add("--context-length", type=int, default=None)
    add("--kv-cache-dtype", choices=KV_CACHE_DTYPES, default="auto")
    add("--disable-radix-cache", action="store_true")
    add("--quantization", choices=QUANTIZATION_METHODS, default=None)
    add("--mem-fraction-static", type=float, default=None)
    add("--reasoning-parser", default=None)
    add("--tool-call-parser", default=None)
    add("--speculative-algorithm", choices=SPECULATIVE_ALGORITHMS, default=None)
    add("--speculative-num-steps", type=int, default=None)
    add("--speculative-eagle-topk", type=int, default=None)
    add("--speculative-num-draft-tokens", type=int, default=None)
    add("--speculative-draft-model-path", default=None)
    add("--trust-remote-code", action="store_true")
    add("--served-model-name", default=None)
    add("--api-key", default=None)
    add("--enable-metrics", action="store_true")
    add("--log-level", default="info")
    add("--log-requests", action="store_true")
    add("--disable-cuda-graph", action="store_true")
    add("--cuda-graph-max-bs", type=int, default=None)
    add("--schedule-policy", default="fcfs")
    add("--schedule-conservativeness", type=float, default=1.0)
    add("--dtype", default="auto")
    add("--page-size", type=int, default=1)
    add("--enable-torch-compile", action="store_true")
    add("--enable-mixed-chunk", action="store_true")
    add("--allow-auto-truncate", action="store_true")
    add("--skip-server-warmup", action="store_true")
    add("--device", default=None)
    add("--random-seed", type=int, default=None)
    add("--watchdog-timeout", type=float, default=300)
    add("--stream-interval", type=int, default=1)
    add("--disaggregation-mode", choices=["null", "prefill", "decode"], default="null")
    add("--disaggregation-transfer-backend", choices=TRANSFER_BACKENDS, default="mooncake")
    add("--disaggregation-bootstrap-port", type=int, default=8998)
    return parser


def knobs_from_args(args: argparse.Namespace) -> Knobs:
    knobs = Knobs(args.model_path)
    knobs.served_names = [args.served_model_name] if args.served_model_name else []
    knobs.tp, knobs.dp, knobs.pp, knobs.ep = args.tp_size, args.dp_size, args.pp_size, args.ep_size
    # attention DP inside the TP group (SGLang 0.5.22/0.5.23 --attn-dp-size; --dp-size N
    # --enable-dp-attention is its deprecated spelling): dp ranks of tp/dp GPUs sharing the MoE layers
    attn_dp = args.dp_size if args.enable_dp_attention and args.attn_dp_size == 1 else args.attn_dp_size
    if attn_dp > 1:
        if args.tp_size % attn_dp:
            raise SystemExit(
                f"launch_server.py: error: --attn-dp-size {attn_dp} must divide --tp-size {args.tp_size}"
            )
        knobs.tp, knobs.dp, knobs.dp_attention = args.tp_size // attn_dp, attn_dp, True
    knobs.quantization = args.quantization
    knobs.kv_cache_dtype = args.kv_cache_dtype
    knobs.max_num_batched_tokens = args.chunked_prefill_size
    knobs.max_num_seqs = args.max_running_requests
    knobs.prefix_caching = not args.disable_radix_cache
    knobs.max_model_len = args.context_length
    knobs.mem_fraction = args.mem_fraction_static
    knobs.attention_backend = args.attention_backend
    knobs.reasoning_parser = args.reasoning_parser
    knobs.api_key = args.api_key or ""
    knobs.disaggregation_mode = args.disaggregation_mode
    knobs.transfer_backend = args.disaggregation_transfer_backend
    knobs.bootstrap_port = args.disaggregation_bootstrap_port
    knobs.host, knobs.port = args.host, args.port
    if args.speculative_algorithm:
        knobs.spec_method = args.speculative_algorithm.lower()
        knobs.spec_tokens = args.speculative_num_steps or 3
    return knobs


class SglangLog(EngineLog):
    """SGLang's ``[YYYY-MM-DD HH:MM:SS TP0] message`` lines."""

    startup_seconds = 10.0
    warmup_seconds = 20.0

    def _at(self, rank: str = "") -> str:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        return f"[{stamp} {rank}]" if rank else f"[{stamp}]"

    def preamble(self, knobs: Knobs, version: str) -> None:
        self.line(
            f"{self._at()} server_args=ServerArgs(model_path='{knobs.model}', tp_size={knobs.tp}, "
            f"dp_size={knobs.dp}, ep_size={knobs.ep}, host='{knobs.host}', port={knobs.port}, "
            f"chunked_prefill_size={knobs.max_num_batched_tokens}, "
            f"max_running_requests={knobs.max_num_seqs}, context_length={knobs.max_model_len}, "
            f"quantization={knobs.quantization!r}, kv_cache_dtype='{knobs.kv_cache_dtype}', "
            f"disable_radix_cache={not knobs.prefix_caching}, attention_backend={knobs.attention_backend!r})"
        )

    def loading(self, dep: Deployment) -> None:
        for rank in range(dep.tp):
            self.line(f"{self._at(f'TP{rank}')} Init torch distributed begin.")
        self.line(
            f"{self._at('TP0')} Load weight begin. avail mem={dep.accel.memory_bytes / GB * 0.98:.2f} GB"
        )

    def loaded(self, dep: Deployment, plan: MemoryPlan, load_seconds: float) -> None:
        total = dep.accel.memory_bytes / GB
        after_weights = total * 0.98 - plan.weights / GB
        dtype = "torch.float8_e4m3fn" if dep.weight_format == "fp8" else "torch.bfloat16"
        self.line(
            f"{self._at('TP0')} Load weight end. type={dep.model.arch.architecture}, dtype={dtype}, "
            f"avail mem={after_weights:.2f} GB, mem usage={plan.weights / GB:.2f} GB."
        )
        half = plan.kv_bytes / 2 / GB
        self.line(
            f"{self._at('TP0')} KV Cache is allocated. #tokens: {plan.kv_tokens}, K size: {half:.2f} GB, "
            f"V size: {half:.2f} GB"
        )
        self.line(f"{self._at('TP0')} Memory pool end. avail mem={after_weights - plan.kv_bytes / GB:.2f} GB")
        self.line(
            f"{self._at('TP0')} max_total_num_tokens={plan.kv_tokens}, "
            f"chunked_prefill_size={dep.max_num_batched_tokens}, max_prefill_tokens=16384, "
            f"max_running_requests={dep.max_num_seqs}, context_len={dep.max_model_len}"
        )

    def ready(self, host: str, port: int) -> None:
        self.line(f'{self._at()} INFO:     127.0.0.1:{port + 1} - "GET /get_model_info HTTP/1.1" 200 OK')
        self.line(
            f"{self._at('TP0')} Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, "
            "token usage: 0.00, #running-req: 0, #queue-req: 0"
        )
        self.line(f"{self._at()} {READY_LINE}")

    def process_name(self, rank: int, dep: Deployment) -> str:
        return f"sglang::scheduler_TP{rank}"


def main(argv: List[str]) -> int:
    """``python3 -m sglang.launch_server ARGV...``."""
    host = host_or_none("sglang")
    if host is None:
        return 1
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    launch = Launch(
        "sglang",
        knobs_from_args(args),
        host,
        SglangLog(Console()),
        "CUDA_VISIBLE_DEVICES",
        metrics_enabled=args.enable_metrics,
        version=host.version("sglang"),
    )
    return run_engine(launch)
