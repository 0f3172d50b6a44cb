"""SGLang (``python3 -m sglang.launch_server``).

Flag names follow SGLang 0.5.23's server arguments (``sglang/srt/arg_groups/fields``, ``--help``):
``--model-path``, ``--tp-size``, ``--dp-size``, ``--ep-size``, ``--attention-backend`` (fa3, flashinfer,
triton, …), ``--max-running-requests``, ``--chunked-prefill-size`` (-1 disables chunked prefill),
``--disable-radix-cache`` (prefix caching is on by default), ``--kv-cache-dtype`` (fp8_e4m3/fp8_e5m2/…;
enumerated values follow :mod:`perflab.engines.tables.sglang`, 0.5.22 and 0.5.23),
``--context-length``, ``--mem-fraction-static``, ``--reasoning-parser``, attention data parallel
``--attn-dp-size`` inside ``--tp-size`` (``dp_attention``) and the
``--speculative-algorithm`` family. Default port 30000; ``GET /health`` answers 503 until warm-up ends and
the log says "The server is fired up and ready to roll!". Prometheus gauges need ``--enable-metrics``,
which perflab always adds at launch (not shown in the display command). Before a launch the host's own
SGLang parses the argv (``perflab/engines/programs/sglang_check.py``: ``ServerArgs.add_cli_args``, its
choices and speculative algorithms); these tables are the fallback where it cannot be imported.

Mappings from the engine-neutral knobs: ``max_num_batched_tokens`` is the chunked-prefill budget
(``--chunked-prefill-size``, the tokens one prefill step may take, as vLLM's budget is);
``kv_cache_dtype="fp8"`` means vLLM's fp8 (= e4m3) and is written ``fp8_e4m3``; a vLLM-shaped
``speculative_config`` ``{"method", "num_speculative_tokens", "model"}`` becomes
``--speculative-algorithm`` (mtp→NEXTN, eagle→EAGLE, eagle3→EAGLE3, draft_model→STANDALONE, ngram→NGRAM),
``--speculative-num-steps`` n, ``--speculative-eagle-topk`` 1 and ``--speculative-num-draft-tokens`` n+1
(SGLang-specific ``eagle_topk`` / ``num_draft_tokens`` keys override the last two).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perflab.engines.base import EngineAdapter, EngineMetrics
from perflab.engines.config import EngineConfig
from perflab.engines.errors import InvalidKnobValue
from perflab.engines.failures import COMMON_SIGNATURES, DISAGG_SIGNATURES, Signature
from perflab.engines.flags import Flag, FlagTable, parse_float, parse_int
from perflab.engines.tables.sglang import SGLANG_RELEASES
from perflab.engines.vllm import VLLM_FLAGS

SPECULATIVE_ALGORITHMS = {
    "mtp": "NEXTN",
    "eagle": "EAGLE",
    "eagle3": "EAGLE3",
    "draft_model": "STANDALONE",
    "ngram": "NGRAM",
}
_DRAFT_MODEL_ALGORITHMS = frozenset({"EAGLE", "EAGLE3", "STANDALONE"})

SGLANG_FLAGS = FlagTable(
    (
        Flag("tp", "--tp-size", aliases=("--tensor-parallel-size", "--tp"), convert=parse_int),
        Flag("dp", "--dp-size", aliases=("--data-parallel-size", "--dp"), convert=parse_int),
        Flag("ep", "--ep-size", aliases=("--expert-parallel-size", "--ep"), convert=parse_int),
        Flag("quantization", "--quantization"),
        Flag("attention_backend", "--attention-backend"),
        Flag("max_num_batched_tokens", "--chunked-prefill-size", convert=parse_int),
        Flag("max_num_seqs", "--max-running-requests", convert=parse_int),
        Flag("enable_prefix_caching", "--disable-radix-cache", kind="off_switch"),
        Flag("kv_cache_dtype", "--kv-cache-dtype"),
        Flag("max_model_len", "--context-length", convert=parse_int),
        Flag("gpu_memory_utilization", "--mem-fraction-static", convert=parse_float),
        Flag("reasoning_parser", "--reasoning-parser"),
        Flag("served_model_name", "--served-model-name"),
        # parse-only parts of dp_attention and speculative_config, assembled by SglangAdapter.finish_parse
        Flag(
            "dp_attention.size",
            "--attn-dp-size",
            aliases=("--attention-data-parallel-size",),
            convert=parse_int,
        ),
        Flag("dp_attention.enabled", "--enable-dp-attention", kind="switch"),
        Flag("speculative_config.algorithm", "--speculative-algorithm"),
        Flag("speculative_config.num_steps", "--speculative-num-steps", convert=parse_int),
        Flag("speculative_config.eagle_topk", "--speculative-eagle-topk", convert=parse_int),
        Flag("speculative_config.num_draft_tokens", "--speculative-num-draft-tokens", convert=parse_int),
        Flag(
            "speculative_config.draft_model",
            "--speculative-draft-model-path",
            aliases=("--speculative-draft-model",),
        ),
    )
)


# SGLang 0.5.23's argparse dests (sglang/srt/arg_groups/fields) of perflab's typed knobs.
SGLANG_DESTS = {
    "tp_size": "tp",
    "dp_size": "dp",
    "ep_size": "ep",
    "quantization": "quantization",
    "attention_backend": "attention_backend",
    "chunked_prefill_size": "max_num_batched_tokens",
    "max_running_requests": "max_num_seqs",
    "disable_radix_cache": "enable_prefix_caching",
    "kv_cache_dtype": "kv_cache_dtype",
    "context_length": "max_model_len",
    "mem_fraction_static": "gpu_memory_utilization",
    "reasoning_parser": "reasoning_parser",
    "served_model_name": "served_model_name",
    "model": "model",
}


class SglangAdapter(EngineAdapter):
    name = "sglang"
    display_name = "SGLang"
    default_port = 30000
    health_path = "/health"
    visible_devices_env = "CUDA_VISIBLE_DEVICES"
    metrics = EngineMetrics(
        running="sglang:num_running_reqs",
        waiting="sglang:num_queue_reqs",
        kv_cache_usage="sglang:token_usage",
    )
    program = ("python3", "-m", "sglang.launch_server")
    help_argv = ("python3", "-m", "sglang.launch_server", "--help")
    check_program = "sglang_check.py"
    engine_dests = SGLANG_DESTS
    flag_abbreviations = True
    model_flag = "--model-path"
    flags = SGLANG_FLAGS
    special_knobs = frozenset({"enable_chunked_prefill", "speculative_config"})
    unsupported = {
        "performance_mode": "tune max_num_seqs and max_num_batched_tokens instead",
    }
    plumbing_args = ("--enable-metrics",)
    lookalike_flags = VLLM_FLAGS
    releases = SGLANG_RELEASES
    vocabulary = SGLANG_RELEASES.any_release()
    bare_switches = ("--trust-remote-code", "--disable-cuda-graph")
    ready_markers = ("The server is fired up and ready to roll",)
    signatures = (
        *COMMON_SIGNATURES,
        *DISAGG_SIGNATURES,
        # sglang/srt/distributed/bootstrap.py (0.5.23): a TP rank found its GPU's memory taken by others
        Signature.of(
            "gpus_unavailable",
            r"The memory capacity is unbalanced\. Some GPUs may be occupied by other processes",
        ),
        Signature.of("oom", r"Not enough memory\. Please try to increase --mem-fraction-static"),
        Signature.of("unsupported_hardware", r"Only SM [\d.x]+(?: and [\d.x]+)? (?:is|are) supported"),
        # SGLang 0.5.23 attention_registry.py ("FlashAttention v3 Backend requires SM>=80 and SM<=90. …"),
        # kernels and hooks ("requires SM90 (Hopper) or later", "requires SM100/SM103", "requires SM10x")
        Signature.of("unsupported_hardware", r"requires (?:SM ?(?:>=|<=)?\d|SM\d+x|MP>=\d)"),
        # SGLang 0.5.23 arg_groups ("TRTLLM MLA backend is only supported on Blackwell GPUs (SM100/SM12x)")
        Signature.of("unsupported_hardware", r"is only supported on (?:Hopper|Blackwell)[^.]*\(SM\d"),
    )

    def model_flag_aliases(self) -> tuple[str, ...]:
        return ("--model",)

    def knobs_read(self, effective: Mapping[str, Any]) -> dict[str, Any]:
        knobs = dict(effective)
        if "enable_prefix_caching" in knobs:
            knobs["enable_prefix_caching"] = not knobs["enable_prefix_caching"]
        if "max_num_batched_tokens" in knobs:
            knobs["enable_chunked_prefill"] = knobs["max_num_batched_tokens"] != -1
            if knobs["max_num_batched_tokens"] == -1:
                knobs["max_num_batched_tokens"] = None
        return knobs

    def check_values(self, config: EngineConfig) -> None:
        if config.dp_attention and config.dp == 1 and config.disaggregation is None:
            raise InvalidKnobValue(
                self.display_name,
                "dp_attention",
                "needs dp > 1: dp is the number of attention data-parallel groups (--attn-dp-size)",
            )
        group = config.tp * config.dp if config.dp_attention else config.tp
        shown = f"{group} = tp×dp, dp_attention" if config.dp_attention else str(group)
        if group % config.ep:
            raise InvalidKnobValue(
                self.display_name,
                "ep",
                f"({config.ep}) must divide tp ({shown}): experts are split within the tensor-parallel group",
            )
        if config.max_num_batched_tokens is not None and config.enable_chunked_prefill is False:
            raise InvalidKnobValue(
                self.display_name,
                "max_num_batched_tokens",
                "is the chunked-prefill size, which --chunked-prefill-size -1 (chunked prefill off) "
                "replaces; set only one of max_num_batched_tokens and enable_chunked_prefill=False",
            )
        if config.speculative_config is not None:
            self._speculative_args(config)

    @staticmethod
    def _kv_cache_dtype(config: EngineConfig) -> str | None:
        return "fp8_e4m3" if config.kv_cache_dtype == "fp8" else config.kv_cache_dtype

    def knob_word(self, config: EngineConfig, knob: str) -> str | None:
        return self._kv_cache_dtype(config) if knob == "kv_cache_dtype" else super().knob_word(config, knob)

    def render_knob(self, knob: str, value: Any, config: EngineConfig) -> list[str]:
        if config.dp_attention and knob in ("tp", "dp"):
            # attention DP lives inside SGLang's TP group: --tp-size tp×dp --attn-dp-size dp (0.5.22/0.5.23;
            # --dp-size N --enable-dp-attention is its deprecated spelling)
            if knob == "tp" and config.dp > 1:
                return []
            return (
                ["--tp-size", str(config.tp * config.dp), "--attn-dp-size", str(config.dp)]
                if knob == "dp"
                else (super().render_knob(knob, value, config))
            )
        if knob == "kv_cache_dtype":
            return ["--kv-cache-dtype", str(self._kv_cache_dtype(config))]
        if knob == "enable_chunked_prefill":
            return [] if value else ["--chunked-prefill-size", "-1"]
        if knob == "speculative_config":
            return self._speculative_args(config)
        return super().render_knob(knob, value, config)

    def _speculative_args(self, config: EngineConfig) -> list[str]:
        request = self.speculative_request(config, frozenset({"eagle_topk", "num_draft_tokens"}))
        algorithm = SPECULATIVE_ALGORITHMS.get(request.method)
        if algorithm is None:
            raise InvalidKnobValue(
                self.display_name,
                "speculative_config",
                f"method {request.method!r} has no SGLang algorithm; "
                f"use one of {', '.join(SPECULATIVE_ALGORITHMS)}",
            )
        self.check_word("speculative_config", algorithm)
        if algorithm in _DRAFT_MODEL_ALGORITHMS and request.draft_model is None:
            raise InvalidKnobValue(
                self.display_name, "speculative_config", f'method {request.method!r} needs a draft "model"'
            )
        args = ["--speculative-algorithm", algorithm]
        if algorithm == "NGRAM":
            args += [
                "--speculative-num-draft-tokens",
                str(request.extra.get("num_draft_tokens", request.num_tokens)),
            ]
        else:
            topk = request.extra.get("eagle_topk", 1)
            draft_tokens = request.extra.get("num_draft_tokens", request.num_tokens + 1)
            args += [
                "--speculative-num-steps",
                str(request.num_tokens),
                "--speculative-eagle-topk",
                str(topk),
                "--speculative-num-draft-tokens",
                str(draft_tokens),
            ]
        if request.draft_model is not None:
            args += ["--speculative-draft-model-path", request.draft_model]
        return args

    def finish_parse(self, values: dict[str, Any]) -> dict[str, Any]:
        values = _attention_dp(values)
        if values.get("max_num_batched_tokens") == -1:
            del values["max_num_batched_tokens"]
            values["enable_chunked_prefill"] = False
        algorithm = values.pop("speculative_config.algorithm", None)
        steps = values.pop("speculative_config.num_steps", None)
        topk = values.pop("speculative_config.eagle_topk", None)
        draft_tokens = values.pop("speculative_config.num_draft_tokens", None)
        draft_model = values.pop("speculative_config.draft_model", None)
        if algorithm is None:
            return values
        methods = {algo: method for method, algo in SPECULATIVE_ALGORITHMS.items()}
        method = methods.get(algorithm.upper())
        if method is None:
            raise ValueError(f"--speculative-algorithm {algorithm} has no engine-neutral equivalent")
        spec: dict[str, Any] = {"method": method}
        if method == "ngram":
            spec["num_speculative_tokens"] = draft_tokens
        else:
            spec["num_speculative_tokens"] = steps
            if topk not in (None, 1):
                spec["eagle_topk"] = topk
            if draft_tokens is not None and steps is not None and draft_tokens != steps + 1:
                spec["num_draft_tokens"] = draft_tokens
        if spec["num_speculative_tokens"] is None:
            raise ValueError(f"--speculative-algorithm {algorithm} without a step/draft-token count")
        if draft_model is not None:
            spec["model"] = draft_model
        values["speculative_config"] = spec
        return values


def _attention_dp(values: dict[str, Any]) -> dict[str, Any]:
    """``--tp-size T --attn-dp-size N`` (or the deprecated ``--tp-size T --dp-size N
    --enable-dp-attention``) as ``tp = T / N``, ``dp = N``, ``dp_attention``: the inverse of
    :meth:`SglangAdapter.render_knob`."""
    size = values.pop("dp_attention.size", None)
    enabled = values.pop("dp_attention.enabled", False)
    if size is not None and values.get("dp", 1) != 1:
        raise ValueError(
            "--dp-size with --attn-dp-size (replicas of an attention data-parallel group) has no "
            "engine-neutral equivalent; write one replica and set replicas"
        )
    groups = size if size is not None else (values.get("dp", 1) if enabled else None)
    if groups is None or groups == 1:
        return values
    tp = values.get("tp", 1)
    if groups < 1 or tp % groups:
        raise ValueError(f"--tp-size {tp} is not a whole number of attention data-parallel groups ({groups})")
    return {**values, "tp": tp // groups, "dp": groups, "dp_attention": True}
