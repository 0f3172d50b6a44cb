"""The Launch page's preflight: the check the worker makes before a launch, asked on demand.

:func:`check_config` opens the host's transport, asks its engine what it accepts
(:func:`perflab.engines.preflight.preflight`, sharing the worker's help cache) and words the verdict
for the page: ``success`` (every flag and value accepted), ``error`` (what the engine refuses, or a host
that cannot be reached), ``warning`` (the engine could not be asked; the launch would go ahead) or
``info`` for a config that runs in a container image, whose engine the host's installation says nothing
about (the worker asks it after pulling the image).
"""

from __future__ import annotations

from dataclasses import dataclass

from perflab.engines import EngineConfig, EngineConfigError, get_adapter
from perflab.engines.preflight import default_cache, preflight
from perflab.inventory import HostConfig
from perflab.probe.models import ProbeResult
from perflab.simhost import SimulatedHostError
from perflab.transport import open_transport
from perflab.transport.errors import TransportError


@dataclass(frozen=True)
class PreflightView:
    """One verdict as the page shows it: a Streamlit message kind and its text."""

    level: str
    text: str


def probed_version(probe: ProbeResult | None, engine: str) -> str | None:
    """The engine's version from the host's last probe (None: not probed, or not found there)."""
    return probe.engines.get(engine) if probe is not None else None


def check_config(host: HostConfig, config: EngineConfig, engine_version: str | None) -> PreflightView:
    """Ask ``host``'s engine whether it accepts ``config``; never raises for host or config problems."""
    if config.image is not None:
        return PreflightView(
            "info",
            f"runs inside {config.image}: the worker asks the image's engine once the image is on the host, "
            "before the launch",
        )
    try:
        transport = open_transport(host)
    except (TransportError, SimulatedHostError) as exc:
        return PreflightView("error", f"host '{host.name}' cannot be checked: {exc}")
    try:
        verdict = preflight(
            transport,
            get_adapter(config.engine),
            config,
            engine_version=engine_version,
            cache=default_cache(),
        )
    except EngineConfigError as exc:
        return PreflightView("error", str(exc))
    finally:
        transport.close()
    if not verdict.ok:
        return PreflightView("error", verdict.summary())
    return PreflightView("success" if verdict.checked else "warning", verdict.summary())
