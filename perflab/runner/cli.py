"""``python -m perflab run``: launch one engine config on a host, benchmark it, print the results.

Validates the config (one-line errors naming the flag), stores the run, and executes it in this
process — printing phase changes and benchmark progress, then the result block of every profile (or
one JSON object with ``--json``) — or, with ``--queue``, only queues it for a worker. Ctrl-C
(SIGINT) cancels the run; SIGTERM stops it, ending it ``failed`` (``worker_stopped``) with "perflab run
received SIGTERM" as its message. Either way its benchmark and engines are stopped and what was
measured is kept. Exit status: 0 done, 1 failed, 2 bad input, 130 cancelled, 143 stopped by SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from types import FrameType
from typing import TYPE_CHECKING, Any

from perflab.engines import ENGINE_NAMES, EngineConfig, EngineConfigError
from perflab.engines.flags import shown

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from perflab.profiles import BenchmarkProfile
    from perflab.runner.execute import RunEvent
    from perflab.worker.worker import RunHandle, Worker

EXIT_STATUS = {"done": 0, "failed": 1, "cancelled": 130}
EXIT_BAD_INPUT = 2
EXIT_TERMINATED = 128 + signal.SIGTERM
TERMINATED_MESSAGE = "perflab run received SIGTERM"
WAIT_POLL_S = 0.5

# (flag, config field, type) of the typed knobs; booleans take --flag / --no-flag.
KNOB_FLAGS: tuple[tuple[str, str, Any], ...] = (
    ("--tp", "tp", int),
    ("--dp", "dp", int),
    ("--ep", "ep", int),
    ("--quantization", "quantization", str),
    ("--attention-backend", "attention_backend", str),
    ("--max-num-batched-tokens", "max_num_batched_tokens", int),
    ("--max-num-seqs", "max_num_seqs", int),
    ("--enable-prefix-caching", "enable_prefix_caching", bool),
    ("--kv-cache-dtype", "kv_cache_dtype", str),
    ("--enable-chunked-prefill", "enable_chunked_prefill", bool),
    ("--speculative-config", "speculative_config", json.loads),
    ("--performance-mode", "performance_mode", str),
    ("--max-model-len", "max_model_len", int),
    ("--gpu-memory-utilization", "gpu_memory_utilization", float),
    ("--reasoning-parser", "reasoning_parser", str),
    ("--cpu-kvcache-space-gib", "cpu_kvcache_space_gib", int),
    ("--cpu-omp-threads-bind", "cpu_omp_threads_bind", str),
    ("--cpu-reserved-cores", "cpu_reserved_cores", int),
    ("--served-model-name", "served_model_name", str),
    ("--replicas", "replicas", int),
    ("--port", "port", int),
)
FLAG_OF_FIELD = {field: flag for flag, field, _ in KNOB_FLAGS} | {
    "gpu_ids": "--gpu-ids",
    "env": "--env",
    "extra_args": "--extra-arg",
    "model": "--model",
    "image": "--image",
}


class BadInput(ValueError):
    """A command-line value perflab cannot use (the message is printed as ``error: …``)."""


class Terminated(Exception):
    """SIGTERM reached ``perflab run`` (raised once; later ones are ignored while it winds down)."""


def _terminated(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated()


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", required=True, help="a host of the hosts file")
    parser.add_argument("--engine", required=True, choices=ENGINE_NAMES)
    parser.add_argument("--model", required=True, help="hub id or path")
    parser.add_argument(
        "--image",
        default=None,
        help="run the engine from this container image, e.g. vllm/vllm-openai:v0.32.0 "
        "(with the host's podman or docker)",
    )
    knobs = parser.add_argument_group("engine knobs (left out: the engine's default)")
    for flag, field, kind in KNOB_FLAGS:
        if kind is bool:
            knobs.add_argument(flag, dest=field, action=argparse.BooleanOptionalAction, default=None)
        else:
            knobs.add_argument(flag, dest=field, default=None, metavar=field.upper())
    knobs.add_argument(
        "--gpu-ids", default=None, help="comma-separated accelerator ids, e.g. 0,1 (NUMA nodes on a CPU host)"
    )
    knobs.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="engine environment")
    knobs.add_argument(
        "--extra-arg",
        action="append",
        default=[],
        dest="extra_args",
        metavar="ARG",
        help="passed verbatim to the engine, e.g. --extra-arg=--enforce-eager (repeatable)",
    )
    parser.add_argument(
        "--profile",
        action="append",
        required=True,
        dest="profiles",
        metavar="SPEC",
        help="preset name or spec, e.g. short, random:in=1024,out=128,n=100 (repeatable)",
    )
    parser.add_argument("--label", default=None)
    parser.add_argument("--queued-by", default=None, help="who queued the run (default: $USER)")
    parser.add_argument(
        "--hosts", default=None, help="hosts file (default: $PERFLAB_HOSTS or <repo>/hosts.yaml)"
    )
    parser.add_argument(
        "--ready-timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds the engine may take to become ready",
    )
    parser.add_argument("--queue", action="store_true", help="only queue the run for a worker")
    parser.add_argument("--json", action="store_true", help="print the run and its results as JSON")


def _convert(flag: str, kind: Any, text: str) -> Any:
    try:
        return kind(text)
    except ValueError as exc:
        raise BadInput(f"{flag} {shown(text)}: {exc}") from None
    except RecursionError:  # JSON nested deeper than the decoder goes
        raise BadInput(f"{flag} {shown(text)}: nested too deeply") from None


def _env(items: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BadInput(f"--env {item!r}: expected KEY=VALUE")
        env[key] = value
    return env


def _gpu_ids(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise BadInput(f"--gpu-ids {text!r}: expected comma-separated integers such as 0,1") from None


def build_config(args: argparse.Namespace) -> EngineConfig:
    """The engine config of the command line; :class:`BadInput` names the offending flag."""
    from pydantic import ValidationError

    fields: dict[str, Any] = {"engine": args.engine, "model": args.model}
    for flag, field, kind in KNOB_FLAGS:
        value = getattr(args, field)
        if value is not None:
            fields[field] = value if kind is bool else _convert(flag, kind, value)
    fields["env"] = _env(args.env)
    fields["extra_args"] = tuple(args.extra_args)
    fields["gpu_ids"] = _gpu_ids(args.gpu_ids)
    if args.image is not None:
        fields["image"] = args.image
    try:
        return EngineConfig(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        where = FLAG_OF_FIELD.get(field, field or "config")
        raise BadInput(f"{where}: {str(first['msg']).removeprefix('Value error, ')}") from None


def _profiles(specs: list[str]) -> list[BenchmarkProfile]:
    from perflab.runner.profile_spec import ProfileSpecError, parse_profile

    try:
        return [parse_profile(spec) for spec in specs]
    except ProfileSpecError as exc:
        raise BadInput(str(exc)) from None


def _print_event(event: RunEvent) -> None:
    if event.kind == "status":
        print(f"[run {event.run_id}] {event.status}: {event.message}", file=sys.stderr, flush=True)
    elif event.kind == "message":
        print(f"[run {event.run_id}] {event.message}", file=sys.stderr, flush=True)
    elif event.kind == "progress" and "waiting_for_gpus" in event.data:
        print(f"[run {event.run_id}] waiting: {event.data['waiting_for_gpus']}", file=sys.stderr, flush=True)
    elif event.kind == "progress" and "pulling" in event.data:
        line = event.data.get("log_line", "")
        print(f"[run {event.run_id}] pulling {event.data['pulling']}: {line}", file=sys.stderr, flush=True)
    elif event.kind == "progress" and "total" in event.data:
        data = event.data
        point = data.get("sweep_point")
        at = f" @ {point['kind']}={point['value']:g}" if point else ""
        print(
            f"[run {event.run_id}] {data.get('profile')}{at}: {data.get('done', 0)}/{data['total']} done, "
            f"{data.get('failed', 0)} failed, {data.get('elapsed_s', 0):.0f} s"
            + (f" ({data['step']})" if data.get("step") else ""),
            file=sys.stderr,
            flush=True,
        )


def _wait(engine: Engine, handle: RunHandle, run_id: int) -> None:
    """Wait until the run ends; Ctrl-C asks it to cancel (and the wait goes on until it has)."""
    import sqlalchemy as sa

    from db import crud
    from db.session import new_session
    from perflab.runner import spool

    while True:
        try:
            if handle.wait(WAIT_POLL_S):
                return
        except KeyboardInterrupt:
            print(f"[run {run_id}] cancelling: stopping the engines", file=sys.stderr, flush=True)
            try:
                with new_session(engine) as session:
                    crud.request_cancel(session, run_id=run_id)
            except sa.exc.DBAPIError as exc:
                if not spool.unavailable(exc):
                    raise
                print(f"[run {run_id}] cannot ask it to cancel: {spool.first_line(exc)}", file=sys.stderr)


def _execute(engine: Engine, worker: Worker, run_id: int) -> tuple[str, bool]:
    """Execute the run in this process until it ends: its final status, and whether SIGTERM stopped
    it (the worker then stops the run's benchmark and engines, the run's message saying why)."""
    from db import crud
    from db.session import new_session

    terminated = False
    handle: RunHandle | None = None
    try:
        handle = worker.execute(run_id, on_event=_print_event)
        _wait(engine, handle, run_id)
    except Terminated:
        terminated = True
        print(f"[run {run_id}] {TERMINATED_MESSAGE}: stopping the benchmark and the engines", file=sys.stderr,
              flush=True)  # fmt: skip
        worker.stop(reason=f"{TERMINATED_MESSAGE} while the run was in flight")
    worker.stop()
    if handle is not None and handle.status is not None:
        return handle.status, terminated
    with new_session(engine) as session:
        return crud.require_run(session, run_id=run_id).status, terminated


def _unstored_end(engine: Engine, run_id: int) -> str | None:
    """Why the run's end is not in the database (it is still in flight there), or None when it is."""
    import sqlalchemy as sa

    from db import crud
    from db.models import FINISHED_RUN_STATUSES
    from db.session import new_session
    from perflab.runner import spool

    try:
        with new_session(engine) as session:
            stored = crud.require_run(session, run_id=run_id).status
    except sa.exc.DBAPIError as exc:
        return spool.first_line(exc)
    return None if stored in FINISHED_RUN_STATUSES else f"it is still '{stored}' there"


def run(args: argparse.Namespace) -> int:
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        return _run(args)
    except Terminated:
        print(f"error: {TERMINATED_MESSAGE} before its run started", file=sys.stderr)
        return EXIT_TERMINATED
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run(args: argparse.Namespace) -> int:
    from perflab import settings
    from perflab.auth import cli_user
    from perflab.inventory import InventoryError, default_inventory_path, load_inventory
    from perflab.runner import spool
    from perflab.runner.report import run_json, run_text
    from perflab.runner.submit import submit_run

    try:
        config = build_config(args)
        profiles = _profiles(args.profiles)
        hosts_file = args.hosts or default_inventory_path()
        host = load_inventory(hosts_file).get(args.host)
        if args.ready_timeout is not None and args.ready_timeout <= 0:
            raise BadInput(f"--ready-timeout {args.ready_timeout:g}: must be > 0")
        ready_timeout = args.ready_timeout or settings.ready_timeout_s(simulated=host.simulated)
        engine = settings.open_database()
        spool.replay_all(engine)
    except (BadInput, InventoryError, settings.SettingError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    worker = None
    if not args.queue:
        # A queued run is left to the workers: only a run executed here needs one (and its imports).
        from perflab.runner.options import RunnerOptions
        from perflab.worker.worker import Worker, default_worker_id

        options = RunnerOptions(ready_timeout_s=ready_timeout, hand_back_when_busy=False)
        worker = Worker(
            engine, inventory_path=hosts_file, worker_id=default_worker_id("cli"), runner_options=options
        )
    try:
        stored = submit_run(
            engine,
            host_name=args.host,
            config=config,
            profiles=profiles,
            worker_id=None if worker is None else worker.worker_id,
            queued_by=cli_user(args.queued_by),
            label=args.label,
            host=host,
        )
    except (EngineConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    link = settings.run_page_url(stored.id)
    if worker is None:
        print(
            json.dumps({"run_id": stored.id, "status": stored.status, "url": link})
            if args.json
            else f"queued run {stored.id}: {link}"
        )
        return 0
    print(f"[run {stored.id}] run page: {link}", file=sys.stderr, flush=True)
    status, terminated = _execute(engine, worker, stored.id)
    if spool.pending(stored.id):
        print(
            f"error: run {stored.id} ended {status}, but the database could not be written: its results "
            f"are kept in {spool.spool_path(stored.id)} and stored once it can be written again (by any "
            "perflab worker, or the next `perflab run`)",
            file=sys.stderr,
        )
        return 1
    unstored = _unstored_end(engine, stored.id)
    if unstored is not None:
        print(
            f"error: run {stored.id} ended {status}, but neither the database nor its spool could be "
            f"written ({unstored}); a perflab worker will end it once the database takes writes again",
            file=sys.stderr,
        )
        return 1
    if args.json:
        print(json.dumps({**run_json(engine, stored.id), "url": link}, indent=2))
    else:
        sys.stdout.write(run_text(engine, stored.id))
        print(f"Run page: {link}")
    return EXIT_TERMINATED if terminated else EXIT_STATUS.get(status, 1)
