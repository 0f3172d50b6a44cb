"""Start a run's engine replicas on the host, recording each in ``run.remote_state`` before it starts.

Replica ``i`` runs detached (see :mod:`perflab.remote.process`) as process ``engine-<i>`` of the run,
in its own working directory ``<run dir>/engine-<i>/`` holding the adapter's files, with the adapter's
environment (visible devices = the replica's GPUs).

Ports: with a configured (pinned) port, replica ``i`` listens on port + ``i``. Without one, each replica
gets the first port, from the engine's default port + the run's search offset
(:func:`perflab.runner.ports.search_offset`) + its first GPU index upward, that nothing on the host
listens on (read from ``/proc/net/tcp{,6}`` over the transport), that no other unfinished run on the
same machine recorded and that no other replica of the run took. Just before each replica starts its
port is checked again: one something else listens on raises :class:`PortTaken` (``port_in_use``) — the
health probe would otherwise be answered by that other server. For a chosen port that is a race the
runner answers by choosing again (:data:`MAX_PORT_ATTEMPTS`); a pinned port stays taken, so the run
fails.

A config that names an image starts each replica as a container instead (:mod:`perflab.containers`):
the detached process then supervises container ``perflab-<run key>-<i>`` (its log is the container's,
read from the runtime), so readiness, logs and failure classification work unchanged; the recorded
command is the runtime's ``run`` argv, and ``remote_state`` names the runtime and each container so
stopping (and crash recovery) removes them.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from perflab.containers.launch import ContainerPlan, replica_container
from perflab.containers.runtime import container_name, run_argv, supervised_argv
from perflab.engines import EngineAdapter, EngineConfig, ReplicaPlan, replica_plans
from perflab.engines.replicas import MAX_PORT
from perflab.remote import process as rp
from perflab.remote import scripts
from perflab.runner.errors import RunFailed
from perflab.transport.base import Transport
from perflab.transport.errors import CommandFailed

# Launches of one run, each on freshly chosen ports, when chosen ports turn out to be taken.
MAX_PORT_ATTEMPTS = 3


class PortTaken(RunFailed):
    """Something else listens on the port a replica was about to serve on (``port_in_use``)."""

    def __init__(self, message: str, port: int) -> None:
        super().__init__("port_in_use", message)
        self.port = port


class PortClash(RunFailed):
    """Another unfinished run on the same machine recorded one of the ports this run just recorded
    (both chose it before either stored it); nothing was started, so the run chooses again."""

    def __init__(self, ports: Collection[int], host_name: str) -> None:
        self.ports = sorted(ports)
        shown = ", ".join(str(port) for port in self.ports)
        message = f"port(s) {shown} of host '{host_name}' were chosen by another run at the same time"
        super().__init__("port_in_use", message)


@dataclass(frozen=True)
class Replica:
    """One started engine: where it listens, its GPUs and its detached process (which supervises a
    container when ``in_container``: the engine's own processes are then the runtime's, not its)."""

    plan: ReplicaPlan
    process: rp.RemoteProcess
    in_container: bool = False

    @property
    def name(self) -> str:
        return self.process.name

    @property
    def port(self) -> int:
        return self.plan.port


def process_name(index: int) -> str:
    return f"engine-{index}"


def listening_ports(transport: Transport) -> frozenset[int]:
    """The TCP ports some process on the host listens on now."""
    result = transport.run(["sh", "-c", scripts.LISTENING, "perflab-listening"], timeout=30.0, check=True)
    return frozenset(int(word, 16) for word in result.stdout.split())


@dataclass
class PortSearch:
    """The ports of one launch: each the first free one from ``base`` (the engine's default port + the
    run's search offset) + its own step upward, none in ``avoid`` (ports the machine or other runs use)
    nor taken by another process of the launch."""

    base: int
    avoid: set[int]
    host_name: str = ""

    def take(self, step: int) -> int:
        """The first free port from ``base + step`` upward, now the launch's."""
        for port in range(self.base + step, MAX_PORT + 1):
            if port not in self.avoid:
                self.avoid.add(port)
                return port
        raise RunFailed(
            "port_in_use", f"no free port from {self.base + step} to {MAX_PORT} on host '{self.host_name}'"
        )

    def hold(self, port: int) -> int:
        """A pinned ``port``, kept from the rest of the search."""
        self.avoid.add(port)
        return port


def plan_replicas(config: EngineConfig, gpu_ids: Sequence[int], ports: PortSearch) -> list[ReplicaPlan]:
    """The replicas of ``config`` on the locked ``gpu_ids``; unless the config pins a port, each takes the
    first free port of ``ports`` from its first GPU index upward."""
    plans = replica_plans(config, gpu_ids)
    if config.port is not None:
        return plans
    return [ReplicaPlan(plan.index, plan.gpu_ids, ports.take(plan.gpu_ids[0])) for plan in plans]


def recorded_ports(remote_state: dict[str, Any]) -> set[int]:
    """Every port the launch recorded: each process's own and its side channel's, if any."""
    return {
        port
        for entry in remote_state["processes"]
        for port in (entry["port"], entry.get("side_port"))
        if port is not None
    }


def initial_remote_state(
    transport: Transport,
    *,
    run_key: str,
    plans: Sequence[ReplicaPlan],
    container: ContainerPlan | None = None,
) -> dict[str, Any]:
    """What the run is about to start on the host (stored before anything starts)."""
    processes: list[dict[str, Any]] = [
        {"name": process_name(plan.index), "port": plan.port, "gpu_ids": list(plan.gpu_ids)} for plan in plans
    ]
    state: dict[str, Any] = {
        "host": transport.host.name,
        "run_key": run_key,
        "run_dir": rp.run_dir(transport, run_key),
        "processes": processes,
    }
    if container is not None:
        state["container_runtime"] = container.runtime
        for plan, entry in zip(plans, processes, strict=True):
            entry["container"] = container_name(run_key, plan.index)
    return state


def serve_command(argv: Sequence[str], env: dict[str, str]) -> str:
    """The exact command of one replica, environment assignments first."""
    return shlex.join([*(f"{key}={value}" for key, value in env.items()), *argv])


def start_process(
    transport: Transport,
    *,
    run_key: str,
    name: str,
    ports: Sequence[int],
    prepare: Callable[[str], tuple[list[str], dict[str, str], str]],
) -> tuple[rp.RemoteProcess, str]:
    """Start process ``name`` of a run in ``<run dir>/<name>/``: its ``ports`` checked free once more
    (:class:`PortTaken`), its directory made, then ``prepare(directory)`` writing what it needs there and
    giving the argv, the environment and the command to record. ``launch_failed`` when it cannot start."""
    listening = listening_ports(transport)
    for port in ports:
        if port in listening:
            raise PortTaken(
                f"port {port} on host '{transport.host.name}' is already in use by another process, so "
                f"{name} cannot serve on it; stop that process or set another port",
                port,
            )
    workdir = posixpath.join(rp.run_dir(transport, run_key), name)
    try:
        transport.run(["mkdir", "-p", workdir], timeout=30.0, check=True)
        argv, env, command = prepare(workdir)
        process = rp.start_detached(transport, argv, run_key=run_key, name=name, env=env, cwd=workdir)
    except (CommandFailed, ValueError) as exc:
        raise RunFailed(
            "launch_failed", f"cannot start {name} on host '{transport.host.name}': {exc}"
        ) from None
    return process, command


def start_replicas(
    transport: Transport,
    *,
    config: EngineConfig,
    adapter: EngineAdapter,
    run_key: str,
    plans: Sequence[ReplicaPlan],
    cpu: bool = False,
    on_started: Callable[[Replica, str], None],
    container: ContainerPlan | None = None,
    engine_version: str | None = None,
) -> list[Replica]:
    """Start every replica (as containers with ``container``); ``on_started(replica, exact command)``
    runs after each start. ``engine_version`` is the host's engine version as probed (the adapter may
    launch differently per version); the adapter's files are written with its ``file_mode``. With
    ``cpu`` the plans' devices are NUMA nodes of a CPU host."""
    directory = rp.run_dir(transport, run_key)
    replicas: list[Replica] = []
    for plan in plans:

        def prepare(workdir: str, plan: ReplicaPlan = plan) -> tuple[list[str], dict[str, str], str]:
            files = adapter.files(config, port=plan.port, engine_version=engine_version)
            for file_name, text in files.items():
                transport.write_text(posixpath.join(workdir, file_name), text, mode=adapter.file_mode)
            if container is None:
                argv = adapter.serve_argv(config, port=plan.port, engine_version=engine_version)
                env = adapter.env(config, gpu_ids=plan.gpu_ids, run_dir=workdir, cpu=cpu)
                return argv, env, serve_command(argv, env)
            spec = replica_container(
                transport,
                container,
                config=config,
                adapter=adapter,
                run_key=run_key,
                replica=plan,
                workdir=workdir,
                run_dir=directory,
            )
            return supervised_argv(spec), {}, shlex.join(run_argv(spec))

        process, command = start_process(
            transport, run_key=run_key, name=process_name(plan.index), ports=(plan.port,), prepare=prepare
        )
        replica = Replica(plan, process, in_container=container is not None)
        replicas.append(replica)
        on_started(replica, command)
    return replicas
