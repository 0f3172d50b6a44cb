"""A team queue at fleet scale: W worker processes on one PostgreSQL database, N simulated hosts of 8
GPUs on this machine, R plain runs (TP 1/2/4/8, vLLM and SGLang) and S small studies, all queued at once.

PostgreSQL is started the way the test suite starts it (initdb + pg_ctl, ``tests/fixtures/database``)
unless ``--url`` names an empty database (e.g. one behind PgBouncer). Each worker is a real
``python -m perflab worker --max-parallel P`` process; the simulated hosts are ``transport: local``,
so they are one machine and share its ports. While the fleet works, a monitor samples the database's
connections (``pg_stat_activity``) and every simulated GPU's users (two engines on one GPU is an
overlap). When every run and study has ended the workers are stopped and the script prints the count
of each failure class, then, as its last line, one JSON object:

- ``runs``: runs that ended (plain and study runs); ``failed_waitable``: runs failed
  ``gpus_unavailable`` or ``port_in_use`` while another run of this database was in flight on the same
  host (GPUs) or machine (ports), or had ended there less than a minute before: failures that waiting
  would have avoided (there are no foreign processes here, so every such failure is one);
- ``gpu_overlaps``: samples in which a simulated GPU had engines of two processes;
- ``double_runs``: runs claimed by a worker while an earlier claim of them had not ended (worker logs);
- ``claim_latency_p50_s``/``claim_latency_max_s``: from a run being queued (or handed back) to its
  next claim, over every claim;
- ``connections_peak``: most client connections to the database at once (the workers' pools; the
  monitor's own and autovacuum excluded); ``connections_bound``: W × (P + 2), what the pools allow;
- ``runs_per_min``: runs ended per minute between the first claim and the last end;
- ``warnings``/``handed_back``: WARNING lines and "handed back to the queue" lines in the workers' logs;
- ``study_row_updates``: updates of ``study`` rows (``pg_stat_user_tables``), ``load_avg_max``.

    python benchmarks/fleet.py [--hosts 16] [--workers 4] [--runs 150] [--studies 3] [--max-parallel 4]
        [--time-scale 20] [--timeout-s 3600] [--url postgresql+psycopg://…/empty_db] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import sqlalchemy as sa  # noqa: E402
from sqlalchemy.engine import Engine, make_url  # noqa: E402
from sqlmodel import select  # noqa: E402

from db import session as db_session  # noqa: E402
from db.crud.studies import FINISHED_STUDY_STATUSES  # noqa: E402
from db.models import FINISHED_RUN_STATUSES, Run, Study, Worker  # noqa: E402
from perflab.engines import EngineConfig  # noqa: E402
from perflab.inventory import HostConfig, SimulateSpec, load_inventory  # noqa: E402
from perflab.runner import submit_run  # noqa: E402
from perflab.runner.profile_spec import parse_profile  # noqa: E402
from perflab.sim.gpustate import read_usage  # noqa: E402
from perflab.study.coordinator import create_study  # noqa: E402
from perflab.study.spec import parse_spec  # noqa: E402
from tests.fixtures.database import PostgresServer, local_postgres  # noqa: E402
from tests.fixtures.runs import write_hosts_file  # noqa: E402

MONITOR_NAME = "perflab-fleet-monitor"
MONITOR_EVERY_S = 0.25
WAITABLE = ("gpus_unavailable", "port_in_use")
DRAIN = timedelta(seconds=60)
PROFILE = "random:in=128,out=32,n=16"
ENGINES = ("vllm", "sglang")
TPS = (1, 2, 4, 8)
# "2026-11-26 05:40:01,123 INFO worker fleet-1: claimed run 7 on host sim-3"
LOG_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (\w+) worker \S+: (?:run|claimed run) (\d+)(.*)$"
)
STUDY_SPEC = """
name: fleet study {index}
model: Qwen/Qwen3-8B
hosts: [{hosts}]
baseline: {{engine: vllm}}
tuning_profile: {{name: tune, title: Tune, dataset: random, input_len: 128, output_len: 16, num_prompts: 12}}
validation_profiles:
  - {{name: val, title: Validation, dataset: random, input_len: 64, output_len: 16, num_prompts: 8}}
stages:
  - name: Engine
    dimension: engine
    candidates: [vllm, sglang]
  - name: Parallelism
    candidates:
      - {{tp: 2}}
"""


@dataclass
class Samples:
    """What the monitor saw while the fleet worked."""

    connections_peak: int = 0
    gpu_overlaps: int = 0
    load_avg_max: float = 0.0
    stop: threading.Event = field(default_factory=threading.Event)


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", type=int, default=16, help="simulated hosts of 8 GPUs (default 16)")
    parser.add_argument("--workers", type=int, default=4, help="worker processes (default 4)")
    parser.add_argument("--runs", type=int, default=150, help="plain runs queued (default 150)")
    parser.add_argument("--studies", type=int, default=3, help="studies queued (default 3)")
    parser.add_argument("--max-parallel", type=int, default=4, help="runs per worker at once (default 4)")
    parser.add_argument("--time-scale", type=float, default=20.0, help="simulated time and start-up scale")
    parser.add_argument("--timeout-s", type=float, default=3600.0, help="give up after this long")
    parser.add_argument("--url", default=None, help="an empty PostgreSQL database to use instead")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="a small run that tests run: 2 hosts, 2 workers, 6 runs, 1 study, time scale 50, 180 s",
    )
    args = parser.parse_args()
    if args.smoke:
        args.hosts, args.workers, args.runs, args.studies, args.max_parallel = 2, 2, 6, 1, 2
        args.time_scale, args.timeout_s = 50.0, 180.0
    for name in ("hosts", "workers", "max_parallel"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.runs < 0 or args.studies < 0:
        parser.error("--runs and --studies must not be negative")
    return args


@contextmanager
def _database(url: str | None) -> Iterator[str]:
    """The URL of an empty, migrated database: ``url``, or one on a PostgreSQL started here."""
    if url is not None:
        db_session.upgrade(url)
        yield db_session.normalize_url(url)
        return
    with local_postgres() as admin_url:
        created = PostgresServer(admin_url=admin_url).create_database("perflab_fleet")
        db_session.upgrade(created)
        db_session.get_engine(created).dispose()
        yield created


def _monitor_engine(url: str) -> Engine:
    return sa.create_engine(
        url,
        poolclass=sa.pool.NullPool,
        connect_args={"application_name": MONITOR_NAME, "prepare_threshold": None},
    )


def _monitor(engine: Engine, database: str, state_dirs: list[str], samples: Samples) -> None:
    count = sa.text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = :db AND application_name <> :me "
        "AND backend_type = 'client backend'"
    )
    with engine.connect() as connection:
        while not samples.stop.wait(MONITOR_EVERY_S):
            peak = connection.execute(count, {"db": database, "me": MONITOR_NAME}).scalar_one()
            connection.commit()
            samples.connections_peak = max(samples.connections_peak, int(peak))
            for state_dir in state_dirs:
                for uses in read_usage(state_dir).values():
                    if len({use.pid for use in uses}) > 1:
                        samples.gpu_overlaps += 1
            samples.load_avg_max = max(samples.load_avg_max, os.getloadavg()[0])


def _hosts(directory: Path, count: int, scale: float) -> list[HostConfig]:
    simulate = SimulateSpec(accelerator="H100", count=8, time_scale=scale, startup_scale=scale)
    return [
        HostConfig(
            name=f"sim-{index}", transport="local", workdir=str(directory / f"sim-{index}"), simulate=simulate
        )
        for index in range(1, count + 1)
    ]


def _queue(engine: Engine, hosts: list[HostConfig], runs: int, studies: int, hosts_file: Path) -> None:
    profile = parse_profile(PROFILE)
    for index in range(runs):
        config = EngineConfig(
            engine=ENGINES[index % len(ENGINES)],  # type: ignore[arg-type]
            model="Qwen/Qwen3-8B",
            tp=TPS[(index // len(ENGINES)) % len(TPS)],
        )
        submit_run(engine, host_name=hosts[index % len(hosts)].name, config=config, profiles=[profile])
    inventory = load_inventory(hosts_file)
    names = ", ".join(host.name for host in hosts)
    for index in range(1, studies + 1):
        create_study(engine, parse_spec(STUDY_SPEC.format(index=index, hosts=names)), inventory=inventory)


def _all_ended(engine: Engine) -> bool:
    with engine.connect() as connection:
        open_runs = connection.execute(
            sa.select(sa.func.count())
            .select_from(Run)
            .where(Run.status.not_in(sorted(FINISHED_RUN_STATUSES)))
        ).scalar_one()
        open_studies = connection.execute(
            sa.select(sa.func.count())
            .select_from(Study)
            .where(Study.status.not_in(sorted(FINISHED_STUDY_STATUSES)))
        ).scalar_one()
    return open_runs == 0 and open_studies == 0


def _start_workers(
    count: int, max_parallel: int, url: str, hosts_file: Path, logs: Path
) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "PERFLAB_DATABASE_URL": url, "PERFLAB_HOSTS": str(hosts_file), "TZ": "UTC"}
    env["PERFLAB_SPOOL_DIR"] = str(logs / "spool")
    workers = []
    for index in range(1, count + 1):
        argv = [
            sys.executable, "-m", "perflab", "worker", "--max-parallel", str(max_parallel),
            "--worker-id", f"fleet-{index}", "--poll", "1", "--hosts", str(hosts_file),
        ]  # fmt: skip
        log = (logs / f"worker-{index}.log").open("wb")
        workers.append(subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
    return workers


def _wait_registered(engine: Engine, count: int, workers: list[subprocess.Popen[bytes]]) -> None:
    """Return once ``count`` workers are registered (so claim latency does not count their start)."""
    while True:
        with engine.connect() as connection:
            running = connection.execute(
                sa.select(sa.func.count()).select_from(Worker).where(Worker.state == "running")
            ).scalar_one()
        if running >= count:
            return
        if any(worker.poll() is not None for worker in workers):
            raise SystemExit("a worker exited while starting; see its log")
        time.sleep(0.5)


def _stop_workers(workers: list[subprocess.Popen[bytes]]) -> None:
    for worker in workers:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
    for worker in workers:
        try:
            worker.wait(timeout=120)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


@dataclass
class LogFacts:
    """What the workers' logs say about claims."""

    latencies: list[float] = field(default_factory=list)
    double_runs: set[int] = field(default_factory=set)
    warnings: int = 0
    handed_back: int = 0
    first_claim: datetime | None = None


def _read_logs(logs: Path, created: dict[int, datetime]) -> LogFacts:
    events: list[tuple[datetime, int, str]] = []
    facts = LogFacts()
    for path in sorted(logs.glob("worker-*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if " WARNING " in line:
                facts.warnings += 1
            match = LOG_LINE.match(line)
            if match is None:
                continue
            stamp = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=timezone.utc)
            rest = match.group(4)
            kind = "claim" if rest.startswith(" on host") else "back" if "handed back" in rest else "end"
            events.append((stamp, int(match.group(3)), kind))
    open_claims: Counter[int] = Counter()
    queued_since = dict(created)
    for stamp, run_id, kind in sorted(events):
        if kind == "claim":
            facts.first_claim = facts.first_claim or stamp
            if open_claims[run_id]:
                facts.double_runs.add(run_id)
            open_claims[run_id] += 1
            if run_id in queued_since:
                facts.latencies.append(max((stamp - queued_since[run_id]).total_seconds(), 0.0))
        else:
            open_claims[run_id] = max(open_claims[run_id] - 1, 0)
            if kind == "back":
                facts.handed_back += 1
                queued_since[run_id] = stamp
    return facts


def _waitable(runs: list[Run]) -> int:
    """Runs failed for a port or GPUs while another run of the database was on the same host (GPUs) or
    this machine (ports, every host here being local) or had just left it."""
    count = 0
    for run in runs:
        if run.status != "failed" or run.failure_class not in WAITABLE:
            continue
        for other in runs:
            if other.id == run.id or other.launching_at is None or other.finished_at is None:
                continue
            if run.failure_class == "gpus_unavailable" and other.host_name != run.host_name:
                continue
            start = run.launching_at or run.finished_at
            if other.launching_at <= run.finished_at and start <= other.finished_at + DRAIN:
                count += 1
                break
    return count


def _report(engine: Engine, samples: Samples, facts: LogFacts, args: argparse.Namespace) -> dict[str, object]:
    with db_session.new_session(engine) as session:
        runs = list(session.exec(select(Run).order_by(Run.id)))
        study_updates = session.execute(
            sa.text("SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'study'")
        ).scalar_one()
    ended = [run for run in runs if run.finished_at is not None]
    classes = Counter(run.failure_class for run in ended if run.status == "failed")
    print(f"runs: {len(ended)} ended ({sum(run.study_id is not None for run in ended)} of studies)")
    for status, number in sorted(Counter(run.status for run in ended).items()):
        print(f"  {status}: {number}")
    print("failures by class:" if classes else "failures by class: none")
    for failure_class, number in sorted(classes.items()):
        print(f"  {failure_class}: {number}")
    last_end = max((run.finished_at for run in ended), default=None)
    minutes = (last_end - facts.first_claim).total_seconds() / 60 if last_end and facts.first_claim else 0
    latencies = facts.latencies or [0.0]
    return {
        "hosts": args.hosts,
        "workers": args.workers,
        "max_parallel": args.max_parallel,
        "queued_runs": args.runs,
        "studies": args.studies,
        "runs": len(ended),
        "failed": sum(classes.values()),
        "failed_waitable": _waitable(ended),
        "gpu_overlaps": samples.gpu_overlaps,
        "double_runs": len(facts.double_runs),
        "claim_latency_p50_s": round(statistics.median(latencies), 3),
        "claim_latency_max_s": round(max(latencies), 3),
        "connections_peak": samples.connections_peak,
        "connections_bound": args.workers * db_session.pool_size(args.max_parallel),
        "runs_per_min": round(len(ended) / minutes, 2) if minutes else None,
        "warnings": facts.warnings,
        "handed_back": facts.handed_back,
        "study_row_updates": int(study_updates or 0),
        "load_avg_max": round(samples.load_avg_max, 2),
        "load_avg_end": [round(value, 2) for value in os.getloadavg()],
    }


def main() -> None:
    args = _parse_args()
    with ExitStack() as stack:
        url = stack.enter_context(_database(args.url))
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="perflab-fleet-")))
        logs = directory / "logs"
        logs.mkdir()
        hosts = _hosts(directory, args.hosts, args.time_scale)
        hosts_file = write_hosts_file(directory / "hosts.yaml", hosts)
        engine = _monitor_engine(url)
        database = make_url(url).database or ""
        workers = _start_workers(args.workers, args.max_parallel, url, hosts_file, logs)
        stack.callback(_stop_workers, workers)
        _wait_registered(engine, args.workers, workers)
        _queue(engine, hosts, args.runs, args.studies, hosts_file)
        samples = Samples()
        state_dirs = [str(Path(host.workdir) / "sim" / "state") for host in hosts]
        monitor = threading.Thread(target=_monitor, args=(engine, database, state_dirs, samples), daemon=True)
        monitor.start()
        deadline = time.monotonic() + args.timeout_s
        while not _all_ended(engine):
            if time.monotonic() > deadline:
                print(f"timed out after {args.timeout_s:g} s; reporting what ended", file=sys.stderr)
                break
            if all(worker.poll() is not None for worker in workers):
                print("every worker exited; see their logs", file=sys.stderr)
                break
            time.sleep(2.0)
        samples.stop.set()
        monitor.join()
        _stop_workers(workers)
        with db_session.new_session(engine) as session:
            created = {run.id: run.created_at for run in session.exec(select(Run)) if run.id is not None}
        facts = _read_logs(logs, created)
        summary = _report(engine, samples, facts, args)
        engine.dispose()
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
