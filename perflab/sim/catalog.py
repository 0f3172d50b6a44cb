"""Model architectures the simulator knows, read from a model id or path.

:func:`resolve_model` turns ``Qwen/Qwen3-30B-A3B-FP8`` or ``/models/Qwen3-14B`` into a
:class:`ModelSpec`: the architecture (layers, hidden size, attention and KV heads, experts) from the
catalogue below, and the weight format from the quantization suffix (``-FP8``, ``-AWQ``, ``-W8A8``,
``-GPTQ-Int4``, ``-Int8``…). An id missing from the catalogue but naming its size (``Foo-7B``,
``Bar-45B-A5B``) gets an architecture estimated from the parameter counts; a local directory with
a Hugging Face ``config.json`` is read directly. Anything else is unknown: the engine shims then fail
the way an engine fails on a hub id that does not exist.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Dict, Optional, Tuple


class ModelArch:
    """The shape of a transformer, enough to cost its compute, weights and KV cache."""

    def __init__(
        self,
        architecture: str,
        params_b: float,
        active_params_b: float,
        layers: int,
        hidden: int,
        heads: int,
        kv_heads: int,
        head_dim: int = 128,
        intermediate: int = 0,
        experts: int = 0,
        experts_per_token: int = 0,
        moe_intermediate: int = 0,
        attention_every: int = 1,
        kv_dim_per_layer: int = 0,
        max_position: int = 40960,
        vocab: int = 151936,
        estimated: bool = False,
        state_elements: int = 0,
        conv_state_elements: int = 0,
        ssm_state_bytes: int = 0,
    ) -> None:
        self.architecture = architecture
        self.params_b = params_b
        self.active_params_b = active_params_b
        self.layers = layers
        self.hidden = hidden
        self.heads = heads
        self.kv_heads = kv_heads
        self.head_dim = head_dim
        self.intermediate = intermediate
        self.experts = experts
        self.experts_per_token = experts_per_token
        self.moe_intermediate = moe_intermediate
        self.attention_every = attention_every
        self.kv_dim_per_layer = kv_dim_per_layer
        self.max_position = max_position
        self.vocab = vocab
        self.estimated = estimated
        # Fixed recurrent state per sequence (elements, all linear-attention layers): hybrid models
        # read and rewrite it every decode step and hold it while the sequence runs. The temporal
        # (SSM) state's element size is the config's ``mamba_ssm_dtype`` (0: the config names none);
        # the convolution state is kept in 16 bits.
        self.state_elements = state_elements
        self.conv_state_elements = conv_state_elements
        self.ssm_state_bytes = ssm_state_bytes

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def attention_layers(self) -> int:
        """Layers holding a growing KV cache (hybrid models keep a fixed state in the others)."""
        return max(1, self.layers // self.attention_every)

    @property
    def expert_params(self) -> float:
        """Parameters in routed experts (all of them)."""
        return 3.0 * self.layers * self.experts * self.hidden * self.moe_intermediate if self.is_moe else 0.0

    @property
    def embedding_params(self) -> float:
        return 2.0 * self.vocab * self.hidden

    def kv_elements_per_token(self) -> int:
        """K and V elements one token adds to the cache across all attention layers (no TP split)."""
        if self.kv_dim_per_layer:
            return self.attention_layers * self.kv_dim_per_layer
        return 2 * self.attention_layers * self.kv_heads * self.head_dim


def _dense(
    arch: str,
    params: float,
    layers: int,
    hidden: int,
    heads: int,
    kv: int,
    inter: int,
    max_position: int,
    vocab: int,
) -> ModelArch:
    return ModelArch(
        arch, params, params, layers, hidden, heads, kv, 128, inter, max_position=max_position, vocab=vocab
    )


def _qwen3(params: float, layers: int, hidden: int, heads: int, inter: int) -> ModelArch:
    return _dense("Qwen3ForCausalLM", params, layers, hidden, heads, 8, inter, 40960, 151936)


def _qwen2(params: float, layers: int, hidden: int, heads: int, kv: int, inter: int) -> ModelArch:
    return _dense("Qwen2ForCausalLM", params, layers, hidden, heads, kv, inter, 32768, 152064)


def _llama(params: float, layers: int, hidden: int, heads: int, inter: int) -> ModelArch:
    return _dense("LlamaForCausalLM", params, layers, hidden, heads, 8, inter, 131072, 128256)


def _qwen3_moe(
    params: float, active: float, layers: int, hidden: int, heads: int, moe_inter: int
) -> ModelArch:
    return ModelArch(
        "Qwen3MoeForCausalLM", params, active, layers, hidden, heads, 4, 128, 0, 128, 8, moe_inter
    )


def _hybrid_moe(
    arch: str, params: float, active: float, experts: int, per_token: int, vocab: int, ssm_bytes: int
) -> ModelArch:
    """Qwen3-Next-style: 48/40 layers, hidden 2048, ~3B active, a growing KV cache in one layer of four;
    the other three are Gated DeltaNet layers, each with a 32 value heads × 128 × 128 state per sequence
    (``linear_num_value_heads``, ``linear_key_head_dim``, ``linear_value_head_dim`` of their configs) and
    a convolution state of (``linear_conv_kernel_dim`` − 1 = 3) × 8192 channels (2 × 16 key heads × 128
    + 32 value heads × 128). ``ssm_bytes``: the config's ``mamba_ssm_dtype`` (Qwen3.5: float32)."""
    layers = 48 if experts == 512 else 40
    linear_layers = layers - layers // 4
    return ModelArch(
        arch,
        params,
        active,
        layers,
        2048,
        16,
        2,
        256,
        0,
        experts,
        per_token,
        512,
        attention_every=4,
        max_position=262144,
        vocab=vocab,
        state_elements=linear_layers * 32 * 128 * 128,
        conv_state_elements=linear_layers * 3 * 8192,
        ssm_state_bytes=ssm_bytes,
    )


def _deepseek_v3() -> ModelArch:
    """671B/37B MoE with multi-head latent attention: one 576-element latent per token per layer."""
    # fmt: off
    return ModelArch("DeepseekV3ForCausalLM", 671.0, 37.0, 61, 7168, 128, 128, 128, 18432, 256, 8, 2048,
                     kv_dim_per_layer=576, max_position=163840, vocab=129280)
    # fmt: on


# Canonical lower-case base names (org prefix, "-Instruct"/"-2507"/quant suffixes removed).
CATALOG: Dict[str, ModelArch] = {
    "qwen3-0.6b": _qwen3(0.6, 28, 1024, 16, 3072),
    "qwen3-1.7b": _qwen3(1.7, 28, 2048, 16, 6144),
    "qwen3-4b": _qwen3(4.0, 36, 2560, 32, 9728),
    "qwen3-8b": _qwen3(8.2, 36, 4096, 32, 12288),
    "qwen3-14b": _qwen3(14.8, 40, 5120, 40, 17408),
    "qwen3-32b": _qwen3(32.8, 64, 5120, 64, 25600),
    "qwen3-30b-a3b": _qwen3_moe(30.5, 3.3, 48, 2048, 32, 768),
    "qwen3-235b-a22b": _qwen3_moe(235.1, 22.2, 94, 4096, 64, 1536),
    "qwen3-next-80b-a3b": _hybrid_moe("Qwen3NextForCausalLM", 80.0, 3.0, 512, 10, 151936, 0),
    # Counted from its config (as AIConfigurator 0.12.0 ships it, model_configs/
    # Qwen--Qwen3.5-35B-A3B_config.json): routed experts 32.21B (40 × 256 × 3 × 2048 × 512), untied
    # embeddings 1.02B, the rest 1.43B (30 Gated DeltaNet layers of 33.7M: in_proj_qkvz 2048 × 12288,
    # in_proj_ba, out_proj 4096 × 2048; 10 gated-attention layers of 27.3M: q_proj with its output gate
    # 2048 × 8192, k/v 2048 × 512, o_proj 4096 × 2048; shared experts and routers); active = the rest +
    # 8 of 256 experts + embeddings. The MTP layer is loaded only for speculative decoding.
    "qwen3.5-35b-a3b": _hybrid_moe("Qwen3_5MoeForConditionalGeneration", 34.66, 3.46, 256, 8, 248320, 4),
    "qwen2.5-7b": _qwen2(7.6, 28, 3584, 28, 4, 18944),
    "qwen2.5-14b": _qwen2(14.7, 48, 5120, 40, 8, 13824),
    "qwen2.5-32b": _qwen2(32.8, 64, 5120, 40, 8, 27648),
    "qwen2.5-72b": _qwen2(72.7, 80, 8192, 64, 8, 29568),
    "llama-3.1-8b": _llama(8.0, 32, 4096, 32, 14336),
    "llama-3.1-70b": _llama(70.6, 80, 8192, 64, 28672),
    "mistral-7b": _dense("MistralForCausalLM", 7.2, 32, 4096, 32, 8, 14336, 32768, 32768),
    "deepseek-v3": _deepseek_v3(),
}
# Other names of catalogued architectures.
ALIASES = {
    "qwen3-coder-30b-a3b": "qwen3-30b-a3b",
    "llama-3.3-70b": "llama-3.1-70b",
    "meta-llama-3.1-8b": "llama-3.1-8b",
    "meta-llama-3.1-70b": "llama-3.1-70b",
    "deepseek-r1": "deepseek-v3",
}

# Quantization suffixes: (suffix, weight format). Checked longest first.
QUANT_SUFFIXES: Tuple[Tuple[str, str], ...] = (
    ("-gptq-int4", "int4"),
    ("-gptq-int8", "int8"),
    ("-fp8-dynamic", "fp8"),
    ("-fp8", "fp8"),
    ("-awq", "int4"),
    ("-w8a8", "w8a8"),
    ("-w4a16", "int4"),
    ("-int4", "int4"),
    ("-int8", "int8"),
    ("-mxfp4", "int4"),
    ("-nvfp4", "int4"),
)
# Bytes per weight of each format (scales included).
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.02, "w8a8": 1.02, "int8": 1.02, "int4": 0.56}
_DROPPED_SUFFIX_RE = re.compile(r"-(instruct|thinking|chat|base|hf|it|\d{4})$")
_SIZE_RE = re.compile(r"(\d+(?:\.\d+)?)b(?:-a(\d+(?:\.\d+)?)b)?(?![a-z0-9])")


class ModelSpec:
    """A resolved model: architecture plus the weight format of this id."""

    def __init__(self, model_id: str, arch: ModelArch, weight_format: str, base_name: str) -> None:
        self.model_id = model_id
        self.arch = arch
        self.weight_format = weight_format
        self.base_name = base_name


def _strip_name(model_id: str) -> Tuple[str, str]:
    """``(base name, weight format)`` of a model id or path."""
    name = model_id.rstrip("/").split("/")[-1].lower()
    weight_format = "bf16"
    for suffix, fmt in QUANT_SUFFIXES:
        if name.endswith(suffix) or f"{suffix}-" in name:
            weight_format = fmt
            name = name.replace(suffix, "", 1)
            break
    while True:
        shorter = _DROPPED_SUFFIX_RE.sub("", name)
        if shorter == name:
            return name, weight_format
        name = shorter


def _estimate(params_b: float, active_b: Optional[float]) -> ModelArch:
    """A plausible architecture for an unlisted model of known size (dense or MoE)."""
    active = active_b or params_b
    layers = max(16, int(round(14 * active**0.3 / 4.0)) * 4)
    hidden = int(round(math.sqrt(active * 1e9 / (12.0 * layers)) / 256.0)) * 256 or 1024
    heads = max(8, hidden // 128)
    if active_b is None:
        return ModelArch(
            "EstimatedForCausalLM",
            params_b,
            params_b,
            layers,
            hidden,
            heads,
            8,
            128,
            int(hidden * 2.7),
            estimated=True,
        )
    experts, per_token = 128, 8
    moe_inter = max(128, int((params_b - active_b) * 1e9 / (3.0 * layers * hidden * (experts - per_token))))
    return ModelArch(
        "EstimatedMoeForCausalLM",
        params_b,
        active_b,
        layers,
        hidden,
        heads,
        4,
        128,
        0,
        experts,
        per_token,
        moe_inter,
        estimated=True,
    )


def _from_hf_config(path: str, default_name: str) -> Optional[ModelArch]:
    config_path = os.path.join(path, "config.json")
    if not os.path.isfile(config_path):
        return None
    try:
        with open(config_path, encoding="utf-8") as handle:
            cfg = json.load(handle)
        hidden = int(cfg["hidden_size"])
        layers = int(cfg["num_hidden_layers"])
        heads = int(cfg["num_attention_heads"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    vocab = int(cfg.get("vocab_size") or 32000)
    inter = int(cfg.get("intermediate_size") or 4 * hidden)
    experts = int(cfg.get("num_experts") or cfg.get("n_routed_experts") or cfg.get("num_local_experts") or 0)
    per_token = int(cfg.get("num_experts_per_tok") or 0)
    moe_inter = int(cfg.get("moe_intermediate_size") or (inter if experts else 0))
    attn = layers * hidden * head_dim * (2 * heads + 2 * kv_heads)
    if experts:
        ffn_total = 3.0 * layers * experts * hidden * moe_inter
        ffn_active = 3.0 * layers * per_token * hidden * moe_inter
    else:
        ffn_total = ffn_active = 3.0 * layers * hidden * inter
    embed = 2.0 * vocab * hidden
    architectures = cfg.get("architectures") or [default_name]
    return ModelArch(
        str(architectures[0]),
        (attn + ffn_total + embed) / 1e9,
        (attn + ffn_active + embed) / 1e9,
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim,
        0 if experts else inter,
        experts,
        per_token,
        moe_inter,
        max_position=int(cfg.get("max_position_embeddings") or 32768),
        vocab=vocab,
    )


def catalogued(model_id: str) -> Optional[ModelArch]:
    """The architecture the catalogue lists for ``model_id`` (a hub id, its quantized variants
    included), or None: no local directory is read and nothing is estimated from the name."""
    base, _ = _strip_name(model_id)
    return CATALOG.get(ALIASES.get(base, base))


def resolve_model(model_id: str) -> Optional[ModelSpec]:
    """The :class:`ModelSpec` of an id or path, or None when the simulator cannot know the model."""
    base, weight_format = _strip_name(model_id)
    arch = _from_hf_config(model_id, base) if os.path.isdir(model_id) else None
    if arch is None:
        arch = catalogued(model_id)
    if arch is None:
        matches = list(_SIZE_RE.finditer(base))
        if not matches:
            return None
        match = matches[-1]
        params = float(match.group(1))
        active = float(match.group(2)) if match.group(2) else None
        arch = _estimate(params, active)
    return ModelSpec(model_id, arch, weight_format, base)
