"""The environment snapshot stored with a run: host, accelerators, driver, engine version, simulation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from perflab.inventory import HostConfig
from perflab.probe import ProbeResult


def accelerator_label(probe: ProbeResult, gpu_ids: Sequence[int]) -> str | None:
    """The model name of the run's accelerators, e.g. ``NVIDIA H100 80GB HBM3`` (None if unknown)."""
    wanted = set(gpu_ids)
    names = [acc.name for acc in probe.accelerators if not wanted or acc.index in wanted]
    return names[0] if names else None


def time_scale_of(snapshot: Mapping[str, Any] | None) -> float | None:
    """The ``time_scale`` of the simulated host a run's environment ``snapshot`` describes, when its
    clock ran faster or slower than the engine it models (None at the modelled speed, or not
    simulated)."""
    if not isinstance(snapshot, Mapping) or snapshot.get("simulated") is not True:
        return None
    simulate = snapshot.get("simulate")
    scale = simulate.get("time_scale") if isinstance(simulate, Mapping) else None
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or scale == 1 or not scale > 0:
        return None
    return float(scale)


def snapshot(host: HostConfig, probe: ProbeResult, *, engine: str, gpu_ids: Sequence[int]) -> dict[str, Any]:
    """A JSON-able description of where the run ran, taken from the host probe."""
    used = [acc for acc in probe.accelerators if acc.index in set(gpu_ids)]
    drivers = sorted({acc.driver for acc in probe.accelerators if acc.driver})
    return {
        "host": host.name,
        "address": host.display_address,
        "transport": host.transport,
        "simulated": host.simulated,
        "simulate": host.simulate.as_spec() if host.simulate is not None else None,
        "accelerator": accelerator_label(probe, gpu_ids),
        "accelerator_count": len(probe.accelerators),
        "gpu_ids": list(gpu_ids),
        "accelerators": [acc.model_dump(mode="json") for acc in used],
        "driver": drivers[0] if len(drivers) == 1 else (", ".join(drivers) or None),
        "engine": engine,
        "engine_version": probe.engines.get(engine),
        "engines": dict(probe.engines),
        "python": probe.python.version,
        "system": probe.system.model_dump(mode="json"),
        "probe_problems": [problem.message for problem in probe.problems],
        "probed_at": probe.probed_at.isoformat(),
    }
