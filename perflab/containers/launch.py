"""One engine replica as a container: what it mounts, which variables it gets, how it is started.

:func:`replica_container` turns a replica of a run into a :class:`~perflab.containers.runtime.ContainerSpec`:

- the adapter's argv and environment, the visible-devices variable counted inside the container;
- the replica's working directory (the adapter's files, e.g. MindIE's config.json) mounted at the same
  path and used as the container's working directory;
- the model: a model given as an absolute path is mounted read-only at the same path; a hub id uses
  the host's Hugging Face cache (``HF_HOME`` of the host's ``env:``, else ``~/.cache/huggingface``),
  mounted read-write at ``/root/.cache/huggingface`` with ``HF_HOME`` pointing there, so downloads
  are kept between runs as for a native engine;
- the host's ``secrets:`` (e.g. ``HF_TOKEN``) through ``--env-file`` pointing at a 0600 file in the
  run directory (removed when the engines are stopped), never on a command line; the host's ``env:``
  stays with the commands on the host (the runtime's own settings, such as ``CONTAINERS_CONF``);
- the host's ``container_mounts:`` (e.g. a model store, the engine's compile cache);
- on a simulated host, the simulator's shims (:func:`perflab.simhost.container_setup`) and the host's
  pid namespace (the simulated GPUs are held by host pids, as a real driver sees them); no device is
  passed, since there is none.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass

from perflab.containers.runtime import (
    LABEL_RUN,
    LABEL_RUN_KEY,
    ContainerSpec,
    Mount,
    container_name,
    in_container_ids,
    oneshot_prefix,
    parse_mount,
)
from perflab.engines import EngineAdapter, EngineConfig, ReplicaPlan
from perflab.remote.private_files import write_env_file
from perflab.transport.base import Transport

HF_CACHE_IN_CONTAINER = "/root/.cache/huggingface"
# Accelerators handed to the container as devices (renumbered from 0 inside); a CPU host's NUMA nodes
# keep their ids, since the container shares the host's CPUs.
PASSED_VENDORS = ("nvidia", "ascend")


@dataclass(frozen=True)
class ContainerPlan:
    """How a run's replicas run as containers: the runtime, the image, where the GPUs come from, and
    the engine version the image reports (None until asked, or when it cannot say)."""

    runtime: str
    image: str
    run_id: int
    vendor: str | None
    simulated: bool
    sim_env: dict[str, str]
    sim_mounts: tuple[Mount, ...]
    engine_version: str | None = None

    def host_mounts(self, transport: Transport) -> tuple[Mount, ...]:
        """The host's ``container_mounts`` and, on a simulated host, the simulator's."""
        return (*(parse_mount(text) for text in transport.host.container_mounts), *self.sim_mounts)

    def oneshot(self, transport: Transport) -> list[str]:
        """The prefix that runs one command in the image, with what every replica gets besides its
        devices, files and secrets (:func:`~perflab.containers.runtime.oneshot_prefix`)."""
        return oneshot_prefix(self.runtime, self.image, env=self.sim_env, mounts=self.host_mounts(transport))


def env_file_path(run_dir: str, name: str) -> str:
    """Where container ``name``'s secrets file lives (removed when the run's engines are stopped)."""
    return posixpath.join(run_dir, f"{name}.env")


def host_hf_cache(transport: Transport) -> str:
    """The Hugging Face cache directory of the host (its ``env:`` HF_HOME, else the default)."""
    configured = transport.host.env.get("HF_HOME")
    return (
        transport.resolve_path(configured)
        if configured
        else posixpath.join(transport.home(), ".cache/huggingface")
    )


def model_mounts(transport: Transport, model: str) -> tuple[tuple[Mount, ...], dict[str, str]]:
    """The mount that gives the container the model, and the variables that go with it."""
    if model.startswith("/"):
        return (Mount(posixpath.normpath(model), posixpath.normpath(model)),), {}
    cache = host_hf_cache(transport)
    transport.run(["mkdir", "-p", cache], timeout=30.0, check=True)
    return (Mount(cache, HF_CACHE_IN_CONTAINER, read_only=False),), {"HF_HOME": HF_CACHE_IN_CONTAINER}


def replica_container(
    transport: Transport,
    plan: ContainerPlan,
    *,
    config: EngineConfig,
    adapter: EngineAdapter,
    run_key: str,
    replica: ReplicaPlan,
    workdir: str,
    run_dir: str,
) -> ContainerSpec:
    """The container of one replica (its secrets file, if the host has secrets, goes into ``run_dir``)."""
    passed = not plan.simulated and plan.vendor in PASSED_VENDORS
    gpu_ids: Sequence[int] = replica.gpu_ids
    ids = in_container_ids(gpu_ids, passed=passed)
    env = adapter.env(config, gpu_ids=ids, run_dir=workdir, cpu=plan.vendor == "cpu")
    mounts, model_env = model_mounts(transport, config.model)
    env = {**model_env, **env, **plan.sim_env}
    name = container_name(run_key, replica.index)
    env_file = None
    if transport.secret_env:
        env_file = write_env_file(transport, env_file_path(run_dir, name), transport.secret_env)
    return ContainerSpec(
        runtime=plan.runtime,
        name=name,
        image=plan.image,
        argv=tuple(adapter.serve_argv(config, port=replica.port, engine_version=plan.engine_version)),
        labels={LABEL_RUN: str(plan.run_id), LABEL_RUN_KEY: run_key},
        env=env,
        env_file=env_file,
        mounts=(Mount(workdir, workdir, read_only=False), *mounts, *plan.host_mounts(transport)),
        workdir=workdir,
        vendor=plan.vendor if passed else None,
        gpu_ids=tuple(gpu_ids) if passed else (),
        host_pid=plan.simulated,
    )
