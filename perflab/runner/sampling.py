"""The time series stored with a run while it benchmarks: engine gauges, accelerator load and power,
energy counters.

A :class:`Sampler` thread wakes every ``interval_s`` seconds and stores, as ``runsample`` rows:

- ``engine`` (one per replica): running and waiting requests (summed over label sets) and KV-cache
  usage (their mean, a fraction in [0, 1]) from the adapter's Prometheus gauges;
- ``accelerator`` (one per GPU of the run): ``utilization_pct``, ``memory_used_mib``,
  ``memory_total_mib``, ``power_w``, ``sm_clock_mhz`` and ``temperature_c`` from
  ``nvidia-smi --query-gpu`` (``nvidia.SAMPLE_FIELDS``: ``power.draw.average``, else ``power.draw`` on
  drivers without it) or ``npu-smi info`` (its Power(W) and Temp(C); no clock), None where the tool has
  no value; plus ``energy_mj``, NVML's cumulative counter, where the host's Python has NVML bindings;
- ``rapl`` (one per CPU package of a CPU host whose RAPL counters are readable): ``package``,
  ``energy_uj`` and ``max_energy_range_uj`` (:mod:`perflab.runner.energy`).

``t_s`` counts seconds from the sampler's start, taken for each sample when it was read: the middle of
the scrape or command that read it (a round's queries follow each other, and over SSH each can take a
second under load, so a time taken once for the round would place later readings too early). An NVML
counter, read by its own command, carries its own time, ``energy_t_s``. A failed scrape or query (no
answer, a command that hangs past its timeout, a connection that drops) skips that reading only: the
round keeps what the others read, and the sampler never stops the run. The first failure of each kind of
reading is logged with its reason (a run whose charts stay empty says why in its worker's log). A host
whose Python has no NVML bindings, or whose RAPL counters cannot be read, is asked once and then no
more.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy.exc import SQLAlchemyError

from perflab.engines import EngineAdapter
from perflab.probe import ascend, nvidia
from perflab.probe.models import Accelerator
from perflab.runner import energy
from perflab.runner.endpoints import Endpoints, NoAnswer
from perflab.runner.launch import Replica
from perflab.runner.prometheus import gauge_values
from perflab.runner.store import RunStore
from perflab.transport.base import CommandResult, Transport
from perflab.transport.errors import CommandTimeout, TransportError

SMI_TIMEOUT_S = 15.0
# What a reading may raise on a loaded or flaky host: each loses that reading, not the round.
READ_ERRORS = (TransportError, ValueError, OSError, NoAnswer)
T = TypeVar("T")
logger = logging.getLogger(__name__)


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


class AcceleratorQuery:
    """The host's accelerators now (load, memory, power, clock, temperature) through nvidia-smi or
    npu-smi, remembering whether this host's nvidia-smi knows ``power.draw.average``; none for the NUMA
    nodes of a CPU host (their memory is the host's, shared with every process)."""

    def __init__(self, transport: Transport, vendor: str) -> None:
        self.transport = transport
        self.vendor = vendor
        self.fields = nvidia.SAMPLE_FIELDS

    def __call__(self) -> list[Accelerator]:
        if self.vendor == "cpu":
            return []
        if self.vendor == "ascend":
            result = self.transport.run(ascend.INFO_ARGV, timeout=SMI_TIMEOUT_S)
            return ascend.parse_info(result.stdout) if result.ok else []
        result = self.transport.run(nvidia.query_argv(self.fields), timeout=SMI_TIMEOUT_S)
        if not result.ok and nvidia.rejects_field(result.stdout + result.stderr, "power.draw.average"):
            self.fields = nvidia.SAMPLE_FIELDS_FALLBACK
            result = self.transport.run(nvidia.query_argv(self.fields), timeout=SMI_TIMEOUT_S)
        return nvidia.parse_query_csv(result.stdout) if result.ok else []


class EnergyCounters:
    """NVML's per-GPU energy counters (NVIDIA hosts) and RAPL packages (CPU hosts), each given up after
    the first answer that says the host cannot provide them."""

    def __init__(self, transport: Transport, vendor: str) -> None:
        self.transport = transport
        self.nvml = vendor == "nvidia"
        self.rapl = vendor == "cpu"

    def _ask(self, argv: list[str]) -> CommandResult | None:
        """The command's result; None when it hung (a counter that hangs once is not asked again, so
        it never holds up the accelerator samples)."""
        try:
            return self.transport.run(argv, timeout=SMI_TIMEOUT_S)
        except CommandTimeout:
            return None

    def gpu_energy_mj(self) -> dict[int, int]:
        if not self.nvml:
            return {}
        result = self._ask(energy.nvml_argv(self.transport.host.python))
        counters = energy.parse_nvml(result.stdout) if result is not None and result.ok else None
        if not counters:
            self.nvml = False
        return counters or {}

    def rapl_packages(self) -> list[dict[str, int | None]]:
        if not self.rapl:
            return []
        result = self._ask(energy.rapl_argv())
        packages = energy.parse_rapl(result.stdout) if result is not None and result.ok else []
        if not packages:
            self.rapl = False
        return packages


def accelerator_values(acc: Accelerator, energy_mj: int | None) -> dict[str, Any]:
    """The ``values`` of one ``accelerator`` sample (the telemetry contract the energy figures read)."""
    values: dict[str, Any] = {
        "gpu": acc.index,
        "utilization_pct": acc.utilization_pct,
        "memory_used_mib": acc.memory_used_mib,
        "memory_total_mib": acc.memory_total_mib,
        "power_w": acc.power_w,
        "sm_clock_mhz": acc.sm_clock_mhz,
        "temperature_c": acc.temperature_c,
    }
    if energy_mj is not None:
        values["energy_mj"] = energy_mj
    return values


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
        self.accelerators = AcceleratorQuery(transport, vendor)
        self.counters = EnergyCounters(transport, vendor)
        self._stop = threading.Event()
        self._failed: set[str] = set()
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
            # A round the database does not take is skipped; the next one samples again. Whatever else
            # a round raises is logged (the first time), and sampling goes on: telemetry never ends the run.
            try:
                with contextlib.suppress(SQLAlchemyError, *READ_ERRORS):
                    self.store.add_samples(self.take())
            except Exception as exc:
                self._first_failure("a sampling round", exc, with_traceback=True)
            self._stop.wait(self.interval_s)

    def _first_failure(self, what: str, error: BaseException, *, with_traceback: bool = False) -> None:
        """Log why ``what`` failed, the first time it does in this run."""
        if what in self._failed:
            return
        self._failed.add(what)
        logger.warning(
            "run %s: %s failed (%s); the sampler tries again each round",
            self.store.run_id,
            what,
            str(error) or type(error).__name__,
            exc_info=error if with_traceback else None,
        )

    def _read(self, what: str, read: Callable[[], T], failed: T) -> tuple[T, float]:
        """What ``read`` returns (``failed`` where it raised: that reading alone is lost, and the first
        loss of ``what`` is logged), and when: the middle of the call on the samples' clock."""
        before = self.elapsed()
        try:
            value = read()
        except READ_ERRORS as exc:
            value = failed
            self._first_failure(what, exc)
        return value, round((before + self.elapsed()) / 2.0, 3)

    def take(self) -> list[dict[str, Any]]:
        """One round of samples (engine gauges of every replica, each GPU of the run, CPU packages),
        each stamped when it was read."""
        samples: list[dict[str, Any]] = []
        for replica in self.replicas:
            text, t_s = self._read(
                f"reading replica {replica.plan.index}'s engine metrics",
                lambda replica=replica: self.endpoints.metrics_text(replica),
                None,
            )
            values = engine_values(self.adapter, text) if text is not None else None
            if values is not None:
                samples.append(
                    {"t_s": t_s, "source": "engine", "values": {"replica": replica.plan.index, **values}}
                )
        accelerators, t_s = self._read("reading the accelerators' load", self.accelerators, [])
        found = [acc for acc in accelerators if acc.index in self.gpu_ids]
        energy_mj, energy_t_s = (
            self._read("reading the GPUs' energy", self.counters.gpu_energy_mj, {}) if found else ({}, t_s)
        )
        for acc in found:
            values = accelerator_values(acc, energy_mj.get(acc.index))
            if "energy_mj" in values:
                values["energy_t_s"] = energy_t_s
            samples.append({"t_s": t_s, "source": "accelerator", "values": values})
        packages, t_s = self._read("reading the CPU packages' energy", self.counters.rapl_packages, [])
        for package in packages:
            samples.append({"t_s": t_s, "source": "rapl", "values": package})
        return samples
