"""The SSH connection cut mid-benchmark, over the real sshd (through a TCP proxy that can drop every
connection and refuse new ones): the runner reconnects and stops the engine; when it cannot, the next
placement on that host finds the engine by its run marker and stops it, while a GPU busy with a
process perflab did not start stays refused, and another perflab's engine in the same workdir is left
running."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db.models import Run
from perflab.inventory import HostConfig
from perflab.remote import process as rp
from perflab.runner import RunnerOptions
from perflab.sim.gpustate import Registration
from perflab.transport import open_transport
from tests.fixtures.leftovers import processes_under
from tests.fixtures.runs import (
    BackgroundRun,
    SimHostFactory,
    benchmarking_with_progress,
    proxied_host,
    run_key_pids,
    stored_run,
    wait_for_run,
)
from tests.fixtures.sshd import SshServer, TcpProxy
from tests.team.conftest import FAST, LONG_PROFILE, WORKER, check_failed, execute, submit

# Reconnect attempts a few tenths of a second apart, so a host that stays cut ends the run quickly.
QUICK_RECONNECT = dataclasses.replace(FAST, reconnect_delays_s=(0.2, 0.5))


def _cut_mid_benchmark(
    engine: Engine, host: HostConfig, options: RunnerOptions, proxy: TcpProxy, refusals: int
) -> tuple[Run, str]:
    """A long run on GPU 0 whose connections are cut once it measured requests, the next ``refusals``
    connections refused; the run at its end and its run key."""
    run = submit(engine, host, LONG_PROFILE, gpu_ids=[0])
    background = BackgroundRun(engine, run.id, host, WORKER, options)
    run_key = wait_for_run(engine, run.id, benchmarking_with_progress).remote_state["run_key"]
    proxy.refuse_next(refusals)
    proxy.cut()
    assert background.join(timeout_s=120.0) == "failed"
    return stored_run(engine, run.id), run_key


def test_the_runner_reconnects_through_refused_attempts_and_stops_the_engine(
    runs_db: Engine, sim_host: SimHostFactory, sshd: SshServer, tcp_proxy: TcpProxy, tmp_path: Path
) -> None:
    host = proxied_host(sim_host, sshd, tcp_proxy, tmp_path, "flaky", count=1)
    run, _ = _cut_mid_benchmark(runs_db, host, FAST, tcp_proxy, refusals=2)

    # The cut ends the run (connection_lost, or bench_failed when the benchmark's stream saw its end
    # first); either way the runner reconnected and stopped the engine.
    assert run.failure_class in ("connection_lost", "bench_failed"), run.failure_message
    assert run.remote_state["stopped"]["engine-0"] in ("term", "kill")
    assert run_key_pids(run.remote_state["run_key"]) == []


@pytest.mark.slow
def test_an_engine_left_by_a_lost_connection_is_stopped_by_the_next_placement(
    runs_db: Engine, sim_host: SimHostFactory, sshd: SshServer, tcp_proxy: TcpProxy, tmp_path: Path
) -> None:
    host = proxied_host(sim_host, sshd, tcp_proxy, tmp_path, "cut-off", count=2)
    # The host stays unreachable until the run has ended: its engine is left running on GPU 0.
    lost, orphan_key = _cut_mid_benchmark(runs_db, host, QUICK_RECONNECT, tcp_proxy, refusals=1_000_000)
    assert lost.failure_class == "connection_lost" and "cleanup_error" in lost.remote_state
    assert run_key_pids(orphan_key) != []
    tcp_proxy.refuse_next(0)

    following = submit(runs_db, host, "short:n=4", gpu_ids=[0])
    assert execute(runs_db, host, following) == "done", stored_run(runs_db, following.id).failure_message
    assert run_key_pids(orphan_key) == []

    # GPU 1 is busy with a program perflab did not start (this test process): it stays refused.
    foreign = Registration(str(Path(host.workdir) / "sim" / "state"), "other", {1: "python3"}, {1: 70000})
    try:
        refused = submit(runs_db, host, "short:n=4", gpu_ids=[1])
        assert execute(runs_db, host, refused) == "failed"
        check_failed(runs_db, refused.id, "gpus_unavailable", "perflab did not start", "GPU 1: 70000 MiB")
    finally:
        foreign.remove()
    assert processes_under(Path(host.workdir)) == []


def test_another_perflabs_engine_in_the_same_workdir_is_left_running(
    runs_db: Engine, sim_host: SimHostFactory
) -> None:
    host = sim_host("shared-workdir", kind="local", count=2)
    ended = submit(runs_db, host, "short:n=4", gpu_ids=[0])
    assert execute(runs_db, host, ended) == "done", stored_run(runs_db, ended.id).failure_message
    # Another perflab (another database) launched its own run with the same id in this workdir: its
    # key has the same form but a random part this database never recorded.
    recorded_key = stored_run(runs_db, ended.id).remote_state["run_key"]
    random_part = recorded_key.rsplit("-", 1)[1]
    foreign_key = f"run-{ended.id}-{'e' if random_part[0] == 'f' else 'f'}{random_part[1:]}"
    assert foreign_key != recorded_key
    with open_transport(host) as transport:
        foreign = rp.start_detached(transport, ["sleep", "300"], run_key=foreign_key, name="engine-0")
        try:
            following = submit(runs_db, host, "short:n=4", gpu_ids=[1])
            status = execute(runs_db, host, following)
            assert status == "done", stored_run(runs_db, following.id).failure_message
            assert run_key_pids(foreign_key) != []
        finally:
            assert rp.stop(transport, foreign, 5.0).clean
    assert processes_under(Path(host.workdir)) == []
