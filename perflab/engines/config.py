"""The engine configuration model: one typed description of how to serve a model.

Every adapter in :mod:`perflab.engines` turns an :class:`EngineConfig` into its engine's real argv; the
runner, the database, studies and the UI all pass this model around. A knob left at ``None`` means
"the engine's default" and produces no flag.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from perflab.containers.image import check_image
from perflab.engines.layout import Disaggregation

EngineName = Literal["vllm", "sglang", "trtllm", "mindie", "vllm-ascend"]

ENGINE_NAMES: tuple[str, ...] = ("vllm", "sglang", "trtllm", "mindie", "vllm-ascend")
# Engines read token and sequence counts into 32-bit integers; anything larger is a typo.
MAX_COUNT = 2**31 - 1

# Typed knobs an adapter may or may not support; the order is the order flags are rendered in.
KNOBS: tuple[str, ...] = (
    "tp",
    "dp",
    "ep",
    "quantization",
    "attention_backend",
    "max_num_batched_tokens",
    "max_num_seqs",
    "enable_prefix_caching",
    "kv_cache_dtype",
    "enable_chunked_prefill",
    "speculative_config",
    "performance_mode",
    "max_model_len",
    "gpu_memory_utilization",
    "reasoning_parser",
    "cpu_kvcache_space_gib",
    "cpu_omp_threads_bind",
    "cpu_reserved_cores",
)
# Knobs of CPU backends, carried by environment variables (see EngineAdapter.env_knobs).
CPU_KNOBS: tuple[str, ...] = ("cpu_kvcache_space_gib", "cpu_omp_threads_bind", "cpu_reserved_cores")


def refuse_flag_like(field: str, value: str) -> str:
    """``value`` unchanged unless it starts with ``-``: a name that an engine's argument parser would read
    as a flag (``--trust-remote-code``, ``-h``) is refused; flags belong in ``extra_args``, where they
    are visible as flags."""
    if value.startswith("-"):
        raise ValueError(f"{field} {value!r} starts with '-'; a name cannot look like a flag")
    return value


class EngineConfig(BaseModel):
    """One serving configuration of one engine for one model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: EngineName
    model: str = Field(min_length=1, description="hub id or path; quantized variants are other ids")
    served_model_name: str | None = None
    tp: int = Field(1, ge=1, description="tensor parallel size")
    dp: int = Field(1, ge=1, description="data parallel size")
    ep: int = Field(1, ge=1, description="expert parallel size (1 = off)")
    dp_attention: bool | None = Field(
        None,
        description="the dp ranks run attention apart and share their MoE layers (tensor parallel over "
        "tp×dp, or expert parallel with ep): SGLang --attn-dp-size (vLLM's -dp ranks of a MoE model do so "
        "by themselves, so vLLM takes dp and ep alone)",
    )
    quantization: str | None = None
    attention_backend: str | None = None
    max_num_batched_tokens: int | None = Field(None, ge=1, le=MAX_COUNT)
    max_num_seqs: int | None = Field(None, ge=1, le=MAX_COUNT)
    enable_prefix_caching: bool | None = None
    kv_cache_dtype: str | None = None
    enable_chunked_prefill: bool | None = None
    speculative_config: dict[str, Any] | None = None
    performance_mode: str | None = None
    max_model_len: int | None = Field(None, ge=1, le=MAX_COUNT)
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    reasoning_parser: str | None = None
    cpu_kvcache_space_gib: int | None = Field(None, ge=1, le=MAX_COUNT, description="CPU: KV cache GiB")
    cpu_omp_threads_bind: str | None = Field(None, description="CPU: cores of the OpenMP threads")
    cpu_reserved_cores: int | None = Field(None, ge=0, le=MAX_COUNT, description="CPU: cores left to others")
    extra_args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    gpu_ids: tuple[int, ...] | None = None
    port: int | None = Field(None, ge=1, le=65535)
    replicas: int = Field(1, ge=1)
    image: str | None = Field(None, description="container image to run the engine from (else the host's)")
    disaggregation: Disaggregation | None = Field(
        None, description="prefill and decode worker groups behind a router (else one aggregated engine)"
    )

    @field_validator("model")
    @classmethod
    def _model_is_one_line(cls, value: str) -> str:
        if any(ch in value for ch in "\r\n\0"):
            raise ValueError("model must be a single line")
        return refuse_flag_like("model", value.strip())

    @field_validator("served_model_name")
    @classmethod
    def _served_name_is_a_name(cls, value: str | None) -> str | None:
        if value is not None and any(ch in value for ch in "\r\n\0"):
            raise ValueError("served_model_name must be a single line")
        return None if value is None else refuse_flag_like("served_model_name", value)

    @field_validator("speculative_config")
    @classmethod
    def _draft_model_is_a_name(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        draft = (value or {}).get("model")
        if isinstance(draft, str):
            refuse_flag_like("speculative_config.model", draft)
        return value

    @field_validator("image")
    @classmethod
    def _image_is_a_reference(cls, value: str | None) -> str | None:
        return check_image(value) if value is not None else None

    @field_validator("gpu_ids")
    @classmethod
    def _gpu_ids_unique(cls, value: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if value is not None:
            if len(set(value)) != len(value):
                raise ValueError("gpu_ids must not repeat")
            if any(gpu < 0 for gpu in value):
                raise ValueError("gpu_ids must be >= 0")
        return value

    @model_validator(mode="after")
    def _parallelism_in_groups(self) -> EngineConfig:
        if self.disaggregation is None:
            return self
        shared = [
            f"{name}={getattr(self, name)}"
            for name in ("tp", "dp", "ep", "replicas")
            if getattr(self, name) != 1
        ]
        if shared:
            raise ValueError(
                f"a disaggregated configuration sets parallelism per group (prefill.tp, decode.workers, …), "
                f"not {', '.join(shared)}"
            )
        if self.image is not None:
            raise ValueError("a disaggregated configuration runs on the host's engine, not from an image")
        return self

    @model_validator(mode="after")
    def _gpu_ids_cover_replicas(self) -> EngineConfig:
        if self.gpu_ids is not None and len(self.gpu_ids) != self.gpus_needed:
            raise ValueError(
                f"gpu_ids lists {len(self.gpu_ids)} devices but tp×dp×replicas needs {self.gpus_needed}"
            )
        return self

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.dp

    @property
    def gpus_needed(self) -> int:
        """Accelerators of the whole configuration: every replica's, or both groups' (P + D)."""
        if self.disaggregation is not None:
            return self.disaggregation.gpus
        return self.gpus_per_replica * self.replicas

    def knob_values(self) -> dict[str, Any]:
        """The typed knobs that differ from the engine default (parallelism 1 counts as default)."""
        values = {}
        for knob in KNOBS:
            value = getattr(self, knob)
            if knob in ("tp", "dp", "ep"):
                if value != 1:
                    values[knob] = value
            elif value is not None:
                values[knob] = value
        return values

    def fingerprint(self) -> str:
        """Stable hash of everything that changes what is launched (not the port or GPU ids)."""
        payload = self.model_dump(mode="json", exclude={"port", "gpu_ids"})
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]
