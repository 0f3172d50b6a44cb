"""Replicas: one config served N times on disjoint GPU sets of one host (TP4 on 8 GPUs = 2 replicas).

Replica ``i`` gets the ``i``-th block of ``tp×dp`` GPUs and listens on ``base port + i`` (the config's port,
else the engine's default); the runner starts one engine per :class:`ReplicaPlan` (without a configured
port it moves each replica to a free port from the default port + its first GPU index upward, see
:mod:`perflab.runner.launch`) and the benchmark spreads requests over all replica URLs, as the seeds'
"3019.19×2" results do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from perflab.engines.config import EngineConfig
from perflab.engines.registry import get_adapter

MAX_PORT = 65535


class NotEnoughGpus(ValueError):
    """The host cannot give every replica its own GPUs."""


@dataclass(frozen=True)
class ReplicaPlan:
    """Where one replica runs: its index, its GPUs and its port."""

    index: int
    gpu_ids: tuple[int, ...]
    port: int


def _shape(config: EngineConfig) -> str:
    return f"TP{config.tp}×DP{config.dp} × {config.replicas} replica(s)"


def partition_gpus(config: EngineConfig, available_gpu_ids: Sequence[int]) -> list[tuple[int, ...]]:
    """Disjoint GPU blocks, one per replica: the config's ``gpu_ids`` if set, else the first free ones."""
    available = list(dict.fromkeys(available_gpu_ids))
    listed = ", ".join(str(gpu) for gpu in available) or "none"
    if config.gpu_ids is not None:
        missing = [gpu for gpu in config.gpu_ids if gpu not in available]
        if missing:
            raise NotEnoughGpus(f"gpu_ids {missing} are not available on this host (available: {listed})")
        chosen = list(config.gpu_ids)
    else:
        if len(available) < config.gpus_needed:
            raise NotEnoughGpus(
                f"{_shape(config)} needs {config.gpus_needed} GPUs; the host has {len(available)} ({listed})"
            )
        chosen = available[: config.gpus_needed]
    size = config.gpus_per_replica
    return [tuple(chosen[index * size : (index + 1) * size]) for index in range(config.replicas)]


def replica_port(config: EngineConfig, index: int) -> int:
    """The port of replica ``index``: base port + index."""
    port = (config.port or get_adapter(config.engine).default_port) + index
    if port > MAX_PORT:
        raise ValueError(
            f"replica {index} would listen on port {port}, above {MAX_PORT}; lower the base port"
        )
    return port


def replica_plans(config: EngineConfig, available_gpu_ids: Sequence[int]) -> list[ReplicaPlan]:
    """GPUs and port of every replica of ``config`` on a host with ``available_gpu_ids``."""
    blocks = partition_gpus(config, available_gpu_ids)
    return [ReplicaPlan(index, block, replica_port(config, index)) for index, block in enumerate(blocks)]
