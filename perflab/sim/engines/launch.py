"""The life of a simulated engine process, shared by every engine shim.

``run_engine`` does what a real engine does between its command line and its readiness line:
binds its port early where the real engine does (vLLM, trtllm-serve), checks the visible devices,
resolves the deployment (failing with the engine's messages), "loads weights" and "warms up" for a
realistic, time-scaled while, registers the GPU memory it holds in the sim home's state directory,
serves the OpenAI API, prints its readiness line and shuts down cleanly on SIGTERM. Each engine
supplies an :class:`EngineLog` subclass for its log lines.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from typing import List, Optional

from perflab.sim import failures
from perflab.sim.api import ApiConfig, OpenAIApp, vllm_dev_mode
from perflab.sim.clock import SimClock
from perflab.sim.deployment import Deployment, Knobs, resolve_deployment
from perflab.sim.disagg import MISSING_BACKEND, Worker
from perflab.sim.engine import Engine, model_engine
from perflab.sim.failures import EngineFailure
from perflab.sim.gpustate import Registration, busy_mib
from perflab.sim.hostspec import HostSpec, load_host
from perflab.sim.noise import Pace, next_launch
from perflab.sim.perfmodel import MemoryPlan, plan_memory
from perflab.sim.server import Console, install_stop_signals, serve_until_stopped
from perflab.sim.sockets import bind_socket
from perflab.sim.tokenizer import WordTokenizer

MIB = 1024 * 1024
GIB = 1024**3


class EngineLog:
    """Start-up and shutdown output of one engine; subclasses word it like their engine."""

    bind_early = False
    server_header = "uvicorn"
    startup_seconds = 10.0
    warmup_seconds = 20.0
    load_gb_per_second = 3.0
    announce_uvicorn = True

    def __init__(self, console: Console) -> None:
        self.console = console

    def line(self, text: str) -> None:
        self.console.line(text)

    @property
    def uvicorn_console(self) -> Console:
        return self.console

    def preamble(self, knobs: Knobs, version: str) -> None:
        """Lines printed before anything is checked."""

    def loading(self, dep: Deployment) -> None:
        """Lines printed when weight loading starts."""

    def loaded(self, dep: Deployment, plan: MemoryPlan, load_seconds: float) -> None:
        """Lines printed once weights are in memory and the KV cache is sized."""

    def ready(self, host: str, port: int) -> None:
        """Lines printed after the HTTP server is up (the engine's own readiness line)."""

    def process_name(self, rank: int, dep: Deployment) -> str:
        return "python3"


class Launch:
    """Everything one engine start needs."""

    def __init__(
        self,
        engine: str,
        knobs: Knobs,
        host: HostSpec,
        log: EngineLog,
        devices_env: str,
        metrics_enabled: bool = True,
        access_log: bool = True,
        version: str = "",
        logical_devices: Optional[List[int]] = None,
    ) -> None:
        self.engine = engine
        self.logical_devices = logical_devices
        self.knobs = knobs
        self.host = host
        self.log = log
        self.devices_env = devices_env
        self.metrics_enabled = metrics_enabled
        self.access_log = access_log
        self.version = version


async def _pause(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep ``seconds``; True if SIGTERM arrived meanwhile."""
    try:
        await asyncio.wait_for(stop.wait(), timeout=max(0.0, seconds))
    except asyncio.TimeoutError:
        return False
    return True


def _bind(launch: Launch) -> socket.socket:
    try:
        return bind_socket(launch.knobs.host, launch.knobs.port)
    except OSError as exc:
        if exc.errno in (98, 48):
            raise failures.port_in_use(launch.engine, launch.knobs.host, launch.knobs.port) from None
        raise


async def _report_utilization(engine: Engine, registration: Registration) -> None:
    """Every second, the engine's busy share of its last simulated second (the simulated nvidia-smi)."""
    while True:
        await asyncio.sleep(1.0)
        registration.set_utilization(engine.utilization())


async def _run(launch: Launch) -> int:
    loop = asyncio.get_running_loop()
    stop = install_stop_signals(loop)
    log, knobs, host = launch.log, launch.knobs, launch.host
    scale = host.startup_scale
    log.preamble(knobs, launch.version)
    sock = _bind(launch) if log.bind_early else None
    try:
        if await _pause(stop, log.startup_seconds / scale):
            return 0
        visible = host.visible_devices(launch.devices_env)
        needed = knobs.tp * knobs.dp * knobs.pp
        logical = launch.logical_devices if launch.logical_devices is not None else list(range(needed))
        if len(visible) < needed or any(index >= len(visible) for index in logical):
            raise failures.not_enough_devices(
                launch.engine, max(needed, max(logical, default=0) + 1), len(visible)
            )
        dep = resolve_deployment(launch.engine, knobs, host.accelerator, launch.version)
        _check_disaggregation(launch, dep)
        devices = [visible[index] for index in logical]
        busiest = max(devices, key=lambda device: busy_mib(host.state_dir, device))
        log.loading(dep)
        plan = plan_memory(dep, busy_mib(host.state_dir, busiest) * MIB, busiest)
        load_seconds = plan.weights / GIB / log.load_gb_per_second
        if await _pause(stop, load_seconds / scale):
            return 0
        log.loaded(dep, plan, load_seconds)
        registration = Registration(
            host.state_dir,
            launch.engine,
            {device: log.process_name(rank % dep.tp, dep) for rank, device in enumerate(devices)},
            {device: int(plan.used // MIB) for device in devices},
        )
        try:
            if await _pause(stop, log.warmup_seconds / scale):
                return 0
            if sock is None:
                sock = _bind(launch)
            await _serve(launch, dep, plan, registration, stop, sock)
        finally:
            registration.remove()
        return 0
    finally:
        if sock is not None:
            sock.close()


def _check_disaggregation(launch: Launch, dep: Deployment) -> None:
    """Fail as the engine does for a transfer backend a prefill server refuses or the host lacks; an
    SGLang decode server keeps no radix cache."""
    mode, backend = dep.knobs.disaggregation_mode, dep.knobs.transfer_backend
    if mode == "null":
        return
    if mode == "prefill" and backend == "fake":
        raise failures.raised(
            launch.engine, "AssertionError: Prefill server does not support 'fake' as the transfer backend"
        )
    library = "mooncake" if backend == "mooncake_tcp" else backend
    if backend != "fake" and library not in launch.host.transfer_backends:
        missing = MISSING_BACKEND["sglang" if launch.engine == "sglang" else "vllm"]
        raise failures.raised(
            launch.engine, missing.get(library, f"ImportError: the {library} transfer library is missing")
        )
    if mode == "decode" and launch.engine == "sglang":
        dep.prefix_caching = False


async def _serve(
    launch: Launch,
    dep: Deployment,
    plan: MemoryPlan,
    registration: Registration,
    stop: asyncio.Event,
    sock: socket.socket,
) -> None:
    loop = asyncio.get_running_loop()
    log = launch.log
    host = launch.host
    pace = Pace(host.noise, next_launch(host.state_dir)) if host.noise is not None else None
    clock = SimClock(loop)
    engine = model_engine(clock, dep, plan, host.time_scale, pace=pace)
    config = ApiConfig(
        dep.served_names,
        dep.knobs.model,
        dep.max_model_len,
        launch.engine,
        launch.version,
        dep.knobs.api_key,
        bool(dep.knobs.reasoning_parser),
        launch.metrics_enabled,
        need_prompt_ids=True,  # tokenized with or without prefix caching: the same CPU cost for both
        max_batch_size=dep.max_num_seqs,
        dev_mode=vllm_dev_mode(os.environ),
    )
    uvicorn = log.uvicorn_console
    app = OpenAIApp(
        config,
        engine,
        WordTokenizer(),
        clock.present,
        access_log=(lambda text: uvicorn.line(f"INFO:     {text}")) if launch.access_log else None,
    )
    mode = dep.knobs.disaggregation_mode
    if mode != "null":
        engine_name = "sglang" if launch.engine == "sglang" else "vllm"
        app.kv = Worker(engine_name, mode, dep.knobs.transfer_backend, dep, host.time_scale, log.line)
        try:
            await app.kv.start(dep.knobs.host, dep.knobs.bootstrap_port)
        except OSError as exc:
            if exc.errno in (98, 48):
                raise failures.port_in_use(launch.engine, dep.knobs.host, dep.knobs.bootstrap_port) from None
            raise
    reporter = loop.create_task(_report_utilization(engine, registration))
    try:
        await serve_until_stopped(
            app,
            dep.knobs.host,
            dep.knobs.port,
            uvicorn,
            stop,
            log.server_header,
            on_ready=lambda port: log.ready(dep.knobs.host, port),
            sock=sock,
            announce=log.announce_uvicorn,
        )
    finally:
        reporter.cancel()


def run_engine(launch: Launch) -> int:
    """Run the engine until SIGTERM; its exit status (1 with the engine's message on failure)."""
    try:
        return asyncio.run(_run(launch))
    except EngineFailure as failure:
        sys.stdout.flush()
        print("\n".join(failure.lines), file=sys.stderr, flush=True)
        return failure.exit_code


def host_or_none(tool: str) -> Optional[HostSpec]:
    """The simulated host, or None after explaining on stderr why there is none."""
    try:
        return load_host()
    except ValueError as exc:
        print(f"{tool} (simulated): {exc}", file=sys.stderr, flush=True)
        return None
