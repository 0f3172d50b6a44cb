"""TensorRT-LLM's one-word knob values, read from the repository's source of the 1.3.0 release candidates.

TensorRT-LLM's wheels are not on PyPI (it hosts a 10 kB stub source package for 1.2.1, the stable
release, and for 1.4.0rc1), so these follow NVIDIA/TensorRT-LLM's source at commit 00209af149e7 (the
1.3.0rc line, the one ``tests/data/help/trtllm-1.3.txt`` was rebuilt from): the LLM API ``attn_backend``
(``tensorrt_llm/llmapi/llm_args.py``, default TRTLLM) as
``tensorrt_llm/_torch/attention_backend/utils.py`` ``get_attention_backend`` selects it (VANILLA,
TRTLLM, FLASHINFER, FLASHINFER_STAR_ATTENTION; any case: it upper-cases the name, and falls back to
TRTLLM with a warning for any other name, which perflab refuses instead); ``KvCacheConfig.dtype``
("auto" follows the checkpoint, "fp8" the FP8 KV cache); the ``speculative_config`` decoding types
perflab maps (MTP, NGram). Neither 1.2.1 nor 1.4.0rc1 could be read to compare: the launch is checked
against the installed engine's ``trtllm-serve serve --help`` before it starts
(:mod:`perflab.engines.preflight`).
"""

from __future__ import annotations

from perflab.engines.vocabulary import EngineReleases, Release, Vocabulary

TRTLLM_1_3_RC = Release(
    "1.3.0rc",
    {
        "attention_backend": ("TRTLLM", "FLASHINFER", "VANILLA", "FLASHINFER_STAR_ATTENTION"),
        "kv_cache_dtype": ("auto", "fp8"),
        "speculative_config": ("mtp", "ngram"),
    },
)
TRTLLM_RELEASES = EngineReleases(
    "TensorRT-LLM",
    (TRTLLM_1_3_RC,),
    styles={"attention_backend": Vocabulary("", (), case_sensitive=False)},
)
