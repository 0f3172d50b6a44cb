"""Start a run's engine replicas on the host, recording each in ``run.remote_state`` before it starts.

Replica ``i`` runs detached (see :mod:`perflab.remote.process`) as process ``engine-<i>`` of the run,
in its own working directory ``<run dir>/engine-<i>/`` holding the adapter's files, with the adapter's
environment (visible devices = the replica's GPUs). Without a configured port, replica ports follow
the first GPU of each replica (default port + GPU index), so runs on disjoint GPUs of one host never
collide; with one, replica ``i`` listens on port + ``i``. A port something else already listens on
fails the run (``port_in_use``) before the replica starts: the health probe would otherwise be
answered by that other server.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from perflab.engines import EngineAdapter, EngineConfig, ReplicaPlan, replica_plans
from perflab.remote import process as rp
from perflab.remote import scripts
from perflab.runner.errors import RunFailed
from perflab.transport.base import Transport
from perflab.transport.errors import CommandFailed


@dataclass(frozen=True)
class Replica:
    """One started engine: where it listens, its GPUs and its detached process."""

    plan: ReplicaPlan
    process: rp.RemoteProcess

    @property
    def name(self) -> str:
        return self.process.name

    @property
    def port(self) -> int:
        return self.plan.port


def process_name(index: int) -> str:
    return f"engine-{index}"


def plan_replicas(config: EngineConfig, adapter: EngineAdapter, gpu_ids: Sequence[int]) -> list[ReplicaPlan]:
    """The replicas of ``config`` on the locked ``gpu_ids`` (ports as the module docstring says)."""
    plans = replica_plans(config, gpu_ids)
    if config.port is not None:
        return plans
    return [ReplicaPlan(plan.index, plan.gpu_ids, adapter.default_port + plan.gpu_ids[0]) for plan in plans]


def initial_remote_state(
    transport: Transport, *, run_key: str, plans: Sequence[ReplicaPlan]
) -> dict[str, Any]:
    """What the run is about to start on the host (stored before anything starts)."""
    return {
        "host": transport.host.name,
        "run_key": run_key,
        "run_dir": rp.run_dir(transport, run_key),
        "processes": [
            {"name": process_name(plan.index), "port": plan.port, "gpu_ids": list(plan.gpu_ids)}
            for plan in plans
        ],
    }


def serve_command(argv: Sequence[str], env: dict[str, str]) -> str:
    """The exact command of one replica, environment assignments first."""
    return shlex.join([*(f"{key}={value}" for key, value in env.items()), *argv])


def port_listening(transport: Transport, port: int) -> bool:
    """Whether some process on the host already listens on TCP ``port``."""
    return transport.run(["sh", "-c", scripts.LISTENING, "perflab-listening", str(port)], timeout=30.0).ok


def start_replicas(
    transport: Transport,
    *,
    config: EngineConfig,
    adapter: EngineAdapter,
    run_key: str,
    plans: Sequence[ReplicaPlan],
    on_started: Callable[[Replica, str], None],
    engine_version: str | None = None,
) -> list[Replica]:
    """Start every replica; ``on_started(replica, exact command)`` runs after each start.

    ``engine_version`` is the host's engine version as probed (the adapter may launch differently per
    version); the adapter's files are written with its :attr:`~EngineAdapter.file_mode`.
    """
    directory = rp.run_dir(transport, run_key)
    replicas: list[Replica] = []
    for plan in plans:
        name = process_name(plan.index)
        workdir = posixpath.join(directory, name)
        argv = adapter.serve_argv(config, port=plan.port, engine_version=engine_version)
        env = adapter.env(config, gpu_ids=plan.gpu_ids, run_dir=workdir)
        if port_listening(transport, plan.port):
            raise RunFailed(
                "port_in_use",
                f"port {plan.port} on host '{transport.host.name}' is already in use by another process, "
                f"so {name} cannot serve on it; stop that process or set another port",
            )
        try:
            transport.run(["mkdir", "-p", workdir], timeout=30.0, check=True)
            files = adapter.files(config, port=plan.port, engine_version=engine_version)
            for file_name, text in files.items():
                transport.write_text(posixpath.join(workdir, file_name), text, mode=adapter.file_mode)
            process = rp.start_detached(transport, argv, run_key=run_key, name=name, env=env, cwd=workdir)
        except CommandFailed as exc:
            raise RunFailed(
                "launch_failed", f"cannot start {name} on host '{transport.host.name}': {exc}"
            ) from None
        replica = Replica(plan, process)
        replicas.append(replica)
        on_started(replica, serve_command(argv, env))
    return replicas
