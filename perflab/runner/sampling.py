"""The time series stored with a run while it benchmarks: engine gauges and accelerator load.

A :class:`Sampler` thread wakes every ``interval_s`` seconds and stores, as ``runsample`` rows:

- ``engine`` (one per replica): running and waiting requests (summed over label sets) and KV-cache
  usage (their mean, a fraction in [0, 1]) from the adapter's Prometheus gauges;
- ``accelerator`` (one per GPU of the run): utilisation % and memory used/total MiB, from
  ``nvidia-smi --query-gpu`` or ``npu-smi info`` run on the host.

``t_s`` counts seconds from the sampler's start. A failed scrape or query skips that sample; the
sampler never stops the run.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from perflab.engines import EngineAdapter
from perflab.probe import ascend, nvidia
from perflab.probe.models import Accelerator
from perflab.runner.endpoints import Endpoints
from perflab.runner.launch import Replica
from perflab.runner.prometheus import gauge_values
from perflab.runner.store import RunStore
from perflab.transport.base import Transport
from perflab.transport.errors import TransportError

SMI_TIMEOUT_S = 15.0
NVIDIA_SAMPLE_FIELDS = ("index", "name", "utilization.gpu", "memory.used", "memory.total")


def engine_values(adapter: EngineAdapter, metrics_text: str) -> dict[str, float] | None:
    """Running, waiting and KV-cache usage from one replica's metrics (None if none was exposed)."""
    if adapter.metrics is None:
        return None
    names = adapter.metrics
    found = gauge_values(metrics_text, (names.running, names.waiting, names.kv_cache_usage))
    if not found:
        return None
    values: dict[str, float] = {}
    if names.running in found:
        values["running"] = sum(found[names.running])
    if names.waiting in found:
        values["waiting"] = sum(found[names.waiting])
    if names.kv_cache_usage in found:
        usage = found[names.kv_cache_usage]
        values["kv_cache_usage"] = sum(usage) / len(usage)
    return values


def query_accelerators(transport: Transport, vendor: str) -> list[Accelerator]:
    """The host's accelerators now (utilisation and memory), through nvidia-smi or npu-smi; none for the
    NUMA nodes of a CPU host (their memory is the host's, shared with every process)."""
    if vendor == "cpu":
        return []
    if vendor == "ascend":
        result = transport.run(ascend.INFO_ARGV, timeout=SMI_TIMEOUT_S)
        return ascend.parse_info(result.stdout) if result.ok else []
    result = transport.run(nvidia.query_argv(NVIDIA_SAMPLE_FIELDS), timeout=SMI_TIMEOUT_S)
    return nvidia.parse_query_csv(result.stdout) if result.ok else []


class Sampler:
    """Background sampling of one run; use as a context manager around the benchmarks."""

    def __init__(
        self,
        *,
        transport: Transport,
        adapter: EngineAdapter,
        endpoints: Endpoints,
        replicas: Sequence[Replica],
        gpu_ids: Sequence[int],
        vendor: str,
        store: RunStore,
        interval_s: float,
    ) -> None:
        self.transport = transport
        self.adapter = adapter
        self.endpoints = endpoints
        self.replicas = list(replicas)
        self.gpu_ids = set(gpu_ids)
        self.vendor = vendor
        self.store = store
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"sampler-run-{store.run_id}", daemon=True)
        self._started = 0.0

    def __enter__(self) -> Sampler:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=SMI_TIMEOUT_S + 5)

    def elapsed(self) -> float:
        """Seconds since the sampler started: the clock of its samples' ``t_s``."""
        return time.monotonic() - self._started

    def _loop(self) -> None:
        while not self._stop.is_set():
            # A round that fails is skipped; the next one samples again.
            with contextlib.suppress(TransportError, SQLAlchemyError, ValueError, OSError):
                self.store.add_samples(self.take())
            self._stop.wait(self.interval_s)

    def take(self) -> list[dict[str, Any]]:
        """One round of samples (engine gauges of every replica, then each GPU of the run)."""
        t_s = round(self.elapsed(), 3)
        samples: list[dict[str, Any]] = []
        for replica in self.replicas:
            text = self.endpoints.metrics_text(replica)
            values = engine_values(self.adapter, text) if text is not None else None
            if values is not None:
                samples.append(
                    {"t_s": t_s, "source": "engine", "values": {"replica": replica.plan.index, **values}}
                )
        for acc in query_accelerators(self.transport, self.vendor):
            if acc.index in self.gpu_ids:
                values = {
                    "gpu": acc.index,
                    "utilization_pct": acc.utilization_pct,
                    "memory_used_mib": acc.memory_used_mib,
                    "memory_total_mib": acc.memory_total_mib,
                }
                samples.append({"t_s": t_s, "source": "accelerator", "values": values})
        return samples
