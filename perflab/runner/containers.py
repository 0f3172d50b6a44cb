"""The container side of a run whose config names an image: runtime, image, and what is recorded.

:func:`prepare` picks the host's runtime (its ``container_runtime:``, else the first the probe found
usable; none fails the run ``container_runtime_missing``), makes sure the image is on the host
(pulling it when missing, each line of the pull reported as progress; a failed pull fails the run
with its class, e.g. ``image_not_found``) and returns the :class:`ContainerPlan` the launch uses.
:func:`snapshot` adds to the run's environment snapshot the runtime and its version, the image, its
id and registry digests, and the engine version the running container reports.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from perflab.containers import control
from perflab.containers.images import ImageInfo, PullFailed, ensure_image
from perflab.containers.launch import ContainerPlan
from perflab.containers.runtime import choose_runtime, container_name
from perflab.probe import ProbeResult
from perflab.runner.errors import RunFailed
from perflab.simhost import container_setup
from perflab.transport.base import Transport


def prepare(
    transport: Transport,
    probe: ProbeResult,
    *,
    image: str,
    run_id: int,
    vendor: str | None,
    pull_timeout_s: float,
    on_line: Callable[[str], None],
) -> tuple[ContainerPlan, ImageInfo]:
    """The runtime and image of the run, ready to start; raises :class:`RunFailed`."""
    host = transport.host
    try:
        runtime = choose_runtime(
            host.container_runtime, probe.container_runtimes, probe.container_runtime_errors
        )
    except ValueError as exc:
        raise RunFailed("container_runtime_missing", f"host '{host.name}': {exc}") from None
    try:
        info = ensure_image(transport, runtime, image, timeout_s=pull_timeout_s, on_line=on_line)
    except PullFailed as failed:
        raise RunFailed(failed.info.failure_class, failed.info.message) from None
    sim_env, sim_mounts = container_setup(transport) if host.simulated else ({}, ())
    plan = ContainerPlan(runtime, image, run_id, vendor, host.simulated, sim_env, sim_mounts)
    return plan, info


def snapshot(
    transport: Transport, plan: ContainerPlan, info: ImageInfo, probe: ProbeResult, *, engine: str
) -> dict[str, Any]:
    """The ``container`` entry of the environment snapshot, once replica 0 runs."""
    version = control.engine_version(transport, plan.runtime, container_name(plan.run_id, 0), engine)
    return {
        "runtime": plan.runtime,
        "runtime_version": probe.container_runtimes.get(plan.runtime),
        **info.as_dict(),
        "engine_version": version,
    }
