"""Functions run in separate worker processes by the concurrency tests (importable by ``spawn``)."""

from __future__ import annotations

from multiprocessing.synchronize import Barrier

from db import crud
from db import session as db_session


def claim_until_empty(url: str, worker_id: str, barrier: Barrier) -> list[int]:
    """Claim runs until the queue is empty; returns the claimed ids."""
    engine = db_session.get_engine(url)
    claimed = []
    barrier.wait()
    with db_session.new_session(engine) as session:
        while (run := crud.claim_next_run(session, worker_id=worker_id)) is not None:
            claimed.append(run.id)
    return claimed


def acquire_once(url: str, run_id: int, gpu_ids: list[int], barrier: Barrier) -> bool:
    """Try once to lock ``gpu_ids`` of host ``h`` for ``run_id``."""
    engine = db_session.get_engine(url)
    barrier.wait()
    with db_session.new_session(engine) as session:
        return crud.acquire_gpus(
            session, host_name="h", gpu_ids=gpu_ids, run_id=run_id, worker_id=f"w{run_id}"
        )


def contend_for_all_gpus(url: str, run_id: int, rounds: int, barrier: Barrier) -> tuple[int, list[str]]:
    """Repeatedly lock GPUs 0-3 of host ``h``; while holding them, check no other run holds any.

    Returns the number of successful acquisitions and any violations seen.
    """
    engine = db_session.get_engine(url)
    wins = 0
    violations = []
    barrier.wait()
    with db_session.new_session(engine) as session:
        for _ in range(rounds):
            if crud.acquire_gpus(session, host_name="h", gpu_ids=[0, 1, 2, 3], run_id=run_id, worker_id="w"):
                wins += 1
                holders = {(lock.gpu_index, lock.run_id) for lock in crud.gpu_locks(session, host_name="h")}
                if holders != {(index, run_id) for index in range(4)}:
                    violations.append(f"run {run_id} holds GPUs but the table says {sorted(holders)}")
                crud.release_gpus(session, run_id=run_id)
    return wins, violations


def upgrade(url: str, barrier: Barrier) -> str | None:
    """Apply the migrations; returns the revision seen afterwards."""
    barrier.wait()
    db_session.upgrade(url)
    return db_session.current_revision(url)


def mixed_writes(url: str, worker_id: str, rounds: int, barrier: Barrier) -> int:
    """A worker's write pattern in a tight loop: queue, claim, heartbeat, store a result, list."""
    engine = db_session.get_engine(url)
    requests = [
        {"index": index, "ttft_ms": 1.0, "itl_ms": [1.0, 2.0], "success": True} for index in range(50)
    ]
    crud_calls = 0
    barrier.wait()
    with db_session.new_session(engine) as session:
        crud.register_worker(session, worker_id=worker_id, hostname="box", pid=1)
        for _ in range(rounds):
            crud.create_run(session, engine="vllm", model="m", host_name=worker_id)
            run = crud.claim_next_run(session, worker_id=worker_id, host_names=[worker_id])
            crud.worker_heartbeat(session, worker_id=worker_id)
            crud.set_run_status(session, run_id=run.id, status="ready")
            crud.set_run_status(session, run_id=run.id, status="benchmarking")
            crud.add_profile_result(
                session,
                run_id=run.id,
                profile={"name": "p"},
                result={"completed": 50, "requests": requests},
                text_block=None,
                bench_mode="on-host",
            )
            crud.add_samples(
                session, run_id=run.id, samples=[{"t_s": 1.0, "source": "bench", "values": {"x": 1}}]
            )
            crud.set_run_status(session, run_id=run.id, status="done")
            crud.list_runs(session, host=worker_id, limit=5)
            crud_calls += 9
    return crud_calls
