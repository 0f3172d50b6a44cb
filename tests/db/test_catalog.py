"""Datasets (deduplicated content), hosts seen, studies and their candidates."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlmodel import Session

from db import crud


def test_dataset_dedupe_list_get_delete(db_session: Session) -> None:
    content = b'{"prompt": "hello"}\n{"prompt": "world"}\n'
    first = crud.create_dataset(db_session, name="greetings", content=content, format="jsonl", num_prompts=2)
    again = crud.create_dataset(db_session, name="other name", content=content, format="jsonl")
    other = crud.create_dataset(
        db_session, name="csv", content=b"prompt\nhi\n", format="csv", created_by="ana"
    )
    assert again.id == first.id and again.name == "greetings"
    assert first.size_bytes == len(content) and first.content_hash == crud.content_hash(content)

    db_session.expunge_all()
    listed = crud.list_datasets(db_session)
    assert [dataset.id for dataset in listed] == [other.id, first.id]
    with pytest.raises(sa.exc.InvalidRequestError):
        _ = listed[0].content

    db_session.expunge_all()
    assert crud.get_dataset(db_session, dataset_id=first.id).content == content
    assert crud.delete_dataset(db_session, dataset_id=first.id)
    assert crud.get_dataset(db_session, dataset_id=first.id) is None
    with pytest.raises(ValueError, match="format"):
        crud.create_dataset(db_session, name="x", content=b"x", format="parquet")


def test_host_upsert_and_probe(db_session: Session) -> None:
    crud.upsert_host(db_session, name="gpu-1", address="10.0.0.5", transport="ssh", labels={"rack": "a"})
    crud.record_probe(db_session, name="gpu-1", reachable=True, probe={"gpus": 8})
    failed = crud.record_probe(db_session, name="gpu-1", reachable=False, error="timed out")
    assert failed.last_probe == {"gpus": 8} and failed.last_error == "timed out" and failed.reachable is False
    crud.upsert_host(db_session, name="local", transport="local", simulated=True)
    assert [host.name for host in crud.list_hosts(db_session)] == ["gpu-1", "local"]
    assert crud.get_host(db_session, name="gpu-1").address == "10.0.0.5"
    with pytest.raises(ValueError, match="no column"):
        crud.upsert_host(db_session, name="x", port=22)


def test_study_and_candidates(db_session: Session) -> None:
    study = crud.create_study(db_session, name="qwen on h100", spec={"stages": ["engine"]}, queued_by="ana")
    run = crud.create_run(db_session, engine="vllm", model="m", study_id=study.id)
    candidate = crud.add_candidate(
        db_session,
        study_id=study.id,
        stage_index=0,
        stage_name="engine",
        config={"engine": "vllm"},
        role="baseline",
    )
    crud.add_candidate(db_session, study_id=study.id, stage_index=1, stage_name="quantization", config={})
    crud.update_candidate(
        db_session, candidate_id=candidate.id, run_id=run.id, objective_value=9632.01, decision="winner"
    )
    running = crud.update_study(db_session, study_id=study.id, status="running", state={"stage": 1})
    assert running.finished_at is None
    done = crud.update_study(db_session, study_id=study.id, status="done", recommended_command="vllm serve m")
    assert done.finished_at is not None and done.updated_at >= done.created_at

    listed = crud.list_candidates(db_session, study_id=study.id)
    assert [(c.stage_name, c.decision, c.run_id) for c in listed] == [
        ("engine", "winner", run.id),
        ("quantization", None, None),
    ]
    assert [s.id for s in crud.list_studies(db_session, status="done")] == [study.id]
    with pytest.raises(ValueError, match="decision"):
        crud.update_candidate(db_session, candidate_id=candidate.id, decision="best")
    with pytest.raises(ValueError, match="study status"):
        crud.update_study(db_session, study_id=study.id, status="sleeping")

    assert crud.delete_study(db_session, study_id=study.id)
    assert crud.list_candidates(db_session, study_id=study.id) == []
    remaining = crud.get_run(db_session, run_id=run.id)
    db_session.refresh(remaining)
    assert remaining.study_id is None
