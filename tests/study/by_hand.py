"""Study tests that move runs along by hand, as the runner moves them: a simulated host to queue them
on, the statuses up to benchmarking, a stored result per profile, and a study driven to its end."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from db import crud
from db.models import Study
from db.session import new_session
from perflab.inventory import HostConfig, Inventory, SimulateSpec
from perflab.study.coordinator import advance, create_study
from perflab.study.measure import study_runs
from perflab.study.spec import parse_spec
from perflab.study.strategy import StrategyFor
from perflab.study.study_plan import strategy_of

# One simulated local host with 8 H100s, named as the tests' specs name it.
INVENTORY = Inventory(
    path=Path("hosts.yaml"),
    hosts=(
        HostConfig(
            name="gpu-a",
            transport="local",
            workdir="/tmp/gpu-a",
            simulate=SimulateSpec(accelerator="H100", count=8),
        ),
    ),
)


def start(engine: Engine, run_id: int) -> None:
    """Take a queued run to benchmarking."""
    with new_session(engine) as session:
        for status in ("launching", "ready", "benchmarking"):
            crud.set_run_status(session, run_id=run_id, status=status)


def store(engine: Engine, run_id: int, profile: dict[str, Any], result: dict[str, Any]) -> None:
    """Store one profile's result of a run."""
    with new_session(engine) as session:
        crud.add_profile_result(
            session, run_id=run_id, profile=profile, result=result, text_block=None, bench_mode="on-host"
        )


def measure_once(engine: Engine, run_id: int, result: dict[str, Any]) -> None:
    """Run a queued run's first profile to ``result`` and end it ``done``."""
    start(engine, run_id)
    with new_session(engine) as session:
        profile = crud.require_run(session, run_id=run_id).profiles[0]
    store(engine, run_id, profile, result)
    with new_session(engine) as session:
        crud.set_run_status(session, run_id=run_id, status="done")


def drive(
    engine: Engine,
    spec: str,
    run: Callable[[int, int], None],
    *,
    rounds: int = 60,
    strategy_for: StrategyFor = strategy_of,
) -> Study:
    """Create the study of ``spec`` on :data:`INVENTORY` and advance it, moving each run it queues with
    ``run(study_id, run_id)``, until it ends; the study as it ended."""
    study_id = create_study(engine, parse_spec(spec), inventory=INVENTORY, queued_by="tester").id
    for _ in range(rounds):
        advance(engine, study_id, strategy_for=strategy_for)
        with new_session(engine) as session:
            study = crud.get_study(session, study_id=study_id)
            queued = [
                queued.id for queued in study_runs(session, study_id=study_id) if queued.status == "queued"
            ]
        if study.status in ("done", "failed", "incomplete"):
            return study
        for run_id in queued:
            run(study_id, run_id)
    raise AssertionError(f"study {study_id} did not end in {rounds} rounds")
