"""``python -m perflab worker``: execute queued runs until stopped (SIGTERM / Ctrl-C), or once.

The database schema is brought up to date first. ``--once`` claims what can start now, waits for
those runs and exits; otherwise the worker polls the queue until it is stopped, and in-flight runs
then stop their engines and end failed (``worker_stopped``).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from types import FrameType

from db.pool_sizes import DEFAULT_MAX_PARALLEL, POOL_FIXED_CONNECTIONS


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--once", action="store_true", help="run what can start now, wait for it, exit")
    parser.add_argument(
        "--max-parallel",
        type=_positive_int,
        default=DEFAULT_MAX_PARALLEL,
        help=f"runs executed at once (default {DEFAULT_MAX_PARALLEL}); on PostgreSQL the worker keeps at "
        f"most this + {POOL_FIXED_CONNECTIONS} database connections",
    )
    parser.add_argument(
        "--worker-id",
        default=None,
        help="stable id: a restart with the same id recovers its runs at once "
        "(default: worker-<hostname>-<pid>)",
    )
    parser.add_argument("--poll", type=_positive_float, default=2.0, help="seconds between queue polls")
    parser.add_argument(
        "--hosts", default=None, help="hosts file (default: $PERFLAB_HOSTS or <repo>/hosts.yaml)"
    )


def _wait_for_signal() -> None:
    stop = threading.Event()

    def handle(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    while not stop.wait(1.0):
        pass


def run(args: argparse.Namespace) -> int:
    from db.session import configure_pool, describe
    from perflab import settings
    from perflab.redact import install_log_redaction
    from perflab.worker.worker import Worker, default_worker_id

    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr
    )
    logging.getLogger("perflab").setLevel(logging.INFO)
    install_log_redaction(args.hosts)
    configure_pool(args.max_parallel)
    try:
        settings.check()
        engine = settings.open_database()
    except settings.SettingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    worker = Worker(
        engine,
        inventory_path=args.hosts,
        worker_id=args.worker_id or default_worker_id(),
        poll_interval_s=args.poll,
        max_parallel_runs=args.max_parallel,
    )
    print(
        f"perflab worker {worker.worker_id}: database {describe()}, hosts {worker.inventory_path}", flush=True
    )
    if args.once:
        finished = worker.run_once()
        worker.stop()
        for run_id, status in finished.items():
            print(f"run {run_id}: {status}")
        if worker.last_inventory_error:
            print(f"error: {worker.last_inventory_error}", file=sys.stderr)
            return 2
        return 0
    worker.start()
    _wait_for_signal()
    print("stopping: in-flight runs stop their engines", flush=True)
    worker.stop()
    return 0
