"""A host's status for the Hosts page and the CLI: reachability, probe result, or a friendly error.

``host_status(host)`` never raises for a host problem: an unreachable host, a refused login, an
unknown host key (with its fingerprint and how to trust it) or a failure while installing a simulated
host's shims all become a :class:`HostError` beside the host's identity. Tool-level problems (a
missing nvidia-smi, an old Python) are in ``probe.problems``.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

from pydantic import BaseModel, Field

from perflab.engines.registry import display_name
from perflab.inventory import HostConfig, SimulateSpec
from perflab.probe import cpu, probe_host
from perflab.probe.models import ProbeProblem, ProbeResult
from perflab.simhost import SimulatedHostError
from perflab.transport import open_transport
from perflab.transport.errors import TransportError, UnknownHostKey

_NOT_CONNECTED = ("unreachable", "auth", "host_key", "simulator")


class HostError(BaseModel):
    """Why a host could not be probed: ``kind`` is unreachable, auth, host_key, timeout, connection_lost,
    command_failed or simulator."""

    kind: str
    message: str
    hint: str | None = None
    fingerprint: str | None = None


class HostStatus(BaseModel):
    """A host's identity (from hosts.yaml) with whether it was reached, its probe, or why it failed."""

    name: str
    address: str
    transport: str
    labels: list[str] = Field(default_factory=list)
    simulated: bool
    simulate: SimulateSpec | None = None
    reachable: bool
    probe: ProbeResult | None = None
    error: HostError | None = None
    checked_at: datetime

    @classmethod
    def of(
        cls,
        host: HostConfig,
        *,
        reachable: bool,
        checked_at: datetime,
        probe: ProbeResult | None = None,
        error: HostError | None = None,
    ) -> HostStatus:
        """The status of ``host``: its name, address, transport, labels and simulation from its config."""
        return cls(
            name=host.name,
            address=host.display_address,
            transport=host.transport,
            labels=list(host.labels),
            simulated=host.simulated,
            simulate=host.simulate,
            reachable=reachable,
            checked_at=checked_at,
            probe=probe,
            error=error,
        )

    @property
    def problems(self) -> list[ProbeProblem]:
        return list(self.probe.problems) if self.probe is not None else []

    @property
    def display_name(self) -> str:
        """The host's name, marked when it is simulated."""
        return f"{self.name} (simulated)" if self.simulated else self.name

    def accelerator_summary(self) -> str:
        """E.g. ``8× NVIDIA H100 80GB HBM3`` (groups of identical models), ``CPU (AMD EPYC): 2 cores, 1
        NUMA node`` for a CPU host, or ``none``."""
        if self.probe is None or not self.probe.accelerators:
            return "none"
        if cpu.is_cpu_host(self.probe.accelerators):
            return cpu.summary(self.probe.system, self.probe.accelerators)
        counts: dict[str, int] = {}
        for accelerator in self.probe.accelerators:
            counts[accelerator.name] = counts.get(accelerator.name, 0) + 1
        return ", ".join(f"{count}× {name}" for name, count in counts.items())

    def engine_summary(self) -> str:
        """E.g. ``vLLM 0.17.1, SGLang 0.5.9``, or ``none``."""
        if self.probe is None or not self.probe.engines:
            return "none"
        return ", ".join(f"{display_name(name)} {version}" for name, version in self.probe.engines.items())


def _error(exc: TransportError | SimulatedHostError) -> HostError:
    if isinstance(exc, TransportError):
        fingerprint = exc.fingerprint if isinstance(exc, UnknownHostKey) else None
        return HostError(kind=exc.kind, message=exc.message, hint=exc.hint, fingerprint=fingerprint)
    return HostError(kind="simulator", message=str(exc))


def host_status(host: HostConfig) -> HostStatus:
    """Connect to ``host``, probe it, and describe the outcome (never raises for host problems)."""
    probe: ProbeResult | None = None
    error: HostError | None = None
    try:
        with open_transport(host) as transport:
            probe = probe_host(transport)
    except (TransportError, SimulatedHostError) as exc:
        error = _error(exc)
    return HostStatus.of(
        host,
        reachable=probe is not None or (error is not None and error.kind not in _NOT_CONNECTED),
        checked_at=datetime.now(timezone.utc),
        probe=probe,
        error=error,
    )


def host_statuses(hosts: Iterable[HostConfig], max_workers: int = 8) -> list[HostStatus]:
    """:func:`host_status` of every host, probed concurrently, in the given order."""
    host_list = list(hosts)
    if not host_list:
        return []
    with ThreadPoolExecutor(
        max_workers=min(max_workers, len(host_list)), thread_name_prefix="host-status"
    ) as pool:
        return list(pool.map(host_status, host_list))
