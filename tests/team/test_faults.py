"""Faults during a run, one test each: the run ends failed with a clear reason, nothing of it is left
running on the host (no process carries its run key), the requests measured so far are kept, and a
run next to it (another host, or other GPUs of the same host) ends as if nothing had happened.

The worker killed with ``kill -9`` and restarted over SSH is also covered, for the engine and the
bench left behind, by ``tests/worker/test_worker.py``; a run waiting for GPUs another run holds by
``tests/worker`` and ``tests/runner/test_lifecycle_local.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from perflab.sim.gpustate import Registration
from perflab.transport import open_transport
from perflab.transport.retry import retrying
from perflab.worker import RESTART_MESSAGE, Worker
from tests.fixtures.ports import answering_server
from tests.fixtures.runs import (
    SimHostFactory,
    benchmarking_with_progress,
    free_port_block,
    perflab_env,
    proxied_host,
    wait_for_run,
    write_hosts_file,
)
from tests.fixtures.sshd import SshServer, TcpProxy
from tests.team.conftest import (
    BYSTANDER_PROFILE,
    FAST,
    LONG_PROFILE,
    Bystander,
    check_failed,
    check_partial,
    execute,
    results_of,
    start,
    submit,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_the_engine_dying_mid_benchmark(runs_db: Engine, sim_host: SimHostFactory) -> None:
    host = sim_host("engine-dies", kind="local", count=2)
    run, background = start(runs_db, host, LONG_PROFILE, gpu_ids=[0])
    bystander = Bystander.start(runs_db, host, gpu_ids=[1])
    benchmarking = wait_for_run(runs_db, run.id, benchmarking_with_progress)
    os.killpg(benchmarking.remote_state["processes"][0]["pid"], signal.SIGKILL)

    assert background.join() == "failed"
    check_failed(runs_db, run.id, "engine_died", "engine-0 exited", "while benchmarking random")
    check_partial(runs_db, run.id, "went away mid-run")
    bystander.check()


def test_the_ssh_connection_dropping_mid_run(
    runs_db: Engine, sim_host: SimHostFactory, sshd: SshServer, tcp_proxy: TcpProxy, tmp_path: Path
) -> None:
    host = proxied_host(sim_host, sshd, tcp_proxy, tmp_path, "dropping")
    run, background = start(runs_db, host, LONG_PROFILE)
    bystander = Bystander.start(runs_db, sim_host("steady"))
    wait_for_run(runs_db, run.id, benchmarking_with_progress)
    tcp_proxy.cut()

    assert background.join() == "failed"
    failed = check_failed(
        runs_db, run.id, "connection_lost", "connection to host 'dropping' dropped while benchmarking"
    )
    # The runner reconnected to stop the engine and the bench, and kept what the bench had measured.
    assert failed.remote_state["stopped"] == {"bench-0-0": "term", "engine-0": "term"}
    check_partial(runs_db, run.id, "received SIGTERM")
    bystander.check()


def test_the_worker_killed_mid_run_and_restarted(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path
) -> None:
    crashing_host, other_host = sim_host("crashes", kind="local"), sim_host("carries-on", kind="local")
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [crashing_host, other_host])
    orphan = submit(runs_db, crashing_host, LONG_PROFILE, worker_id=None)
    doomed = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "perflab",
            "worker",
            "--worker-id",
            "doomed",
            "--poll",
            "0.2",
            "--max-parallel",
            "1",
        ],
        cwd=REPO_ROOT,
        env={**os.environ, **perflab_env(runs_db, hosts_file)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_run(runs_db, orphan.id, benchmarking_with_progress)
        # A second worker takes the next run and keeps going while the first one dies.
        survivor = Worker(
            runs_db, inventory_path=hosts_file, worker_id="survivor", runner_options=FAST, poll_interval_s=0.2
        )
        bystander = Bystander(runs_db, submit(runs_db, other_host, BYSTANDER_PROFILE, worker_id=None))
        survivor.start()
        wait_for_run(runs_db, bystander.run.id, benchmarking_with_progress)
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(timeout=10)

    restarted = Worker(runs_db, inventory_path=hosts_file, worker_id="doomed", runner_options=FAST)
    assert restarted.run_once() == {}
    restarted.stop()
    wait_for_run(runs_db, bystander.run.id, lambda run: run.finished_at is not None)
    survivor.stop()

    failed = check_failed(runs_db, orphan.id, "worker_restarted", RESTART_MESSAGE)
    assert failed.remote_state["stopped"] == {"bench-0-0": "term", "engine-0": "term"}
    check_partial(runs_db, orphan.id, "received SIGTERM")
    assert bystander.check().worker_id == "survivor"


def test_the_host_unreachable_at_start(runs_db: Engine, sim_host: SimHostFactory) -> None:
    closed_port = free_port_block(1)
    nowhere = sim_host("nowhere", port=closed_port, connect_attempts=2)
    bystander = Bystander.start(runs_db, sim_host("somewhere", kind="local"))
    run = submit(runs_db, nowhere, "short:n=5")

    status = execute(runs_db, nowhere, run)

    assert status == "failed"
    failed = check_failed(
        runs_db,
        run.id,
        "host_unreachable",
        f"Cannot reach host 'nowhere' at 127.0.0.1:{closed_port}",
        "refused",
    )
    assert failed.remote_state is None and results_of(runs_db, run.id) == []
    bystander.check()


def test_transient_connection_failures_are_retried_with_backoff(
    runs_db: Engine, sim_host: SimHostFactory, sshd: SshServer, tcp_proxy: TcpProxy, tmp_path: Path
) -> None:
    host = proxied_host(sim_host, sshd, tcp_proxy, tmp_path, "flaky", connect_attempts=3)
    tcp_proxy.refuse_next(2)

    with open_transport(host) as transport:
        assert transport.run(["echo", "through"], timeout=20).stdout == "through\n"

    assert tcp_proxy.accepted == 3, "two refused attempts, then the one that got through"


def test_a_read_cut_by_a_dropped_connection_is_retried(
    sim_host: SimHostFactory, sshd: SshServer, tcp_proxy: TcpProxy, tmp_path: Path
) -> None:
    host = proxied_host(sim_host, sshd, tcp_proxy, tmp_path, "blip")
    with open_transport(host) as transport:
        cut = threading.Timer(0.5, tcp_proxy.cut)
        cut.start()
        # A read that is still running when the connection drops: asked again once reconnected.
        result = retrying(lambda: transport.run(["sh", "-c", "sleep 1.5; echo read"], timeout=20))
        cut.join()

    assert result.stdout == "read\n"
    assert tcp_proxy.accepted == 2, "one connection cut mid-read, one for the second try"


@pytest.fixture
def squatter() -> Iterator[int]:
    """A port taken by an HTTP server that answers 200 to everything."""
    with answering_server(0) as port:
        yield port


def test_the_engine_port_already_taken(runs_db: Engine, sim_host: SimHostFactory, squatter: int) -> None:
    host = sim_host("crowded", kind="local", count=2)
    bystander = Bystander.start(runs_db, host, gpu_ids=[1])
    run = submit(runs_db, host, "short:n=5", gpu_ids=[0], port=squatter)

    status = execute(runs_db, host, run)

    assert status == "failed"
    failed = check_failed(
        runs_db,
        run.id,
        "port_in_use",
        f"port {squatter} on host 'crowded' is already in use by another process",
    )
    assert "pid" not in failed.remote_state["processes"][0], "the engine must not be started"
    assert failed.ready_at is None and results_of(runs_db, run.id) == []
    bystander.check()


def test_the_requested_gpus_busy_with_other_programs(runs_db: Engine, sim_host: SimHostFactory) -> None:
    host = sim_host("shared-box", kind="local", count=4)
    # This test process holds GPUs 0 and 1 of the simulated host, as a program perflab did not start.
    foreign = Registration(
        str(Path(host.workdir) / "sim" / "state"), "other", {0: "python3", 1: "python3"}, {0: 70000, 1: 70000}
    )
    try:
        bystander = Bystander.start(runs_db, host)
        run = submit(runs_db, host, "short:n=5", gpu_ids=[0, 1], tp=2)
        status = execute(runs_db, host, run)
        assert status == "failed"
        failed = check_failed(
            runs_db,
            run.id,
            "gpus_unavailable",
            "accelerators of host 'shared-box' are in use by processes perflab did not start",
            "GPU 0: 70000 MiB, GPU 1: 70000 MiB",
        )
        assert failed.remote_state is None and results_of(runs_db, run.id) == []
        # Without gpu_ids, the run next to it was placed on the first GPU nobody used.
        assert bystander.check().gpu_ids == [2]
    finally:
        foreign.remove()
