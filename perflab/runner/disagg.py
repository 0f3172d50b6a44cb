"""Launching a disaggregated configuration: prefill workers, decode workers, then the router in front.

Each worker is an engine process of the run (``prefill-<i>``, ``decode-<j>``) in its own directory
``<run dir>/<name>/``, on its own block of the run's GPUs (prefill workers first), serving on its own
port with a second port for its KV side channel or bootstrap server (:mod:`perflab.engines.disagg`);
the router (process ``router``) has its port and a metrics port. Every process is recorded in
``run.remote_state`` before it starts — both ports, so concurrent runs on the machine avoid them — so
stopping and crash recovery find all of them. The workers start first and must all be ready (the
engine's readiness line, or health answered by the worker's own process); then the router starts and is
ready once its log says so (sglang-router: a line per worker it took in; vllm-router: one line once every
worker answered its health check). A router that exits — its program not installed on the
host, say — fails the run with its log's class (``router_missing``), one of the failures that are no
result about the configuration.

The routers pass no unknown request header on to the workers, so simulated workers behind one never
learn the bench's schedule (:mod:`perflab.bench.simclock`): on a simulated host such a configuration is
benchmarked by the wall clock, with :func:`wall_clock_note` in its results.
"""

from __future__ import annotations

import posixpath
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from perflab.bench.simclock import HEADER
from perflab.engines import EngineAdapter, EngineConfig, ReplicaPlan, timeout_failure
from perflab.engines.disagg import ROUTERS, WorkerPorts, role_args, role_env, router_argv, worker_config
from perflab.engines.layout import ROLES
from perflab.remote import process as rp
from perflab.runner.errors import RunFailed
from perflab.runner.launch import PortSearch, Replica, serve_command, start_process
from perflab.transport.base import Transport

ROUTER = "router"
# Where side-channel and router ports are searched from, above the engine's default port.
SIDE_PORT_GAP = 1000
ROUTER_PORT_GAP = 500


@dataclass(frozen=True)
class WorkerPlan:
    """One process of a disaggregated launch: its name, role, GPUs and ports."""

    name: str
    role: str  # prefill, decode or router
    plan: ReplicaPlan
    side_port: int

    @property
    def ports(self) -> WorkerPorts:
        return WorkerPorts(self.plan.port, self.side_port)


def plan_workers(config: EngineConfig, gpu_ids: Sequence[int], ports: PortSearch) -> list[WorkerPlan]:
    """Every worker of ``config`` on the locked ``gpu_ids`` (prefill workers first), then the router, each
    taking its ports from ``ports``."""
    layout = config.disaggregation
    assert layout is not None
    plans: list[WorkerPlan] = []
    position = 0
    for role in ROLES:
        group = layout.group(role)
        for number in range(group.workers):
            block = tuple(gpu_ids[position : position + group.gpus_per_worker])
            position += group.gpus_per_worker
            port = ports.take(block[0])
            side = ports.take(SIDE_PORT_GAP + block[0])
            plans.append(WorkerPlan(f"{role}-{number}", role, ReplicaPlan(len(plans), block, port), side))
    router_port = ports.hold(config.port) if config.port is not None else ports.take(ROUTER_PORT_GAP)
    metrics_port = ports.take(ROUTER_PORT_GAP + 1)
    plans.append(WorkerPlan(ROUTER, ROUTER, ReplicaPlan(len(plans), (), router_port), metrics_port))
    return plans


def initial_state(transport: Transport, *, run_key: str, plans: Sequence[WorkerPlan]) -> dict[str, Any]:
    """What the run is about to start on the host, every port of every process included."""
    return {
        "host": transport.host.name,
        "run_key": run_key,
        "run_dir": rp.run_dir(transport, run_key),
        "processes": [
            {
                "name": plan.name,
                "role": plan.role,
                "port": plan.plan.port,
                "side_port": plan.side_port,
                "gpu_ids": list(plan.plan.gpu_ids),
            }
            for plan in plans
        ],
    }


def _start(
    transport: Transport, run_key: str, plan: WorkerPlan, argv: Sequence[str], env: dict[str, str]
) -> tuple[rp.RemoteProcess, str]:
    return start_process(
        transport,
        run_key=run_key,
        name=plan.name,
        ports=(plan.plan.port, plan.side_port),
        prepare=lambda workdir: (list(argv), env, serve_command(argv, env)),
    )


def start_workers(
    transport: Transport,
    *,
    config: EngineConfig,
    adapter: EngineAdapter,
    run_key: str,
    plans: Sequence[WorkerPlan],
    cpu: bool = False,
    on_started: Callable[[Replica, str], None],
    engine_version: str | None = None,
) -> list[Replica]:
    """Start every prefill and decode worker of ``plans``; ``on_started(worker, command)`` after each."""
    layout = config.disaggregation
    assert layout is not None
    workers: list[Replica] = []
    for plan in plans:
        if plan.role == ROUTER:
            continue
        worker = worker_config(config, plan.role)
        workdir = posixpath.join(rp.run_dir(transport, run_key), plan.name)
        argv = [
            *adapter.serve_argv(worker, port=plan.plan.port, engine_version=engine_version),
            *role_args(config.engine, layout, plan.role, plan.ports),
        ]
        env = {
            **adapter.env(worker, gpu_ids=plan.plan.gpu_ids, run_dir=workdir, cpu=cpu),
            **role_env(config.engine, layout, plan.role, plan.ports),
        }
        process, command = _start(transport, run_key, plan, argv, env)
        replica = Replica(plan.plan, process)
        workers.append(replica)
        on_started(replica, command)
    return workers


def start_router(
    transport: Transport,
    *,
    config: EngineConfig,
    adapter: EngineAdapter,
    run_key: str,
    plans: Sequence[WorkerPlan],
    on_started: Callable[[Replica, str], None],
    deadline_s: float,
    poll_s: float,
    interrupt: Callable[[], None],
) -> Replica:
    """Start the router in front of the ready workers and wait until it took in every one."""
    layout = config.disaggregation
    assert layout is not None
    router_plan = next(plan for plan in plans if plan.role == ROUTER)
    ports = {role: [plan.ports for plan in plans if plan.role == role] for role in ROLES}
    argv = router_argv(
        config.engine,
        layout,
        prefill=ports["prefill"],
        decode=ports["decode"],
        port=router_plan.plan.port,
        metrics_port=router_plan.side_port,
    )
    process, command = _start(transport, run_key, router_plan, argv, {})
    router = Replica(router_plan.plan, process)
    on_started(router, command)
    router_kind = ROUTERS[config.engine]
    expected = router_kind.ready_lines(len(ports["prefill"]) + len(ports["decode"]))
    marker = re.compile(re.escape(router_kind.ready_marker))
    started = time.monotonic()
    while True:
        interrupt()
        log = rp.tail_log(transport, router.process, 2000)
        if len(marker.findall(log)) >= expected:
            return router
        state = rp.process_state(transport, router.process)
        if not state.running:
            # read its log again: it may have written its last lines between the read above and its exit
            raise router_failure(adapter, rp.tail_log(transport, router.process, 2000), state.exit_status)
        if time.monotonic() - started > deadline_s:
            info = timeout_failure(f"{adapter.display_name} router", deadline_s, log)
            raise RunFailed(info.failure_class, info.message)
        time.sleep(poll_s)


def router_failure(adapter: EngineAdapter, log: str, exit_status: int | None) -> RunFailed:
    """Why the router exited: its log's class (a program not installed: ``router_missing``)."""
    info = adapter.classify_failure(log)
    if info is not None:
        return RunFailed(info.failure_class, f"router: {info.message}")
    if exit_status == 127:
        return RunFailed("router_missing", "router: its program is not installed on the host (exit 127)")
    return RunFailed("crash", f"router exited with status {exit_status} before it took in the workers")


def wall_clock_note(engine: str) -> str:
    """Why the benchmarks of ``engine``'s disaggregated configuration on a simulated host are timed by the
    wall clock."""
    router = ROUTERS[engine]
    return (
        f"timed by the wall clock: {router.package} {router.version} passes no {HEADER} header on to the "
        "simulated workers behind it, so they cannot time the requests by their own clocks and these "
        "figures include the load of the machine"
    )
