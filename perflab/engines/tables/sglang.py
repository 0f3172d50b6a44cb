"""SGLang's one-word knob values and flag changes for 0.5.22 and 0.5.23, read from the PyPI wheels' source.

Read with ``pip download --no-deps sglang==0.5.22`` / ``sglang==0.5.23`` (never installed):
``sglang/srt/arg_groups/choices.py`` ``ATTENTION_BACKEND_CHOICES`` and ``QUANTIZATION_CHOICES``,
``sglang/srt/arg_groups/fields/model.py`` (the ``--kv-cache-dtype`` choices),
``sglang/srt/speculative/spec_info.py`` ``SpeculativeAlgorithm`` (its members but NONE, which
``--speculative-algorithm`` takes in any case, and the NEXTN alias) and ``sglang/srt/arg_groups/fields``
for the flags.

0.5.23 against 0.5.22: the same values (0.5.23 marks ``tokenspeed_mla`` a deprecated alias of
``cutedsl_mla``; both list neither ``fp4_e2m1``, whose FP4 recipes are ``nvfp4`` and ``fp4_mx_block16``);
``--speculative-skip-dp-mlp-sync`` (a switch of 0.5.22's ``fields/spec.py``) removed. perflab writes
vLLM's ``fp8`` KV-cache dtype as ``fp8_e4m3``.
"""

from __future__ import annotations

from perflab.engines.vocabulary import EngineReleases, Release, Vocabulary

SGLANG_0_5_22 = Release(
    "0.5.22",
    {
        "attention_backend": (
            "triton", "torch_native", "flex_attention", "dsa", "nsa", "qsa", "dsv4", "compressed", "fa3",
            "fa4", "flashinfer", "llada2_cfg_flashinfer", "flashmla", "trtllm_mla", "cutedsl_mla",
            "tokenspeed_mla", "trtllm_mha", "hpc_ops", "minicpm_flashattn", "minicpm_flashinfer", "aiter",
            "wave", "intel_amx", "ascend", "intel_xpu",
        ),
        "kv_cache_dtype": (
            "auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16",
        ),
        "quantization": (
            "awq", "fp8", "mxfp8", "gptq", "gptq_marlin", "awq_marlin", "bitsandbytes", "gguf", "modelopt",
            "modelopt_fp8", "modelopt_fp4", "nvfp4_online", "modelopt_mixed", "petit_nvfp4", "w8a8_int8",
            "w8a8_fp8", "moe_wna16", "w4afp8", "mxfp4", "auto-round", "auto-round-int8", "compressed-tensors",
            "modelslim", "mxfp_w4a8", "quark", "quark_int4fp8_moe", "quark_mxfp4", "mlx_q4", "mlx_q8",
            "unquant", "humming",
        ),
        "speculative_config": (
            "EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO", "FROZEN_KV_MTP",
        ),
    },
)  # fmt: skip
SGLANG_0_5_23 = SGLANG_0_5_22.next("0.5.23", flags_removed={"--speculative-skip-dp-mlp-sync": False})

SGLANG_RELEASES = EngineReleases(
    "SGLang",
    (SGLANG_0_5_22, SGLANG_0_5_23),
    styles={"kv_cache_dtype": Vocabulary("", (), {"fp4_e2m1": "nvfp4 or fp4_mx_block16"})},
)
