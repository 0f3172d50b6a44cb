"""The container side of a run whose config names an image: runtime, image, engine version, records.

:func:`prepare` picks the host's runtime (its ``container_runtime:``, else the first the probe found
usable; none fails the run ``container_runtime_missing``), makes sure the image is on the host
(pulling it when missing, each line of the pull reported as progress; a failed pull fails the run
with its class, e.g. ``image_not_found``) and asks the image's own ``python3`` for the engine's
version (the probe's snippet, in a one-shot container), so the adapter launches for that version and
the preflight checks the image's engine. :func:`snapshot` is what the run's environment snapshot
records: the runtime and its version, the image, its id and registry digests, and that engine version.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from perflab.containers.images import ImageInfo, PullFailed, ensure_image
from perflab.containers.launch import ContainerPlan
from perflab.containers.runtime import choose_runtime
from perflab.probe import ProbeResult
from perflab.probe import engines as engine_probe
from perflab.runner.errors import RunFailed
from perflab.simhost import container_setup
from perflab.transport.base import Transport

# The program the image is asked for its engine version with (every vendor image has it).
IMAGE_PYTHON = "python3"
VERSION_TIMEOUT_S = 120.0


def image_engine_version(transport: Transport, plan: ContainerPlan, engine: str) -> str | None:
    """The version of ``engine`` that the image's Python finds installed, or None."""
    argv = [*plan.oneshot(transport), *engine_probe.argv(IMAGE_PYTHON)]
    result = transport.run(argv, timeout=VERSION_TIMEOUT_S)
    if not result.ok:
        return None
    try:
        _, found = engine_probe.parse(IMAGE_PYTHON, result.stdout)
    except (ValueError, IndexError):
        return None
    return found.get(engine)


def prepare(
    transport: Transport,
    probe: ProbeResult,
    *,
    image: str,
    engine: str,
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
    return replace(plan, engine_version=image_engine_version(transport, plan, engine)), info


def snapshot(plan: ContainerPlan, info: ImageInfo, probe: ProbeResult) -> dict[str, Any]:
    """The ``container`` entry of the environment snapshot."""
    return {
        "runtime": plan.runtime,
        "runtime_version": probe.container_runtimes.get(plan.runtime),
        **info.as_dict(),
        "engine_version": plan.engine_version,
    }
