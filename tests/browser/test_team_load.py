"""A team's load: four simulated hosts behind four sshd servers on loopback, twelve runs executed
concurrently by two ``python -m perflab worker --max-parallel 4`` processes on one database (SQLite
unless ``PERFLAB_TEST_DATABASE=postgresql``), while ten chromium sessions, opened on the queued runs
before the workers start, keep the runs' pages open (their live progress refreshes itself every two
seconds) and reload them in turn. The ten sessions share one browser context (one cache for the
app's scripts) so the two-core test machine spends its time on the server, not on parsing JavaScript.

Asserted: every run ends ``done`` with every request answered, no log says "database is locked", and
every page load renders its run. Printed (and written to ``test-artifacts/load_team.json``): the
wall time, the runs' durations, p50/p95/max of the pages' first opens and of their reloads in the
browser, and of the server's answers to a page request during the load.
"""

from __future__ import annotations

import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy.engine import Engine

from db import crud
from db import session as db_session
from db.models import FINISHED_RUN_STATUSES, Run
from perflab.engines import EngineConfig
from perflab.inventory import AuthConfig, HostConfig, SimulateSpec
from perflab.profiles import BenchmarkProfile
from perflab.runner.submit import submit_run
from tests.fixtures.database import DatabaseFactory
from tests.fixtures.loopback_sshd import LoopbackSshd, start_sshd
from tests.fixtures.runs import write_hosts_file
from tests.fixtures.sshd import keygen
from tests.fixtures.streamlit_app import REPO, VIEWPORT, AppServer

pytestmark = [pytest.mark.slow, pytest.mark.browser]

HOSTS = 4
RUNS_PER_HOST = 3
SESSIONS = 10
WORKERS = 2
LOAD_TIMEOUT_S = 300.0
PAGE_TIMEOUT_MS = 120_000
LOCKED = "database is locked"
PROFILE = BenchmarkProfile(
    name="team", title="Team chat", dataset="random", input_len=128, output_len=32, num_prompts=120,
    request_rate=40.0, seed=7,
)  # fmt: skip
FIGURES = REPO / "test-artifacts" / "load_team.json"


def spread(values: list[float]) -> dict[str, float]:
    """p50, p95 and max of some durations, in seconds."""
    ordered = sorted(values)
    return {
        "p50": round(ordered[round(0.5 * (len(ordered) - 1))], 2),
        "p95": round(ordered[round(0.95 * (len(ordered) - 1))], 2),
        "max": round(ordered[-1], 2),
    }


@pytest.fixture
def team_hosts(tmp_path: Path) -> Iterator[list[HostConfig]]:
    """Four simulated H100 hosts, each behind its own sshd on loopback."""
    client_key = keygen(tmp_path / "client_ed25519")
    authorized = tmp_path / "authorized_keys"
    authorized.write_text(client_key.with_suffix(".pub").read_text())
    servers: list[LoopbackSshd] = []
    hosts = []
    try:
        for index in range(HOSTS):
            server = start_sshd(tmp_path / f"sshd-{index}", authorized_keys=authorized)
            servers.append(server)
            hosts.append(
                HostConfig(
                    name=f"team-{index}",
                    address="127.0.0.1",
                    port=server.port,
                    auth=AuthConfig(key_file=str(client_key), agent=False),
                    known_hosts=str(server.known_hosts),
                    workdir=str(tmp_path / "hosts" / f"team-{index}"),
                    simulate=SimulateSpec(accelerator="H100", count=8, time_scale=20, startup_scale=200),
                )
            )
        yield hosts
    finally:
        for server in servers:
            server.stop()


def poll(page: Page, url: str, run_id: int) -> float:
    """Load a run page; the seconds until it shows the run's title and status line (its live progress
    keeps the script busy every two seconds, so "the script is idle" is no sign of a loaded page)."""
    started = time.monotonic()
    page.goto(url, timeout=PAGE_TIMEOUT_MS)
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"Run {run_id}", timeout=PAGE_TIMEOUT_MS)
    expect(page.get_by_text(re.compile(r" · host team-\d")).first).to_be_visible(timeout=PAGE_TIMEOUT_MS)
    return time.monotonic() - started


def fetch_seconds(url: str) -> float:
    """Seconds the app's server takes to answer a page's HTML (the server alone, without a browser)."""
    started = time.monotonic()
    with urllib.request.urlopen(url, timeout=PAGE_TIMEOUT_MS / 1000) as answer:
        answer.read()
    return time.monotonic() - started


def start_worker(log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A ``python -m perflab worker`` process running up to four runs at once."""
    with log.open("wb") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "perflab", "worker", "--max-parallel", "4", "--poll", "1"],
            cwd=REPO,
            env={**os.environ, **env},
            stdout=output,
            stderr=subprocess.STDOUT,
        )


def engine_ports(count: int) -> int:
    """The first of ``count`` consecutive free ports below the kernel's ephemeral range, where no
    outgoing connection (SSH sessions, port forwards) of the busy machine can take one meanwhile."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for first in range(low - 4000 + (os.getpid() % 200) * count, low - count, count):
        sockets = [socket.socket() for _ in range(count)]
        try:
            for port, sock in enumerate(sockets, start=first):
                sock.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise RuntimeError(f"no {count} free ports below {low}")


def queue_runs(engine: Engine, hosts: list[HostConfig]) -> list[int]:
    """Queue the team's runs round-robin over the hosts; each engine gets its own port (the simulated
    hosts share this machine's loopback)."""
    first_port = engine_ports(HOSTS * RUNS_PER_HOST)
    return [
        submit_run(
            engine,
            host_name=hosts[index % HOSTS].name,
            config=EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", port=first_port + index),
            profiles=[PROFILE],
            queued_by=f"member-{index % SESSIONS}",
        ).id
        for index in range(HOSTS * RUNS_PER_HOST)
    ]


def finished_runs(engine: Engine, run_ids: list[int]) -> list[Run] | None:
    """The runs once every one has finished, else None."""
    with db_session.session_scope(engine) as session:
        runs = crud.get_runs(session, run_ids=run_ids)
        if not all(run.status in FINISHED_RUN_STATUSES for run in runs):
            return None
        for run in runs:
            session.expunge(run)
        return runs


def test_four_hosts_twelve_runs_ten_sessions(
    database_factory: DatabaseFactory,
    team_hosts: list[HostConfig],
    start_app: Callable[..., AppServer],
    chromium: Browser,
    tmp_path: Path,
) -> None:
    url = database_factory.create("team_load")
    env = {
        "PERFLAB_DATABASE_URL": url,
        "PERFLAB_HOSTS": str(write_hosts_file(tmp_path / "hosts.yaml", team_hosts)),
    }
    engine = db_session.get_engine(url)
    run_ids = queue_runs(engine, team_hosts)
    app = start_app(**env, PERFLAB_APP_WORKER="0")
    browser = chromium.new_context(viewport=VIEWPORT)
    pages = [browser.new_page() for _ in range(SESSIONS)]
    first_opens = [
        poll(page, f"{app.url}/run?run={run_id}", run_id)
        for page, run_id in zip(pages, run_ids[:SESSIONS], strict=True)
    ]
    started, started_at = time.monotonic(), datetime.now(timezone.utc)
    logs = [tmp_path / f"worker-{index}.log" for index in range(WORKERS)]
    workers = [start_worker(log, env) for log in logs]
    try:
        reloads: list[float] = []
        html: list[float] = []
        while (runs := finished_runs(engine, run_ids)) is None:
            assert time.monotonic() - started < LOAD_TIMEOUT_S, "the runs did not finish in time"
            html.append(fetch_seconds(f"{app.url}/run?run={run_ids[0]}"))
            page = pages[len(reloads) % SESSIONS]
            run_id = run_ids[len(reloads) % len(run_ids)]
            reloads.append(poll(page, f"{app.url}/run?run={run_id}", run_id))
        wall_s = time.monotonic() - started
    finally:
        for worker in workers:
            worker.terminate()
            worker.wait(timeout=60)
        app.stop()

    assert [(run.id, run.status) for run in runs] == [(run_id, "done") for run_id in run_ids], [
        (run.id, run.status, run.failure_message) for run in runs
    ]
    with db_session.session_scope(engine) as session:
        results = crud.first_results(session, run_ids=run_ids)
        counts = [(results[run_id].completed, results[run_id].failed) for run_id in run_ids]
    assert counts == [(PROFILE.num_prompts, 0)] * len(run_ids)
    texts = {"app": app.log_text(), **{log.name: log.read_text(errors="replace") for log in logs}}
    assert [name for name, text in texts.items() if LOCKED in text] == []
    durations = [
        (run.finished_at - run.launching_at).total_seconds()
        for run in runs
        if run.finished_at and run.launching_at
    ]
    figures = {
        "database": database_factory.backend,
        "hosts": HOSTS,
        "runs": len(run_ids),
        "sessions": SESSIONS,
        "workers": len({run.worker_id for run in runs}),
        "all_runs_done_s": round(
            max(run.finished_at for run in runs if run.finished_at).timestamp() - started_at.timestamp(), 1
        ),
        "wall_s": round(wall_s, 1),
        "run_s": {"median": round(statistics.median(durations), 1), "max": round(max(durations), 1)},
        "first_open_s": spread(first_opens),
        "reloads": len(reloads),
        "reload_s": spread(reloads) if reloads else None,
        "server_html_s": spread(html) if html else None,
    }
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"\nteam load: {json.dumps(figures)}", file=sys.__stdout__, flush=True)
