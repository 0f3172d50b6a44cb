"""Run lifecycle: creation from an EngineConfig, legal and illegal transitions, cancel, cascade."""

from __future__ import annotations

from datetime import timezone

import pytest
import sqlalchemy as sa
from sqlmodel import Session, select

from db import crud
from db.models import EngineConfigRow, ProfileResult, RequestRecord, RunSample
from perflab.engines.config import EngineConfig

CONFIG = EngineConfig(
    engine="vllm", model="Qwen/Qwen3-14B", tp=4, kv_cache_dtype="fp8", enable_prefix_caching=True, replicas=2
)


def test_the_knobs_summary_writes_the_replica_count_once_at_its_end() -> None:
    assert crud.summarize_knobs(EngineConfig(engine="vllm", model="m", tp=2, replicas=4)) == "tp=2 ×4"
    assert crud.summarize_knobs(EngineConfig(engine="vllm", model="m", replicas=3)) == "defaults ×3"
    assert crud.summarize_knobs(EngineConfig(engine="vllm", model="m", tp=4)) == "tp=4"
    with_image = EngineConfig(engine="vllm", model="m", tp=4, image="vllm/vllm-openai:v0.11.0")
    assert crud.summarize_knobs(with_image) == "image vllm/vllm-openai:v0.11.0 · tp=4"
    assert crud.summarize_knobs(EngineConfig(engine="vllm", model="m", image="x:1")) == "image x:1"


def test_create_run_from_config(db_session: Session) -> None:
    run = crud.create_run(db_session, config=CONFIG, host_name="gpu-1", accelerator="8× H100 80GB")
    again = crud.create_run(db_session, config=CONFIG.model_copy(update={"port": 9000}), host_name="gpu-1")

    assert run.status == "queued" and run.source == "perflab"
    assert (run.engine, run.model, run.replicas) == ("vllm", "Qwen/Qwen3-14B", 2)
    assert run.config_fingerprint == CONFIG.fingerprint() == again.config_fingerprint
    assert run.engine_config_id == again.engine_config_id
    assert EngineConfig.model_validate(run.config) == CONFIG
    assert run.knobs_summary == "tp=4 · enable_prefix_caching · kv_cache_dtype=fp8 ×2"
    assert len(db_session.exec(select(EngineConfigRow)).all()) == 1
    stored = crud.get_run(db_session, run_id=run.id)
    assert stored.created_at.tzinfo is not None and stored.created_at.utcoffset().total_seconds() == 0


def test_create_run_rejects_unknown_columns_and_values(db_session: Session) -> None:
    with pytest.raises(ValueError, match="no column"):
        crud.create_run(db_session, engine="vllm", model="m", colour="red")
    with pytest.raises(ValueError, match="status must be one of"):
        crud.create_run(db_session, engine="vllm", model="m", status="running")
    with pytest.raises(ValueError, match="source must be one of"):
        crud.create_run(db_session, engine="vllm", model="m", source="elsewhere")


def test_full_lifecycle_stamps_every_timestamp(db_session: Session) -> None:
    run = crud.create_run(db_session, engine="vllm", model="m")
    claimed = crud.claim_next_run(db_session, worker_id="w1")
    assert claimed.id == run.id and claimed.status == "launching"
    crud.set_run_status(db_session, run_id=run.id, status="ready", remote_state={"pids": [123]})
    crud.set_run_status(db_session, run_id=run.id, status="benchmarking")
    done = crud.set_run_status(db_session, run_id=run.id, status="done", log_tail="bye")
    assert done.status == "done" and done.log_tail == "bye" and done.remote_state == {"pids": [123]}
    stamps = [done.created_at, done.launching_at, done.ready_at, done.benchmarking_at, done.finished_at]
    assert all(stamp is not None and stamp.tzinfo == timezone.utc for stamp in stamps)
    assert stamps == sorted(stamps)


@pytest.mark.parametrize(
    ("path", "wanted"),
    [
        ([], "ready"),
        ([], "done"),
        (["launching"], "benchmarking"),
        (["launching", "ready", "benchmarking", "done"], "failed"),
        (["failed"], "queued"),
        (["cancelled"], "launching"),
    ],
)
def test_illegal_transitions_are_refused_and_change_nothing(
    db_session: Session, path: list[str], wanted: str
) -> None:
    run = crud.create_run(db_session, engine="vllm", model="m")
    for status in path:
        crud.set_run_status(db_session, run_id=run.id, status=status)
    with pytest.raises(crud.IllegalTransition, match=f"to '{wanted}'"):
        crud.set_run_status(db_session, run_id=run.id, status=wanted, log_tail="should not be stored")
    stored = crud.get_run(db_session, run_id=run.id)
    db_session.refresh(stored)
    assert stored.status == (path[-1] if path else "queued")
    assert stored.log_tail is None


def test_requeue_hands_a_claim_back(db_session: Session) -> None:
    run = crud.create_run(db_session, engine="vllm", model="m")
    crud.claim_next_run(db_session, worker_id="w1")
    requeued = crud.set_run_status(db_session, run_id=run.id, status="queued")
    assert (requeued.worker_id, requeued.launching_at) == (None, None)
    assert crud.claim_next_run(db_session, worker_id="w2").worker_id == "w2"


def test_failed_run_keeps_its_failure(db_session: Session) -> None:
    run = crud.create_run(db_session, engine="trtllm", model="m")
    crud.set_run_status(db_session, run_id=run.id, status="launching")
    failed = crud.set_run_status(
        db_session,
        run_id=run.id,
        status="failed",
        failure_class="unsupported",
        failure_message="Unsupported SM",
    )
    assert (failed.failure_class, failed.failure_message) == ("unsupported", "Unsupported SM")
    assert failed.finished_at is not None


def test_unknown_run_and_unknown_columns(db_session: Session) -> None:
    with pytest.raises(crud.NotFound):
        crud.set_run_status(db_session, run_id=999_999, status="failed")
    run = crud.create_run(db_session, engine="vllm", model="m")
    with pytest.raises(ValueError, match="cannot be set here"):
        crud.update_run(db_session, run_id=run.id, status="done")


def test_cancel_queued_and_in_flight_runs(db_session: Session) -> None:
    queued = crud.create_run(db_session, engine="vllm", model="m")
    in_flight = crud.create_run(db_session, engine="vllm", model="m")
    crud.set_run_status(db_session, run_id=in_flight.id, status="launching")

    assert crud.request_cancel(db_session, run_id=queued.id).status == "cancelled"
    flagged = crud.request_cancel(db_session, run_id=in_flight.id)
    assert (flagged.status, flagged.cancel_requested) == ("launching", True)
    assert crud.set_run_status(db_session, run_id=in_flight.id, status="cancelled").finished_at is not None
    assert crud.request_cancel(db_session, run_id=in_flight.id).status == "cancelled"


def test_update_and_heartbeat(db_session: Session) -> None:
    run = crud.create_run(db_session, engine="vllm", model="m")
    crud.update_run(db_session, run_id=run.id, progress={"done": 3}, gpu_ids=[0, 1])
    crud.heartbeat_run(db_session, run_id=run.id, progress={"done": 5})
    stored = crud.get_run(db_session, run_id=run.id)
    db_session.refresh(stored)
    assert stored.progress == {"done": 5} and stored.gpu_ids == [0, 1] and stored.heartbeat_at is not None


def test_delete_run_cascades_to_everything_it_owns(db_session: Session) -> None:
    run = crud.create_run(db_session, engine="vllm", model="m", host_name="h")
    keep = crud.create_run(db_session, engine="vllm", model="m", host_name="h")
    requests = [{"index": i, "ttft_ms": 1.0, "success": True} for i in range(5)]
    for target in (run, keep):
        crud.add_profile_result(
            db_session,
            run_id=target.id,
            profile={"name": "p"},
            result={"completed": 5, "requests": requests},
            text_block=None,
            bench_mode=None,
        )
        crud.add_samples(
            db_session, run_id=target.id, samples=[{"t_s": 0.0, "source": "engine", "values": {}}]
        )
    crud.acquire_gpus(db_session, host_name="h", gpu_ids=[0], run_id=run.id, worker_id="w")

    assert crud.delete_run(db_session, run_id=run.id)
    assert not crud.delete_run(db_session, run_id=run.id)

    def count(table: type) -> int:
        return db_session.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()

    assert (count(ProfileResult), count(RequestRecord), count(RunSample)) == (1, 5, 1)
    assert crud.gpu_locks(db_session) == []
    assert crud.get_run(db_session, run_id=keep.id) is not None
