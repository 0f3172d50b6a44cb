"""A fleet on one PostgreSQL database: two workers placing runs while a run of the same database frees
its GPUs, two hosts that are one machine sharing its ports, failed runs logged as warnings, and studies
taken by one worker when something about them changed."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from db import crud
from db.models import Run
from db.session import get_engine, new_session, upgrade
from perflab.engines import EngineConfig, get_adapter
from perflab.inventory import HostConfig
from perflab.runner import RunnerOptions, submit_run
from perflab.runner.ports import search_offset
from perflab.runner.profile_spec import parse_profile
from perflab.sim.gpustate import Registration
from perflab.worker import Worker
from tests.fixtures.database import PostgresServer, empty_all_tables
from tests.fixtures.polling import wait_until
from tests.fixtures.runs import SimHostFactory, stored_run, write_hosts_file

FAST = RunnerOptions(ready_poll_s=0.2, stop_grace_s=5.0, ready_timeout_s=60.0)
PROFILE = "random:in=64,out=8,n=6"
FULL_GPU_MIB = 70000


@pytest.fixture(scope="module")
def fleet_url(postgres_server: PostgresServer) -> Iterator[str]:
    url = postgres_server.create_database(f"perflab_fleet_{os.getpid()}")
    upgrade(url)
    yield url
    get_engine(url).dispose()
    postgres_server.drop_database(url)


@pytest.fixture
def fleet_db(fleet_url: str) -> Engine:
    engine = get_engine(fleet_url)
    empty_all_tables(engine)
    return engine


@pytest.fixture
def fleet() -> Iterator[list[Worker]]:
    """The workers a test starts; each is stopped after the test."""
    workers: list[Worker] = []
    yield workers
    for worker in workers:
        worker.stop()


def _workers(fleet: list[Worker], engine: Engine, hosts_file: Path, *, max_parallel: int = 1) -> list[Worker]:
    workers = [
        Worker(
            engine,
            inventory_path=hosts_file,
            worker_id=f"fleet-{index}",
            runner_options=FAST,
            gpu_retry_s=0.0,
            poll_interval_s=0.3,
            max_parallel_runs=max_parallel,
        )
        for index in (1, 2)
    ]
    fleet.extend(workers)
    return workers


def _queue(engine: Engine, host: HostConfig, **knobs: object) -> Run:
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", **knobs)  # type: ignore[arg-type]
    return submit_run(engine, host_name=host.name, config=config, profiles=[parse_profile(PROFILE)])


def _drive(workers: list[Worker], rounds: int = 12) -> dict[int, list[str]]:
    """Let both workers claim and finish what they can, round after round, until nothing is left
    queued; ``{run id: statuses it ended each claim with}``."""
    ended: dict[int, list[str]] = {}
    for _ in range(rounds):
        claimed = False
        for worker in workers:
            for run_id, status in worker.run_once().items():
                ended.setdefault(run_id, []).append(status)
                claimed = True
        if not claimed:
            break
    return ended


def _hold_memory(host: HostConfig, gpus: range) -> Registration:
    """This test process shows memory in use on ``gpus`` of the simulated host."""
    state_dir = str(Path(host.workdir) / "sim" / "state")
    return Registration(state_dir, "vllm", dict.fromkeys(gpus, "python3"), dict.fromkeys(gpus, FULL_GPU_MIB))


@pytest.mark.postgres
def test_memory_our_run_just_released_makes_runs_wait_and_foreign_memory_fails_them(
    fleet_db: Engine,
    fleet: list[Worker],
    sim_host: SimHostFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = sim_host("draining", kind="local", count=8)
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [host])
    workers = _workers(fleet, fleet_db, hosts_file, max_parallel=2)
    first = _queue(fleet_db, host, tp=8)
    assert _drive(workers) == {first.id: ["done"]}

    # The TP8 run ended; its GPUs still show its memory (a driver or container freeing it), when a
    # TP8 and a TP1 run are placed by two workers.
    draining = _hold_memory(host, range(8))
    try:
        waiting = [_queue(fleet_db, host, tp=8), _queue(fleet_db, host, tp=1)]
        caplog.set_level(logging.INFO, logger="perflab.worker")
        ended = _drive(workers, rounds=1)
        assert ended == {run.id: ["queued", "queued"] for run in waiting}  # each worker tried both
        for run in waiting:
            reason = stored_run(fleet_db, run.id).progress["waiting_for_gpus"]
            assert f"still free the memory of run(s) {first.id}" in reason
        handed_back = [r for r in caplog.records if "handed back to the queue" in r.getMessage()]
        assert {r.levelno for r in handed_back} == {logging.INFO} and len(handed_back) == 4
    finally:
        draining.remove()
    ended = _drive(workers)
    assert {run.id: ended[run.id][-1] for run in waiting} == {run.id: "done" for run in waiting}
    gpus = [set(stored_run(fleet_db, run.id).gpu_ids or ()) for run in waiting]
    assert gpus[0] == set(range(8)) and len(gpus[1]) == 1

    # Memory that stays after the drain window is someone else's: gpus_unavailable, as a WARNING.
    with new_session(fleet_db) as session:
        session.execute(sa.update(Run).values(finished_at=Run.finished_at - sa.text("interval '2 hours'")))
        session.commit()
    foreign = _hold_memory(host, range(8))
    try:
        caplog.clear()
        late = _queue(fleet_db, host, tp=8)
        assert _drive(workers, rounds=1) == {late.id: ["failed"]}
    finally:
        foreign.remove()
    assert stored_run(fleet_db, late.id).failure_class == "gpus_unavailable"
    [warning] = [r for r in caplog.records if "failed:" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert f"run {late.id} failed: gpus_unavailable: accelerators of host 'draining'" in warning.getMessage()


@pytest.mark.postgres
def test_hosts_of_one_machine_never_share_a_port(
    fleet_db: Engine, fleet: list[Worker], sim_host: SimHostFactory, tmp_path: Path
) -> None:
    hosts = [sim_host(name, kind="local", count=2) for name in ("box-a", "box-b")]
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", hosts)
    # A run in flight on box-a (another worker's) recorded the port a box-b run starts its
    # search at; nothing listens there yet, so only the record can keep the box-b run off it.
    holder = _queue(fleet_db, hosts[0], tp=1)
    run = _queue(fleet_db, hosts[1], tp=1)
    first_choice = get_adapter("vllm").default_port + search_offset(run.id)
    with new_session(fleet_db) as session:
        crud.register_worker(session, worker_id="elsewhere", hostname="elsewhere", pid=1)
        crud.claim_next_run(session, worker_id="elsewhere", host_names=[hosts[0].name])
        crud.update_run(
            session,
            run_id=holder.id,
            remote_state={"processes": [{"name": "engine-0", "port": first_choice, "gpu_ids": [0]}]},
        )
    more = [_queue(fleet_db, host, tp=1) for host in hosts for _ in range(2)]
    for worker in _workers(fleet, fleet_db, hosts_file, max_parallel=2):
        worker.start()  # both workers launch runs on the one machine at once
    wanted = [run, *more]

    def all_finished() -> list[Run]:
        runs = [stored_run(fleet_db, queued.id) for queued in wanted]
        return runs if all(run.finished_at is not None for run in runs) else []

    finished = wait_until(
        all_finished,
        240,
        interval_s=0.5,
        failure=lambda: f"runs not finished: {[stored_run(fleet_db, queued.id).status for queued in wanted]}",
    )
    assert [r.status for r in finished] == ["done"] * len(finished), [r.failure_message for r in finished]
    ports = {r.id: r.remote_state["processes"][0]["port"] for r in finished}
    assert ports[run.id] != first_choice
    # Runs whose launches overlapped in time got different ports.
    for a in finished:
        for b in finished:
            if a.id < b.id and a.launching_at < b.finished_at and b.launching_at < a.finished_at:
                assert ports[a.id] != ports[b.id], (a.id, b.id)


@pytest.mark.postgres
def test_a_due_study_is_taken_by_one_worker_and_is_due_again_when_a_run_of_it_ends(
    fleet_db: Engine,
) -> None:
    with new_session(fleet_db) as session:
        studies = [crud.create_study(session, name=f"s{index}", spec={}) for index in (1, 2)]
    with new_session(fleet_db) as first, new_session(fleet_db) as second:
        taken = {crud.claim_due_study(first, recheck_s=600), crud.claim_due_study(second, recheck_s=600)}
        assert taken == {study.id for study in studies}
        assert crud.claim_due_study(first, recheck_s=600) is None
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B")
    run = submit_run(
        fleet_db, host_name="h", config=config, profiles=[parse_profile(PROFILE)], study_id=studies[1].id
    )
    with new_session(fleet_db) as session:
        crud.request_cancel(session, run_id=run.id)
        assert crud.claim_due_study(session, recheck_s=600) == studies[1].id
        crud.update_study(session, study_id=studies[0].id, status="paused")
        assert crud.claim_due_study(session, recheck_s=600) == studies[0].id
        assert crud.claim_due_study(session, recheck_s=600) is None
