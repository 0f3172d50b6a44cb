"""The Hosts page's read model: each host of hosts.yaml with its last probe from the database and the
files its entry names on the app's machine that are missing or unreadable (:mod:`perflab.host_files`),
and re-probing a host (which stores the outcome).

A successful probe is stored as the host's ``last_probe`` (the :class:`ProbeResult` JSON that runs
read too); a failed one keeps that last good probe and stores a sentence naming the failure
(unreachable, login refused, unknown host key with its fingerprint, …) with what to do about it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import pandas as pd
from sqlmodel import Session

from db import crud
from db.models import Host, utcnow
from perflab.host_files import host_file_problems
from perflab.inventory import HostConfig, Inventory
from perflab.probe.cpu import is_cpu_host
from perflab.probe.models import ProbeProblem, ProbeResult
from perflab.probe.status import HostError, HostStatus, host_status
from perflab.redact import hosts_redactor
from perflab.views.formatting import MISSING, format_number, host_label

ERROR_TITLES: dict[str, str] = {
    "unreachable": "Unreachable",
    "auth": "Login refused",
    "host_key": "Unknown host key",
    "timeout": "Timed out",
    "connection_lost": "Connection lost",
    "command_failed": "Command failed",
    "simulator": "Simulated host could not be set up",
}


def error_text(error: HostError) -> str:
    """``Unknown host key: <message> <hint> (fingerprint SHA256:…)`` as stored and shown."""
    parts = [f"{ERROR_TITLES.get(error.kind, 'Probe failed')}: {error.message}"]
    if error.hint:
        parts.append(error.hint)
    if error.fingerprint and error.fingerprint not in error.message:
        parts.append(f"(key fingerprint {error.fingerprint})")
    return " ".join(parts)


@dataclass(frozen=True)
class HostView:
    """A configured host and what perflab last learned about it; ``file_problems``: the files its entry
    names on this machine that are missing or unreadable (checked now, without connecting)."""

    config: HostConfig
    status: HostStatus
    probed_at: datetime | None
    reachable: bool | None
    last_error: str | None
    file_problems: list[str]

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def title(self) -> str:
        """The host's name, marked when simulated."""
        return host_label(self.config.name, self.config.simulated)

    @property
    def probe(self) -> ProbeResult | None:
        return self.status.probe

    @property
    def problems(self) -> list[ProbeProblem]:
        return self.status.problems

    def reachability(self) -> str:
        """``reachable``, ``reachable, probe failed``, ``unreachable`` or ``not probed yet``."""
        if self.probed_at is None:
            return "not probed yet"
        if not self.reachable:
            return "unreachable"
        return "reachable, probe failed" if self.last_error else "reachable"


def _stored_probe(stored: Host | None) -> ProbeResult | None:
    if stored is None or not stored.last_probe:
        return None
    try:
        return ProbeResult.model_validate(stored.last_probe)
    except ValueError:
        return None


def host_view(config: HostConfig, stored: Host | None) -> HostView:
    """The page's view of one host from its config and its stored row."""
    probe = _stored_probe(stored)
    last_error = stored.last_error if stored is not None else None
    probed_at = stored.last_probe_at if stored is not None else None
    status = HostStatus.of(
        config, reachable=bool(stored and stored.reachable), checked_at=probed_at or utcnow(), probe=probe
    )
    return HostView(
        config=config,
        status=status,
        probed_at=probed_at,
        reachable=stored.reachable if stored is not None else None,
        last_error=last_error,
        file_problems=[str(problem) for problem in host_file_problems(config)],
    )


def load_hosts(session: Session, inventory: Inventory) -> list[HostView]:
    """Every host of the inventory, in file order, with its stored probe."""
    stored = {host.name: host for host in crud.list_hosts(session)}
    return [host_view(config, stored.get(config.name)) for config in inventory]


def probe_and_store(session: Session, config: HostConfig) -> HostView:
    """Probe ``config`` now, store the outcome (secrets masked), and return the host's new view."""
    status = host_status(config)
    redactor = hosts_redactor([config])
    crud.upsert_host(
        session,
        name=config.name,
        address=config.display_address,
        transport=config.transport,
        simulated=config.simulated,
    )
    stored = crud.record_probe(
        session,
        name=config.name,
        reachable=status.reachable,
        probe=redactor.data(status.probe.model_dump(mode="json")) if status.probe is not None else None,
        error=redactor.text(error_text(status.error)) if status.error is not None else None,
    )
    return host_view(config, stored)


def accelerators_frame(probe: ProbeResult | None) -> pd.DataFrame:
    """One row per accelerator: index, model, memory used/total, utilisation, temperature, driver; on a
    CPU host one row per NUMA node: its id, the CPU model, its CPUs and memory."""
    if probe is not None and is_cpu_host(probe.accelerators):
        cpus = {node.id: node.cpus for node in probe.system.numa_nodes}
        numa_rows = [
            {
                "NUMA node": device.index,
                "Model": device.name,
                "CPUs": cpus.get(device.index) or "",
                "Memory total (MiB)": device.memory_total_mib,
            }
            for device in probe.accelerators
        ]
        return pd.DataFrame(numa_rows, columns=["NUMA node", "Model", "CPUs", "Memory total (MiB)"])
    columns = [
        "GPU",
        "Model",
        "Memory used (MiB)",
        "Memory total (MiB)",
        "Utilisation (%)",
        "Temp (°C)",
        "Driver",
    ]
    rows = [
        {
            "GPU": accelerator.index,
            "Model": accelerator.name,
            "Memory used (MiB)": accelerator.memory_used_mib,
            "Memory total (MiB)": accelerator.memory_total_mib,
            "Utilisation (%)": accelerator.utilization_pct,
            "Temp (°C)": accelerator.temperature_c,
            "Driver": accelerator.driver or "",
        }
        for accelerator in (probe.accelerators if probe is not None else [])
    ]
    return pd.DataFrame(rows, columns=columns)


def system_lines(probe: ProbeResult | None) -> list[str]:
    """CPU, RAM, Python and container runtimes of a probed host as short lines."""
    if probe is None:
        return []
    system = probe.system
    ram = (
        f"{format_number((system.ram_available_mib or 0) / 1024, decimals=1)} of "
        f"{format_number(system.ram_total_mib / 1024, decimals=1)} GiB available"
        if system.ram_total_mib
        else MISSING
    )
    cpu = (
        f"{system.cpu_model or 'CPU'} × {system.cpu_cores}"
        if system.cpu_cores
        else (system.cpu_model or MISSING)
    )
    if system.numa_nodes:
        cpu += f", {len(system.numa_nodes)} NUMA node{'s' if len(system.numa_nodes) != 1 else ''}"
    return [
        f"OS: {system.os or MISSING} ({system.kernel or MISSING}, {system.arch or MISSING})",
        f"CPU: {cpu}",
        f"RAM: {ram}",
        f"Python: {probe.python.version or 'not found'} ({probe.python.command})",
        f"Container runtimes: {container_runtimes_text(probe)}",
    ]


def container_runtimes_text(probe: ProbeResult) -> str:
    """``podman 4.3.1; docker: Cannot connect to the Docker daemon …`` (usable first), or ``none``."""
    usable = [f"{name} {version}" for name, version in probe.container_runtimes.items()]
    broken = [f"{name}: {why}" for name, why in probe.container_runtime_errors.items()]
    return "; ".join([*usable, *broken]) or "none"


def host_choices(inventory: Inventory) -> dict[str, HostConfig]:
    """Launch targets by their shown name (simulated hosts marked)."""
    return {host_label(host.name, host.simulated): host for host in inventory}
