"""Prefill/decode disaggregation as part of one engine configuration.

A disaggregated configuration serves one model with two groups of engine processes behind a router:
prefill workers compute prompts and hand their KV cache over a transfer backend (Mooncake, NIXL, …)
to decode workers, which stream the tokens. :class:`Disaggregation` is the ``disaggregation`` field of
:class:`~perflab.engines.config.EngineConfig`: each :class:`WorkerGroup` has its own worker count,
parallelism and batching knobs, on top of the configuration's other knobs, which both sides share.
Its accelerators are the sum of both groups' (``P + D``), counted per accelerator as every other
configuration. How each engine launches it (flags, router) is :mod:`perflab.engines.disagg`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_COUNT = 2**31 - 1
ROLES: tuple[str, ...] = ("prefill", "decode")
Role = Literal["prefill", "decode"]


class WorkerGroup(BaseModel):
    """The workers of one role: how many, each one's parallelism and its own batching knobs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workers: int = Field(1, ge=1, le=64, description="engine processes of this role")
    tp: int = Field(1, ge=1, le=64, description="tensor parallel size of each worker")
    dp: int = Field(1, ge=1, le=64, description="data parallel size of each worker")
    ep: int = Field(1, ge=1, le=64, description="expert parallel size of each worker (1 = off)")
    max_num_seqs: int | None = Field(None, ge=1, le=MAX_COUNT)
    max_num_batched_tokens: int | None = Field(None, ge=1, le=MAX_COUNT)

    @property
    def gpus_per_worker(self) -> int:
        return self.tp * self.dp

    @property
    def gpus(self) -> int:
        return self.workers * self.gpus_per_worker

    def shape(self) -> str:
        """``TP2`` (with ``DP2`` and ``EP4`` where set), the parallelism of one worker."""
        words = [f"TP{self.tp}"]
        if self.dp > 1:
            words.append(f"DP{self.dp}")
        if self.ep > 1:
            words.append(f"EP{self.ep}")
        return " ".join(words)


class Disaggregation(BaseModel):
    """Prefill and decode worker groups and the KV transfer backend between them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prefill: WorkerGroup = Field(default_factory=WorkerGroup)
    decode: WorkerGroup = Field(default_factory=WorkerGroup)
    transfer_backend: str = Field(
        "nixl", description="KV transfer backend (SGLang: mooncake, nixl, …; vLLM: nixl, mooncake)"
    )

    @field_validator("transfer_backend")
    @classmethod
    def _backend_is_a_word(cls, value: str) -> str:
        word = value.strip()
        if not word or not word.replace("_", "").replace("-", "").isalnum() or len(word) > 32:
            raise ValueError(f"transfer_backend must be one word of letters, digits, - or _, got {value!r}")
        return word

    def group(self, role: str) -> WorkerGroup:
        return self.prefill if role == "prefill" else self.decode

    @property
    def gpus(self) -> int:
        """Accelerators of both groups: P + D."""
        return self.prefill.gpus + self.decode.gpus

    def label(self) -> str:
        """``3P1D`` with each side's parallelism: ``3P1D (P TP2, D TP2)``."""
        return (
            f"{self.prefill.workers}P{self.decode.workers}D "
            f"(P {self.prefill.shape()}, D {self.decode.shape()})"
        )
