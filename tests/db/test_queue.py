"""The shared queue across processes: exactly-once claims, all-or-nothing GPU locks, workers."""

from __future__ import annotations

import multiprocessing
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from datetime import timedelta
from multiprocessing.managers import SyncManager
from typing import Any

import pytest
from sqlmodel import Session

from db import crud
from db.models import utcnow
from tests.db import concurrency_workers

PROCESSES = 4


class ProcessGroup:
    """A pool of spawned processes and a barrier factory, so a test can start N calls at once."""

    def __init__(self, pool: ProcessPoolExecutor, manager: SyncManager) -> None:
        self.pool = pool
        self.manager = manager

    def run(self, function: Callable[..., Any], argument_lists: list[tuple[Any, ...]]) -> list[Any]:
        barrier = self.manager.Barrier(len(argument_lists))
        futures = [self.pool.submit(function, *arguments, barrier) for arguments in argument_lists]
        return [future.result(timeout=120) for future in futures]


@pytest.fixture(scope="module")
def processes() -> Iterator[ProcessGroup]:
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager, ProcessPoolExecutor(max_workers=PROCESSES, mp_context=context) as pool:
        yield ProcessGroup(pool, manager)


def make_runs(session: Session, count: int) -> list[int]:
    return [crud.create_run(session, engine="vllm", model="m", host_name="h").id for _ in range(count)]


def test_each_queued_run_is_claimed_exactly_once_across_processes(
    db_session: Session, database_url: str, processes: ProcessGroup
) -> None:
    run_ids = make_runs(db_session, 40)
    cancelled = run_ids.pop()
    crud.request_cancel(db_session, run_id=cancelled)

    results = processes.run(
        concurrency_workers.claim_until_empty, [(database_url, f"worker-{n}") for n in range(PROCESSES)]
    )

    claimed = [run_id for ids in results for run_id in ids]
    assert Counter(claimed) == Counter(run_ids)
    for worker_number, ids in enumerate(results):
        for run in crud.get_runs(db_session, run_ids=ids):
            db_session.refresh(run)
            assert run.status == "launching"
            assert run.worker_id == f"worker-{worker_number}"
            assert run.launching_at is not None
    assert crud.get_run(db_session, run_id=cancelled).status == "cancelled"


def test_claim_takes_the_oldest_run_of_the_wanted_hosts(db_session: Session) -> None:
    first = crud.create_run(db_session, engine="vllm", model="m", host_name="a", created_at=utcnow())
    crud.create_run(
        db_session, engine="vllm", model="m", host_name="b", created_at=utcnow() - timedelta(hours=1)
    )
    claimed = crud.claim_next_run(db_session, worker_id="w", host_names=["a"])
    assert claimed is not None and claimed.id == first.id
    assert crud.claim_next_run(db_session, worker_id="w", host_names=["a"]) is None


def test_overlapping_gpu_requests_from_processes_never_share_a_gpu(
    db_session: Session, database_url: str, processes: ProcessGroup
) -> None:
    run_ids = make_runs(db_session, 4)
    wanted = [[0, 1], [1, 2], [2, 3], [3, 0]]
    outcomes = processes.run(
        concurrency_workers.acquire_once,
        [(database_url, run_id, gpus) for run_id, gpus in zip(run_ids, wanted, strict=True)],
    )
    granted = {run_id: set(gpus) for run_id, gpus, ok in zip(run_ids, wanted, outcomes, strict=True) if ok}
    assert granted, "at least one request must succeed"
    held = {(lock.gpu_index, lock.run_id) for lock in crud.gpu_locks(db_session, host_name="h")}
    assert held == {(gpu, run_id) for run_id, gpus in granted.items() for gpu in gpus}
    assert len({gpu for gpu, _ in held}) == len(held)


def test_gpu_locks_stay_exclusive_under_contention(
    db_session: Session, database_url: str, processes: ProcessGroup
) -> None:
    run_ids = make_runs(db_session, PROCESSES)
    results = processes.run(
        concurrency_workers.contend_for_all_gpus, [(database_url, run_id, 15) for run_id in run_ids]
    )
    assert sum(wins for wins, _ in results) > 0
    assert [violation for _, violations in results for violation in violations] == []
    assert crud.gpu_locks(db_session) == []


def test_acquire_is_all_or_nothing_and_reentrant(db_session: Session) -> None:
    first, second = make_runs(db_session, 2)
    assert crud.acquire_gpus(db_session, host_name="h", gpu_ids=[0, 1], run_id=first, worker_id="w")
    assert crud.acquire_gpus(db_session, host_name="h", gpu_ids=[0, 1], run_id=first, worker_id="w")
    assert not crud.acquire_gpus(db_session, host_name="h", gpu_ids=[1, 2], run_id=second, worker_id="w")
    assert [lock.gpu_index for lock in crud.gpu_locks(db_session, host_name="h")] == [0, 1]
    assert crud.acquire_gpus(db_session, host_name="other", gpu_ids=[0, 1], run_id=second, worker_id="w")
    assert crud.release_gpus(db_session, run_id=first) == 2
    assert crud.acquire_gpus(db_session, host_name="h", gpu_ids=[1, 2], run_id=second, worker_id="w")


def test_stale_workers_and_their_in_flight_runs(db_session: Session) -> None:
    alive = crud.register_worker(db_session, worker_id="alive", hostname="box", pid=1)
    crud.register_worker(db_session, worker_id="dead", hostname="box", pid=2)
    run_id = make_runs(db_session, 1)[0]
    assert crud.claim_next_run(db_session, worker_id="dead").id == run_id
    crud.set_run_status(db_session, run_id=run_id, status="ready")

    later = utcnow() + timedelta(seconds=60)
    assert {w.id for w in crud.stale_workers(db_session, timeout_s=30, now=later)} == {"alive", "dead"}
    crud.worker_heartbeat(db_session, worker_id="alive")
    assert {
        w.id for w in crud.stale_workers(db_session, timeout_s=30, now=utcnow() + timedelta(seconds=20))
    } == set()
    assert [run.id for run in crud.in_flight_runs(db_session, worker_id="dead")] == [run_id]
    assert crud.in_flight_runs(db_session, worker_id=alive.id) == []

    crud.worker_heartbeat(db_session, worker_id="dead", state="stopped")
    assert {w.id for w in crud.stale_workers(db_session, timeout_s=30, now=later)} == {"alive"}
    run = crud.get_run(db_session, run_id=run_id)
    db_session.refresh(run)
    assert run.heartbeat_at is not None and run.heartbeat_at.tzinfo is not None


def test_concurrent_writers_never_hit_database_is_locked(
    db_session: Session, database_url: str, processes: ProcessGroup
) -> None:
    rounds = 15
    results = processes.run(
        concurrency_workers.mixed_writes, [(database_url, f"load-{n}", rounds) for n in range(PROCESSES)]
    )
    assert results == [9 * rounds] * PROCESSES
    page = crud.list_runs(db_session, status="done", limit=100)
    assert page.total == PROCESSES * rounds
    assert all(row.figures["completed"] == 50 for row in page.rows)
