"""Serving engines: one config model, one adapter per engine.

``get_adapter(name)`` returns the adapter for ``vllm``, ``sglang``, ``trtllm``, ``mindie`` or
``vllm-ascend``; see :mod:`perflab.engines.base` for what an adapter provides and docs/engines.md for every
flag, port, health path, readiness line and failure signature, with their sources.
"""

from perflab.engines.base import EngineAdapter, EngineMetrics
from perflab.engines.config import ENGINE_NAMES, KNOBS, EngineConfig
from perflab.engines.errors import EngineConfigError, InvalidKnobValue, UnsupportedKnob
from perflab.engines.failures import FAILURE_CLASSES, FailureInfo, timeout_failure
from perflab.engines.parsing import (
    ServeCommandError,
    extract_serve_commands,
    parse_serve_args,
    parse_serve_command,
)
from perflab.engines.registry import ADAPTERS, get_adapter
from perflab.engines.replicas import NotEnoughGpus, ReplicaPlan, partition_gpus, replica_plans, replica_port

__all__ = [
    "ADAPTERS",
    "ENGINE_NAMES",
    "FAILURE_CLASSES",
    "KNOBS",
    "EngineAdapter",
    "EngineConfig",
    "EngineConfigError",
    "EngineMetrics",
    "FailureInfo",
    "InvalidKnobValue",
    "NotEnoughGpus",
    "ReplicaPlan",
    "ServeCommandError",
    "UnsupportedKnob",
    "extract_serve_commands",
    "get_adapter",
    "parse_serve_args",
    "parse_serve_command",
    "partition_gpus",
    "replica_plans",
    "replica_port",
    "timeout_failure",
]
