"""The adapter for each engine name."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from perflab.engines.base import EngineAdapter
from perflab.engines.config import ENGINE_NAMES
from perflab.engines.mindie import MindieAdapter
from perflab.engines.sglang import SglangAdapter
from perflab.engines.trtllm import TrtllmAdapter
from perflab.engines.vllm import VllmAdapter, VllmAscendAdapter

ADAPTERS: Mapping[str, EngineAdapter] = MappingProxyType(
    {
        adapter.name: adapter
        for adapter in (VllmAdapter(), SglangAdapter(), TrtllmAdapter(), MindieAdapter(), VllmAscendAdapter())
    }
)

if tuple(ADAPTERS) != ENGINE_NAMES:
    raise RuntimeError(f"adapters {tuple(ADAPTERS)} do not match ENGINE_NAMES {ENGINE_NAMES}")


def display_name(engine: str) -> str:
    """``sglang`` → ``SGLang``; a name perflab has no adapter for stays as it is."""
    adapter = ADAPTERS.get(engine)
    return adapter.display_name if adapter is not None else engine


def get_adapter(name: str) -> EngineAdapter:
    """The adapter for ``name``; a KeyError names the known engines."""
    try:
        return ADAPTERS[name]
    except KeyError:
        raise KeyError(f"unknown engine {name!r}; known engines: {', '.join(ADAPTERS)}") from None
