"""One run's lifecycle: launching → ready → benchmarking → done | failed | cancelled.

:func:`execute_run` takes a run already claimed (status ``launching``) and drives it: load and
validate its config and profiles, reach and probe the host, check the config against what the host's
engine accepts (:mod:`perflab.engines.preflight`), lock its GPUs, record and start every
replica, wait until they are ready, benchmark every profile while a sampler stores metrics, and — in
every case — stop what it started, keep the engine log tail, release the GPUs and store the final
status with the failure class and message. Cancellation and worker shutdown are checked at every
step. When other runs hold the GPUs, a worker's run goes back to the queue (status ``queued``).
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from pydantic import ValidationError
from sqlalchemy.engine import Engine

from db.crud import IllegalTransition, NotFound
from db.models import Run
from perflab.containers.launch import ContainerPlan
from perflab.engines import EngineAdapter, EngineConfig, EngineConfigError, get_adapter
from perflab.engines.disagg import check_disaggregation, worker_config
from perflab.engines.layout import ROLES
from perflab.engines.preflight import default_cache, preflight
from perflab.env_policy import EnvNotAllowed, check_env
from perflab.inventory import HostConfig, Inventory, InventoryError
from perflab.probe import ProbeResult, probe_accelerators, probe_host
from perflab.profiles import SHAREGPT_FILE, BenchmarkProfile
from perflab.redact import hosts_redactor
from perflab.runner import containers, disagg, environment
from perflab.runner.bench_record import BENCH_KEY
from perflab.runner.benchmark import BenchContext, run_profiles
from perflab.runner.datasets import dataset_files, dataset_problem
from perflab.runner.disks import DiskWatch, disk_full, is_disk_full
from perflab.runner.endpoints import Endpoints
from perflab.runner.errors import GpusBusy, RunCancelled, RunFailed, transport_failure
from perflab.runner.launch import (
    MAX_PORT_ATTEMPTS,
    PortClash,
    PortSearch,
    Replica,
    initial_remote_state,
    listening_ports,
    plan_replicas,
    recorded_ports,
    start_replicas,
)
from perflab.runner.logs import LogFollower
from perflab.runner.options import RunnerOptions
from perflab.runner.orphans import stop_orphans
from perflab.runner.placement import check_cpu_engine, choose_gpus, why_no_accelerators
from perflab.runner.ports import same_machine_hosts, search_offset
from perflab.runner.readiness import wait_until_ready
from perflab.runner.sampling import Sampler
from perflab.runner.stop import stop_recorded, wind_down
from perflab.runner.store import RunStore, new_run_key
from perflab.simhost import SimulatedHostError
from perflab.transport import open_transport
from perflab.transport.base import Transport
from perflab.transport.errors import TransportError

logger = logging.getLogger(__name__)
DOWNLOAD_PROGRESS_S = 1.0
MIB = 1024 * 1024

CANCEL_CHECK_S = 0.5
# What execute_run returns for a run whose row was deleted while it was in flight.
DELETED = "deleted"
# Times a run re-reads the locks after another run locked its chosen GPUs first.
MAX_LOCK_RACES = 3
# Times a run chooses ports again, before starting anything, because another run on the same machine
# recorded one of them at the same time.
MAX_PORT_CLASHES = 20
# remote_state entry listing the launches whose chosen ports turned out to be taken.
PORT_RETRIES_KEY = "port_retries"


@dataclass(frozen=True)
class RunEvent:
    """Something a watcher (the CLI) may show: ``status`` changes, ``progress``, ``message``s."""

    kind: str
    run_id: int
    status: str
    message: str = ""
    data: dict[str, Any] = field(default_factory=dict)


EventHandler = Callable[[RunEvent], None]


class _HandedBack(Exception):
    """The run went back to the queue because other runs hold its GPUs."""


@dataclass(frozen=True)
class _Plan:
    config: EngineConfig
    adapter: EngineAdapter
    profiles: list[BenchmarkProfile]
    host: HostConfig


def _load_plan(run: Run, inventory: Inventory) -> _Plan:
    try:
        config = EngineConfig.model_validate(run.config or {})
        # the preflight judges one-word values with the installed engine before anything starts
        adapter = get_adapter(config.engine).leaving_words_to_engine()
        adapter.validate(config)
        adapter.check_launch(config)
        profiles = [BenchmarkProfile.model_validate(profile) for profile in run.profiles]
    except (ValidationError, EngineConfigError, ValueError) as exc:
        raise RunFailed("invalid_config", f"run {run.id} cannot be executed: {exc}") from None
    if not profiles:
        raise RunFailed("invalid_config", f"run {run.id} has no benchmark profile")
    if run.host_name is None:
        raise RunFailed("host_unknown", f"run {run.id} names no host")
    try:
        host = inventory.get(run.host_name)
    except InventoryError as exc:
        raise RunFailed("host_unknown", str(exc)) from None
    try:
        check_env(config, host)
    except EnvNotAllowed as exc:
        raise RunFailed("invalid_config", f"run {run.id} cannot be executed: {exc}") from None
    return _Plan(config, adapter, profiles, host)


class _Execution:
    def __init__(
        self,
        store: RunStore,
        inventory: Inventory,
        *,
        worker_id: str,
        stop_reason: Callable[[], str | None],
        options: RunnerOptions,
        on_event: EventHandler | None,
    ) -> None:
        self.store = store
        self.inventory = inventory
        self.worker_id = worker_id
        self.stop_reason = stop_reason
        self.options = options
        self.on_event = on_event
        self.status = "launching"
        self.transport: Transport | None = None
        self.remote_state: dict[str, Any] | None = None
        self.on_cpu = False
        self.container: ContainerPlan | None = None
        self.engine_version: str | None = None
        # What the preflight learned from the engine itself: its version, the effective knob values.
        self.engine_facts: dict[str, Any] = {}
        self._last_cancel_check = 0.0
        # Set when the run's row turned out to be deleted while the run was in flight.
        self.deleted = False
        self.disk: DiskWatch | None = None

    # ----- events and interruption -------------------------------------------------------------------

    def emit(self, kind: str, message: str = "", **data: Any) -> None:
        if self.on_event is not None:
            self.on_event(RunEvent(kind, self.store.run_id, self.status, message, data))

    def set_status(self, status: str, message: str, **fields: Any) -> None:
        self.store.set_status(status, **fields)
        self.status = status
        self.emit("status", message)

    def progress(self, values: dict[str, Any]) -> None:
        self.store.heartbeat(progress={"phase": self.status, **values})
        self.emit("progress", **values)

    def download_progress(self, profile: BenchmarkProfile) -> Callable[[int, int | None], None]:
        """Progress of fetching ``profile``'s hub dataset, stored at most every second."""
        last = [0.0]

        def report(done: int, total: int | None) -> None:
            now = time.monotonic()
            if now - last[0] >= DOWNLOAD_PROGRESS_S or (total is not None and done >= total):
                last[0] = now
                self.interrupt()
                shown = f"{done / MIB:.0f} of {total / MIB:.0f} MiB" if total else f"{done / MIB:.0f} MiB"
                self.progress({"downloading": profile.dataset_ref or SHAREGPT_FILE, "log_line": shown})

        return report

    def interrupt(self) -> None:
        """Raise when the worker shuts down (``worker_stopped`` with its reason), the host's workdir
        disk is full (``disk_full``, checked every few seconds) or a user asked to cancel (checked at
        most every 0.5 s)."""
        reason = self.stop_reason()
        if reason is not None:
            raise RunFailed("worker_stopped", reason)
        if self.disk is not None:
            self.disk.check()
        if self.store.unavailable is not None:
            raise RunFailed("database_unavailable", self.store.unavailable)
        now = time.monotonic()
        if now - self._last_cancel_check >= CANCEL_CHECK_S:
            self._last_cancel_check = now
            if self.store.cancel_requested():
                raise RunCancelled()

    # ----- phases ------------------------------------------------------------------------------------

    def _open(self, host: HostConfig) -> Transport:
        """The host's transport, once its workdir's disk has room (:mod:`perflab.runner.disks`)."""
        try:
            transport = open_transport(host)
        except (TransportError, SimulatedHostError) as exc:
            raise RunFailed("host_unreachable", f"host '{host.name}': {exc}") from None
        except OSError as exc:  # preparing a simulated host's tools in its workdir
            if not is_disk_full(exc):
                raise
            raise disk_full(host.name, host.workdir, exc.strerror or str(exc)) from None
        self.disk = DiskWatch(transport)
        self.disk.check()
        return transport

    def _stop_orphans(self, host_name: str) -> bool:
        """Stop what runs no longer in flight left on the host (see :mod:`perflab.runner.orphans`);
        whether anything was stopped."""
        assert self.transport is not None
        stopped = stop_orphans(
            self.transport,
            lambda run_keys: self.store.ended_run_keys(host_name, run_keys),
            grace_s=self.options.stop_grace_s,
        )
        if stopped:
            described = ", ".join(f"{name} ({outcome})" for name, outcome in sorted(stopped.items()))
            logger.info("run %s: stopped processes earlier runs left on host %s: %s", self.store.run_id,
                        host_name, described)  # fmt: skip
            self.emit("message", f"stopped processes earlier runs left on host '{host_name}': {described}")
        return bool(stopped)

    def _place(self, plan: _Plan, probe: ProbeResult) -> tuple[tuple[int, ...], ProbeResult]:
        """The GPUs locked for the run, and the probe they were chosen from.

        Processes earlier runs left behind are stopped first (an orphan holds its port and memory even
        where enough GPUs are free without its own). Then every try reads what this database's runs
        hold or released moments ago, probes the accelerators' memory, and reads again: memory on a GPU
        one of our runs held at either read is that run's engine (running or freeing its memory), never
        someone else's, so the run waits for it instead of failing ``gpus_unavailable``."""
        assert self.transport is not None
        host_name = plan.host.name
        self._stop_orphans(host_name)
        drain_s = self.options.gpu_drain_s
        races = 0
        while True:
            self.interrupt()
            locked_before, recent_before = self.store.gpu_holders(host_name, drain_s=drain_s)
            if not self.on_cpu:
                probe = probe.model_copy(update={"accelerators": probe_accelerators(self.transport)})
            locked, recent = self.store.gpu_holders(host_name, drain_s=drain_s)
            ours = {**recent_before, **recent, **locked_before}
            try:
                gpu_ids = choose_gpus(
                    plan.config,
                    probe.accelerators,
                    locked,
                    host_name=host_name,
                    draining=ours,
                    why_none=why_no_accelerators(probe),
                )
                if self.store.acquire_gpus(host_name=host_name, gpu_ids=gpu_ids, worker_id=self.worker_id):
                    return gpu_ids, probe
                races += 1
                if races < MAX_LOCK_RACES:
                    continue
                raise GpusBusy("other runs kept locking the chosen GPUs first")
            except GpusBusy as busy:
                if self.options.hand_back_when_busy:
                    raise _HandedBack(str(busy)) from None
                self.progress({"waiting_for_gpus": str(busy)})
                time.sleep(self.options.gpu_wait_poll_s)

    def _record_started(self, replica: Replica, command: str) -> None:
        assert self.remote_state is not None
        for entry in self.remote_state["processes"]:
            if entry["name"] == replica.name:
                entry.update(pid=replica.process.pid, start_time=replica.process.start_time)
        run = self.store.load()
        self.store.update(remote_state=dict(self.remote_state), serve_commands=[*run.serve_commands, command])
        self.emit(
            "message", f"started {replica.name} on port {replica.port} (GPUs {list(replica.plan.gpu_ids)})"
        )

    def _pull_progress(self, image: str) -> Callable[[str], None]:
        def on_line(line: str) -> None:
            self.interrupt()
            self.progress({"pulling": image, "log_line": line})

        self.emit("message", f"making sure image {image} is on the host")
        return on_line

    def _prepare_container(self, plan: _Plan, transport: Transport, probe: ProbeResult, vendor: str) -> None:
        """Runtime, image and the image's engine version; recorded, then the preflight in the image."""
        assert plan.config.image is not None
        self.container, info = containers.prepare(
            transport,
            probe,
            image=plan.config.image,
            engine=plan.config.engine,
            run_id=self.store.run_id,
            vendor=vendor,
            pull_timeout_s=self.options.pull_timeout_s,
            on_line=self._pull_progress(plan.config.image),
        )
        self.engine_version = self.container.engine_version
        snapshot = dict(self.store.load().environment or {})
        snapshot["container"] = containers.snapshot(self.container, info, probe)
        snapshot["engine_version"] = self.engine_version
        self.store.update(environment=snapshot)
        self._preflight(plan, transport, prefix=self.container.oneshot(transport))

    def _record_bench(self, entry: dict[str, Any] | None) -> None:
        assert self.remote_state is not None
        if entry is None:
            self.remote_state.pop(BENCH_KEY, None)
        else:
            self.remote_state[BENCH_KEY] = entry
        self.store.update(remote_state=dict(self.remote_state))

    def _start_ready(
        self, plan: _Plan, run_id: int, plans: list[Any], endpoints: Endpoints, machine: set[str]
    ) -> list[Replica]:
        """Record one set of replicas (a disaggregated configuration's workers and router), make sure no
        other run on the same machine (the host names in ``machine``) recorded one of their ports
        meanwhile (:class:`PortClash`), start them, then wait until every one is ready."""
        assert self.transport is not None
        run_key = new_run_key(run_id)
        retries = (self.remote_state or {}).get(PORT_RETRIES_KEY)
        disaggregated = plan.config.disaggregation is not None
        if disaggregated:
            self.remote_state = disagg.initial_state(self.transport, run_key=run_key, plans=plans)
            start = disagg.start_workers
        else:
            self.remote_state = initial_remote_state(
                self.transport, run_key=run_key, plans=plans, container=self.container
            )
            start = partial(start_replicas, container=self.container)
        if retries:
            self.remote_state[PORT_RETRIES_KEY] = retries
        self.store.update(remote_state=dict(self.remote_state), serve_commands=[])
        # Recorded before this read, so of two runs that chose one port at least the later reader yields.
        clash = recorded_ports(self.remote_state) & self.store.ports_of_other_runs(machine)
        if clash and plan.config.port is None:
            raise PortClash(clash, plan.host.name)
        self.interrupt()
        # what starting the engines and (once they are ready) a router both need
        launch = {
            "config": plan.config,
            "adapter": plan.adapter,
            "run_key": run_key,
            "plans": plans,
            "on_started": self._record_started,
        }
        replicas = start(self.transport, cpu=self.on_cpu, engine_version=self.engine_version, **launch)
        logs = {replica.name: LogFollower(self.transport, replica.process) for replica in replicas}
        deadline_s = self.options.ready_deadline_s(simulated=plan.host.simulated)
        wait_until_ready(
            self.transport,
            plan.adapter,
            replicas,
            endpoints=endpoints,
            logs=logs,
            deadline_s=deadline_s,
            poll_s=self.options.ready_poll_s,
            interrupt=self.interrupt,
            on_progress=lambda ready, line: self.progress(
                {"replicas_ready": ready, "replicas": len(replicas), "log_line": line}
            ),
        )
        if disaggregated:
            self.emit("message", f"{len(replicas)} workers ready; starting the router")
            router = disagg.start_router(
                self.transport,
                deadline_s=deadline_s,
                poll_s=self.options.ready_poll_s,
                interrupt=self.interrupt,
                **launch,
            )
            replicas = [*replicas, router]
        return replicas

    def _launch(
        self, plan: _Plan, gpu_ids: tuple[int, ...], run_id: int, endpoints: Endpoints
    ) -> list[Replica]:
        """Start the replicas on free ports until they are ready. Ports are searched from the run's
        offset, avoiding those other unfinished runs on the same machine recorded; ports another run
        recorded at the same moment are chosen again before anything starts (up to
        ``MAX_PORT_CLASHES`` times). A port taken between the choice and the engine's bind
        (``port_in_use`` before the start or in the engine's log) is stopped and chosen again, up to
        ``MAX_PORT_ATTEMPTS`` launches; a pinned port is never changed."""
        assert self.transport is not None
        machine = same_machine_hosts(self.inventory, plan.host)
        tried: set[int] = set()
        attempt = 1
        clashes = 0
        while True:
            avoid = listening_ports(self.transport) | self.store.ports_of_other_runs(machine) | tried
            ports = PortSearch(plan.adapter.default_port + search_offset(run_id), set(avoid), plan.host.name)
            planner = disagg.plan_workers if plan.config.disaggregation is not None else plan_replicas
            plans = planner(plan.config, gpu_ids, ports)
            try:
                return self._start_ready(plan, run_id, plans, endpoints, machine)
            except PortClash as clash:
                clashes += 1
                if clashes == MAX_PORT_CLASHES:
                    raise
                tried.update(clash.ports)
            except RunFailed as failure:
                if failure.failure_class != "port_in_use" or plan.config.port is not None:
                    raise
                if attempt == MAX_PORT_ATTEMPTS:
                    raise RunFailed(
                        "port_in_use", f"{failure.message} (after {attempt} launches on other free ports)"
                    ) from None
                assert self.remote_state is not None
                stop_recorded(self.transport, self.remote_state, grace_s=self.options.stop_grace_s)
                taken = sorted(recorded_ports(self.remote_state))
                tried.update(taken)
                self.remote_state[PORT_RETRIES_KEY] = [
                    *self.remote_state.get(PORT_RETRIES_KEY, []),
                    {"ports": taken, "reason": failure.message},
                ]
                self.emit("message", f"port taken at launch, choosing another: {failure.message}")
                attempt += 1

    def _preflight(self, plan: _Plan, transport: Transport, prefix: Sequence[str] = ()) -> None:
        """Refuse, before anything is started, flags and values the host's engine lacks (with
        ``prefix``, the engine of the run's image); a disaggregated configuration's transfer backend by
        the host's release, and each role's worker as the engine parses it."""
        configs = [plan.config]
        if plan.config.disaggregation is not None:
            try:
                check_disaggregation(plan.config, plan.adapter.display_name, self.engine_version)
            except EngineConfigError as exc:
                raise RunFailed("unknown_argument", str(exc)) from None
            configs = [worker_config(plan.config, role) for role in ROLES]
        for config in configs:
            verdict = preflight(
                transport,
                plan.adapter,
                config,
                engine_version=self.engine_version,
                prefix=prefix,
                cache=default_cache(),
            )
            if not verdict.ok:
                raise RunFailed("launch_failed" if verdict.missing else "unknown_argument", verdict.summary())
        self.emit("message", verdict.summary())
        if verdict.version:
            self.engine_version = verdict.version
            self.engine_facts["engine_version"] = verdict.version
        if verdict.effective is not None:
            self.engine_facts["effective_config"] = dict(verdict.effective)
        if self.engine_facts and prefix:
            self.store.update(environment={**(self.store.load().environment or {}), **self.engine_facts})

    def _execute(self) -> None:
        run = self.store.load()
        if run.cancel_requested:
            raise RunCancelled()
        plan = _load_plan(run, self.inventory)
        for profile in plan.profiles:  # before anything starts, as the benchmark checks again before sending
            problem = dataset_problem(self.store.engine, profile, plan.host)
            if problem is not None:
                raise RunFailed("dataset_missing", problem)
        self.emit(
            "status", f"launching {plan.adapter.display_name} for {plan.config.model} on {plan.host.name}"
        )
        self.transport = transport = self._open(plan.host)
        probe = probe_host(transport)
        self.on_cpu = check_cpu_engine(plan.adapter, probe, host_name=plan.host.name)
        if plan.config.image is None:
            self.engine_version = probe.engines.get(plan.config.engine)
            self._preflight(plan, transport)
        gpu_ids, probe = self._place(plan, probe)
        self.store.update(
            gpu_ids=list(gpu_ids),
            simulated=plan.host.simulated,
            accelerator=environment.accelerator_label(probe, gpu_ids),
            environment={
                **environment.snapshot(plan.host, probe, engine=plan.config.engine, gpu_ids=gpu_ids),
                **self.engine_facts,
            },
        )
        vendor = next((acc.vendor for acc in probe.accelerators if acc.index in gpu_ids), "nvidia")
        if plan.config.image is not None:
            self._prepare_container(plan, transport, probe, vendor)
        with ExitStack() as stack:
            endpoints = stack.enter_context(Endpoints(transport, plan.adapter))
            replicas = self._launch(plan, gpu_ids, run.id, endpoints)
            # a disaggregated configuration is benchmarked through its router; its workers are sampled
            engines = [replica for replica in replicas if replica.name != disagg.ROUTER]
            targets = [replica for replica in replicas if replica.name == disagg.ROUTER] or replicas
            self.set_status("ready", f"{len(replicas)} replica(s) ready")
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="perflab-run-")))
            sampler = stack.enter_context(
                Sampler(
                    transport=transport,
                    adapter=plan.adapter,
                    endpoints=endpoints,
                    replicas=engines,
                    gpu_ids=gpu_ids,
                    vendor=vendor,
                    store=self.store,
                    interval_s=self.options.sample_interval_s,
                )
            )
            self.set_status("benchmarking", f"benchmarking {len(plan.profiles)} profile(s)")
            context = BenchContext(
                transport=transport,
                adapter=plan.adapter,
                store=self.store,
                run_key=self.remote_state["run_key"],
                model=plan.adapter.served_name(plan.config),
                replicas=replicas,
                targets=targets,
                watch_logs=plan.config.disaggregation is not None,
                wall_clock_note=disagg.wall_clock_note(plan.config.engine)
                if plan.config.disaggregation is not None and plan.host.simulated
                else None,
                timeout_s=self.options.bench_timeout_s,
                interrupt=self.interrupt,
                on_progress=self.progress,
                dataset_files=lambda profile, notes: dataset_files(
                    self.store.engine, profile, directory, plan.host, notes, self.download_progress(profile)
                ),
                record_bench=self._record_bench,
                sample_clock=sampler.elapsed,
            )
            run_profiles(context, plan.profiles, flat_gain=self.options.flat_gain)

    # ----- the end, whatever happened ----------------------------------------------------------------

    def _disk_full_fields(self, error: BaseException) -> dict[str, Any]:
        """The failure fields of a run a full disk under the host's workdir stopped."""
        host = self.transport.host if self.transport is not None else None
        workdir = self.transport.workdir if self.transport is not None else "?"
        failure = disk_full(
            host.name if host else "?", workdir, getattr(error, "strerror", None) or str(error)
        )
        return {"failure_class": failure.failure_class, "failure_message": failure.message}

    def _deleted(self, error: BaseException) -> bool:
        """Whether ``error`` says this run's row is gone (a user deleted the run meanwhile)."""
        return isinstance(error, NotFound) and error.kind == "run" and error.key == self.store.run_id

    def _cleanup(self) -> dict[str, Any]:
        """Stop what the run started, keep its log excerpt, release its GPUs; the fields to store. A
        run deleted meanwhile still has its processes stopped, with nothing stored of them."""
        fields: dict[str, Any] = {}
        transport, remote_state = self.transport, self.remote_state
        if transport is not None and remote_state is not None:
            try:
                fields["log_tail"] = wind_down(
                    transport,
                    self.store,
                    remote_state,
                    grace_s=self.options.stop_grace_s,
                    log_lines=self.options.log_tail_lines,
                    retry_delays_s=self.options.reconnect_delays_s,
                )
            except TransportError as exc:
                remote_state["cleanup_error"] = str(exc)
            except NotFound as exc:
                if not self._deleted(exc):
                    raise
                self.deleted = True
            fields["remote_state"] = dict(remote_state)
        self.store.release_gpus()
        if transport is not None:
            transport.close()
        return fields

    def run(self) -> str:
        try:
            self._execute()
            status, fields = "done", {}
        except _HandedBack as back:
            status, fields = "queued", {"progress": {"phase": "queued", "waiting_for_gpus": str(back)}}
        except RunCancelled:
            status, fields = "cancelled", {}
        except RunFailed as failure:
            status, fields = (
                "failed",
                {"failure_class": failure.failure_class, "failure_message": failure.message},
            )
        except TransportError as exc:
            status = "failed"
            failure = transport_failure(
                exc, local=self.transport is not None and self.transport.host.transport == "local"
            )
            fields = {"failure_class": failure.failure_class, "failure_message": failure.message}
            if is_disk_full(exc):
                fields = self._disk_full_fields(exc)
        except Exception as exc:  # the database lost, or a bug: the engines must stop and the run end
            status = "failed"
            if self._deleted(exc):
                status, fields = DELETED, {}
            elif is_disk_full(exc) and not isinstance(exc, sa.exc.SQLAlchemyError):
                fields = self._disk_full_fields(exc)
            elif self.store.database_failed(exc):
                fields = {"failure_class": "database_unavailable", "failure_message": self.store.unavailable}
            else:
                logger.exception("run %s failed unexpectedly", self.store.run_id)
                message = f"{type(exc).__name__}: {exc}"
                fields = {"failure_class": "internal_error", "failure_message": message}
        fields.update(self._cleanup())
        if status == DELETED or self.deleted:
            return self._gone()
        try:
            self.set_status(status, fields.get("failure_message") or status, **fields)
        except IllegalTransition as exc:
            logger.warning("run %s was finished elsewhere: %s", self.store.run_id, exc)
            return self.store.load().status
        except NotFound as exc:
            if not self._deleted(exc):
                raise
            return self._gone()
        self.store.flush()
        return status

    def _gone(self) -> str:
        """The end of a run deleted while it was in flight: one line in the log."""
        logger.warning("run %s was deleted while in flight: its processes were stopped, nothing stored",
                       self.store.run_id)  # fmt: skip
        return DELETED


def execute_run(
    run_id: int,
    *,
    engine: Engine,
    inventory: Inventory,
    worker_id: str,
    stop_reason: Callable[[], str | None] = lambda: None,
    options: RunnerOptions | None = None,
    on_event: EventHandler | None = None,
) -> str:
    """Drive claimed run ``run_id`` (status ``launching``) to its end; returns the final status
    (``done``, ``failed``, ``cancelled``, ``queued`` when it was handed back to the queue, or
    :data:`DELETED` when its row was deleted meanwhile: its processes are stopped all the same).
    ``stop_reason()`` says why the run must stop now (its worker shuts down), None while it may go on."""
    store = RunStore(engine, run_id, hosts_redactor(inventory))
    run = store.load()
    if run.status != "launching":
        raise ValueError(f"run {run_id} is {run.status!r}; only a claimed (launching) run can be executed")
    execution = _Execution(
        store,
        inventory,
        worker_id=worker_id,
        stop_reason=stop_reason,
        options=options or RunnerOptions(),
        on_event=on_event,
    )
    return execution.run()
