"""Each engine's own words for the enumerated knobs, with the engine version each table follows.

Each adapter declares a ``{knob: Vocabulary}`` mapping (``VLLM_VOCABULARY``, …) and refuses a value
outside it before anything is launched, naming the engine, the knob, the version the table comes from,
the word to use for another engine's spelling, and the accepted values. The preflight
(:mod:`perflab.engines.preflight`) then checks the launch with the engine version actually installed on
the host. An engine the preflight can ask itself (vLLM: its own parser and registries) is judged by these
tables only where nothing better is known: no host, a host whose version is unknown or the tables' own,
or an engine that cannot be imported there (the fallback); its own registries replace them where an
earlier check cached them (:func:`perflab.engines.preflight.host_adapter`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from perflab.engines.errors import InvalidKnobValue

VLLM_VERSION = "0.32.0"
# vLLM 0.32.0: vllm/v1/attention/backends/registry.py AttentionBackendEnum member names (vLLM upper-cases
# the value, so any case is accepted; "auto" means automatic selection). CUSTOM is left out: it is a
# placeholder that only works after a plug-in registers a backend under it.
VLLM_ATTENTION_BACKENDS: tuple[str, ...] = (
    "FLASH_ATTN", "FLASH_ATTN_DIFFKV", "TRITON_ATTN", "TRITON_ATTN_DIFFKV", "TRITON_FLASH_ATTN",
    "ROCM_ATTN", "ROCM_SEGMENTED_ATTN", "ROCM_AITER_MLA", "ROCM_AITER_TRITON_MLA", "ROCM_AITER_FA",
    "ROCM_AITER_MLA_SPARSE",
    "XPU_MLA_SPARSE", "TORCH_SDPA", "FLASHINFER", "TRITON_FLASHINFER", "FLASHINFER_MLA", "TOKENSPEED_MLA",
    "FLASHINFER_MLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM120", "FLASHINFER_MLA_SPARSE_SM90", "TRITON_MLA",
    "CUTLASS_MLA", "FLASHMLA", "FLASHMLA_SPARSE", "FLASHMLA_SPARSE_DSV4", "FLASHINFER_MLA_SPARSE_DSV4",
    "ROCM_FLASHMLA_SPARSE_DSV4", "FLASHMLA_SPARSE_DSV41", "FLASHINFER_MLA_SPARSE_DSV41",
    "FLASHMLA_MEGA_ATTN_DSV41", "B12X", "FLASH_ATTN_MLA", "FLASH_ATTN_MLA_SPARSE", "MINIMAX_M3_SPARSE",
    "CUTLASS_MSA", "TRITON_MSA", "NO_ATTENTION", "FLEX_ATTENTION", "HPC_ATTN", "ROCM_AITER_UNIFIED_ATTN",
    "CPU_ATTN", "CPU_MLA", "AMX_MLA", "TURBOQUANT", "ULTRAQUANT",
)  # fmt: skip
# Other engines' spellings users carry over, and the vLLM backend that does the same job.
VLLM_ATTENTION_HINTS: Mapping[str, str] = {
    "fa2": "FLASH_ATTN",
    "fa3": "FLASH_ATTN",
    "fa4": "FLASH_ATTN",
    "flash_attention": "FLASH_ATTN",
    "triton": "TRITON_ATTN",
    "torch_native": "TORCH_SDPA",
    "sdpa": "TORCH_SDPA",
    "trtllm": "FLASHINFER",
    "trtllm_mha": "FLASHINFER",
    "xformers": "FLASH_ATTN",
}
# vLLM 0.32.0: vllm/config/cache.py CacheDType (the choices of --kv-cache-dtype).
VLLM_KV_CACHE_DTYPES: tuple[str, ...] = (
    "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla", "nvfp4_ds_mla",
    "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc", "ultraquant_4bit",
    "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head", "nvfp4", "nvfp4_4over6",
)  # fmt: skip
# vLLM 0.32.0: vllm/model_executor/layers/quantization/__init__.py QuantizationMethods.
VLLM_QUANTIZATION_METHODS: tuple[str, ...] = (
    "awq", "auto_awq", "fp8", "fbgemm_fp8", "fp_quant", "modelopt", "modelopt_fp4", "modelopt_mxfp8",
    "modelopt_mixed", "auto_gptq", "gptq", "gptq_marlin", "awq_marlin", "humming", "compressed-tensors",
    "experts_int8", "quark", "moe_wna16", "torchao", "inc", "mxfp4", "gpt_oss_mxfp4", "deepseek_v4_fp8",
    "online", "fp8_per_tensor", "fp8_per_block", "fp8_per_channel", "int8_per_channel_weight_only",
    "nvfp4_per_token", "mxfp8",
)  # fmt: skip
# vllm-ascend registers its own quantization method ("ascend", vllm_ascend/quantization) on top of vLLM's.
VLLM_ASCEND_QUANTIZATION_METHODS: tuple[str, ...] = (*VLLM_QUANTIZATION_METHODS, "ascend")
# vLLM 0.32.0: vllm/config/speculative.py SpeculativeMethod (MTPModelTypes, EagleModelTypes, …).
VLLM_SPECULATIVE_METHODS: tuple[str, ...] = (
    "ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "custom_class", "eagle", "eagle3",
    "extract_hidden_states", "dflash", "ngram_gpu", "dspark", "mtp", "deepseek_mtp", "dots3_note_mtp",
    "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp", "glm_ocr_mtp", "ernie_mtp",
    "nemotron_h_mtp", "exaone_moe_mtp", "exaone4_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp", "qwen3_5_mtp",
    "longcat_flash_mtp", "bailing_hybrid_v3_mtp", "minimax_m3_mtp", "bailing_hybrid_mtp", "kimi_k3_mtp",
    "pangu_ultra_moe_mtp", "step3p5_mtp", "hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp", "inkling_mtp",
    "glm5_next_mtp",
)  # fmt: skip
# vLLM 0.32.0: --performance-mode choices (vllm/config/vllm.py PerformanceMode).
VLLM_PERFORMANCE_MODES: tuple[str, ...] = ("balanced", "interactivity", "throughput")

SGLANG_VERSION = "0.5.23"
# SGLang 0.5.23: sglang/srt/arg_groups/choices.py ATTENTION_BACKEND_CHOICES.
SGLANG_ATTENTION_BACKENDS: tuple[str, ...] = (
    "triton", "torch_native", "flex_attention", "dsa", "nsa", "qsa", "dsv4", "compressed", "fa3", "fa4",
    "flashinfer", "llada2_cfg_flashinfer", "flashmla", "trtllm_mla", "cutedsl_mla", "tokenspeed_mla",
    "trtllm_mha", "hpc_ops", "minicpm_flashattn", "minicpm_flashinfer", "aiter", "wave", "intel_amx",
    "ascend", "intel_xpu",
)  # fmt: skip
# SGLang 0.5.23: sglang/srt/arg_groups/fields/model.py kv_cache_dtype choices (fp4_e2m1 is gone; its
# FP4 recipes are now nvfp4 and fp4_mx_block16). perflab writes vLLM's "fp8" as fp8_e4m3.
SGLANG_KV_CACHE_DTYPES: tuple[str, ...] = (
    "auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16",
)  # fmt: skip
SGLANG_KV_CACHE_HINTS: Mapping[str, str] = {"fp4_e2m1": "nvfp4 or fp4_mx_block16"}
# SGLang 0.5.23: sglang/srt/arg_groups/choices.py QUANTIZATION_CHOICES.
SGLANG_QUANTIZATION_METHODS: tuple[str, ...] = (
    "awq", "fp8", "mxfp8", "gptq", "gptq_marlin", "awq_marlin", "bitsandbytes", "gguf", "modelopt",
    "modelopt_fp8", "modelopt_fp4", "nvfp4_online", "modelopt_mixed", "petit_nvfp4", "w8a8_int8", "w8a8_fp8",
    "moe_wna16", "w4afp8", "mxfp4", "auto-round", "auto-round-int8", "compressed-tensors", "modelslim",
    "mxfp_w4a8", "quark", "quark_int4fp8_moe", "quark_mxfp4", "mlx_q4", "mlx_q8", "unquant", "humming",
)  # fmt: skip
# SGLang 0.5.23: sglang/srt/arg_groups/fields/spec.py --speculative-algorithm builtins.
SGLANG_SPECULATIVE_ALGORITHMS: tuple[str, ...] = (
    "EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO",
)  # fmt: skip

TRTLLM_VERSION = "1.3"
# TensorRT-LLM 1.3: LLM API attn_backend (tensorrt_llm/llmapi/llm_args.py, default TRTLLM;
# tensorrt_llm/_torch/attention_backend/utils.py get_attention_backend).
TRTLLM_ATTENTION_BACKENDS: tuple[str, ...] = ("TRTLLM", "FLASHINFER", "VANILLA")
# TensorRT-LLM 1.3: KvCacheConfig.dtype ("auto" follows the checkpoint, "fp8" the FP8 KV cache).
TRTLLM_KV_CACHE_DTYPES: tuple[str, ...] = ("auto", "fp8")
# TensorRT-LLM 1.3: the speculative_config decoding types perflab maps (MTP, NGram).
TRTLLM_SPECULATIVE_METHODS: tuple[str, ...] = ("mtp", "ngram")

MINDIE_VERSION = "2.x / MindIE-LLM 3.0"
# MindIE-LLM docs/zh/user_guide/feature/mtp.md: plugin_params mtp, num_speculative_tokens 1 or 2.
MINDIE_MTP_TOKENS: tuple[int, ...] = (1, 2)


@dataclass(frozen=True)
class Vocabulary:
    """The values one engine version accepts for one knob, and hints for other engines' spellings."""

    version: str
    values: tuple[str, ...]
    hints: Mapping[str, str] = field(default_factory=dict)
    case_sensitive: bool = True
    also: tuple[str, ...] = ()

    def _hint(self, value: str) -> str | None:
        return self.hints.get(value if self.case_sensitive else value.lower())

    def installed(self, version: str, values: tuple[str, ...]) -> Vocabulary:
        """The same knob's vocabulary as an installed engine's registry lists it."""
        return Vocabulary(version, values, self.hints, self.case_sensitive, self.also)

    def check(self, engine: str, knob: str, value: str, *, hints_only: bool = False) -> None:
        """Raise :class:`InvalidKnobValue` unless ``value`` is one of the engine's words; with
        ``hints_only``, only for another engine's spelling (a word no version of this engine takes)."""
        candidate = value if self.case_sensitive else value.upper()
        if candidate in self.values or value.lower() in self.also:
            return
        hint = self._hint(value)
        if hints_only and hint is None:
            return
        suggestion = f"; use {hint}" if hint else ""
        raise InvalidKnobValue(
            engine,
            knob,
            f"{value!r} is not one of {engine} {self.version}'s values{suggestion} "
            f"(accepted: {', '.join(self.values)})",
        )


VLLM_VOCABULARY: Mapping[str, Vocabulary] = {
    "attention_backend": Vocabulary(
        VLLM_VERSION, VLLM_ATTENTION_BACKENDS, VLLM_ATTENTION_HINTS, case_sensitive=False, also=("auto",)
    ),
    "kv_cache_dtype": Vocabulary(VLLM_VERSION, VLLM_KV_CACHE_DTYPES),
    "quantization": Vocabulary(VLLM_VERSION, VLLM_QUANTIZATION_METHODS),
    "performance_mode": Vocabulary(VLLM_VERSION, VLLM_PERFORMANCE_MODES),
    "speculative_config": Vocabulary(VLLM_VERSION, VLLM_SPECULATIVE_METHODS),
}
VLLM_ASCEND_VOCABULARY: Mapping[str, Vocabulary] = {
    **VLLM_VOCABULARY,
    "quantization": Vocabulary(VLLM_VERSION, VLLM_ASCEND_QUANTIZATION_METHODS),
}
SGLANG_VOCABULARY: Mapping[str, Vocabulary] = {
    "attention_backend": Vocabulary(SGLANG_VERSION, SGLANG_ATTENTION_BACKENDS),
    "kv_cache_dtype": Vocabulary(SGLANG_VERSION, SGLANG_KV_CACHE_DTYPES, SGLANG_KV_CACHE_HINTS),
    "quantization": Vocabulary(SGLANG_VERSION, SGLANG_QUANTIZATION_METHODS),
    "speculative_config": Vocabulary(SGLANG_VERSION, SGLANG_SPECULATIVE_ALGORITHMS),
}
TRTLLM_VOCABULARY: Mapping[str, Vocabulary] = {
    "attention_backend": Vocabulary(TRTLLM_VERSION, TRTLLM_ATTENTION_BACKENDS, case_sensitive=False),
    "kv_cache_dtype": Vocabulary(TRTLLM_VERSION, TRTLLM_KV_CACHE_DTYPES),
    "speculative_config": Vocabulary(TRTLLM_VERSION, TRTLLM_SPECULATIVE_METHODS),
}
