"""Helpers of the team tests: runs on simulated hosts, a bystander run that must not notice a fault
next to it, and the checks every fault ends with."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import Engine

from db import crud
from db.models import ProfileResult, RequestRecord, Run
from db.session import new_session
from perflab.engines import EngineConfig
from perflab.inventory import HostConfig
from perflab.runner import RunnerOptions, execute_run, submit_run
from perflab.runner.profile_spec import parse_profile
from tests.fixtures.runs import (
    BackgroundRun,
    free_port_block,
    inventory_of,
    run_key_pids,
    sized_count,
    stored_run,
)

WORKER = "team-worker"
FAST = RunnerOptions(ready_poll_s=0.2, sample_interval_s=1.0, stop_grace_s=5.0, ready_timeout_s=60.0)
# 10 requests/s for 300 requests: about 30 s of benchmarking, so a fault always lands mid-run.
LONG_PROFILE = "random:in=64,out=8,n=300,rate=10"
# 16 requests at 8/s: about 2 s of benchmarking, after its engine started next to the faulty run.
BYSTANDER_REQUESTS = 16
BYSTANDER_PROFILE = f"random:in=64,out=8,n={BYSTANDER_REQUESTS},rate=8"


def submit(
    engine: Engine, host: HostConfig, spec: str, *, worker_id: str | None = WORKER, **knobs: object
) -> Run:
    """A vLLM run of ``spec`` on ``host`` on its own free port (claimed by ``worker_id``, or queued)."""
    knobs.setdefault("port", free_port_block(1))
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", **knobs)  # type: ignore[arg-type]
    return submit_run(
        engine, host_name=host.name, config=config, profiles=[parse_profile(spec)], worker_id=worker_id
    )


def execute(engine: Engine, host: HostConfig, run: Run) -> str:
    """Execute the claimed ``run`` on ``host`` in this thread; its final status."""
    return execute_run(run.id, engine=engine, inventory=inventory_of(host), worker_id=WORKER, options=FAST)


def start(engine: Engine, host: HostConfig, spec: str, **knobs: object) -> tuple[Run, BackgroundRun]:
    """Submit a run and execute it in a background thread."""
    run = submit(engine, host, spec, **knobs)
    return run, BackgroundRun(engine, run.id, host, WORKER, FAST)


def results_of(engine: Engine, run_id: int) -> list[tuple[ProfileResult, list[RequestRecord]]]:
    with new_session(engine) as session:
        return [
            (result, crud.list_request_records(session, profile_result_id=result.id))
            for result in crud.list_profile_results(session, run_id=run_id)
        ]


@dataclass
class Bystander:
    """A run next to the faulty one (another host or other GPUs) that must end as if nothing happened."""

    engine: Engine
    run: Run
    background: BackgroundRun | None = None

    @classmethod
    def start(cls, engine: Engine, host: HostConfig, **knobs: object) -> Bystander:
        run, background = start(engine, host, BYSTANDER_PROFILE, **knobs)
        return cls(engine, run, background)

    def check(self) -> Run:
        """It ended ``done`` with every request measured and nothing of it left running."""
        if self.background is not None:
            assert self.background.join(timeout_s=120.0) == "done"
        run = stored_run(self.engine, self.run.id)
        assert run.status == "done", run.failure_message
        [(result, records)] = results_of(self.engine, run.id)
        requests = sized_count(result.result, BYSTANDER_REQUESTS)  # rounds up to the floor of evidence
        assert result.completed == requests and result.failed == 0
        assert "partial" not in result.result and len(records) == requests
        assert run_key_pids(run.remote_state["run_key"]) == []
        return run


def check_failed(engine: Engine, run_id: int, failure_class: str, *phrases: str) -> Run:
    """The run ended ``failed`` with ``failure_class``, a message holding every phrase, its GPUs
    released, and no process carrying its run key alive on the machine."""
    run = stored_run(engine, run_id)
    assert (run.status, run.failure_class) == ("failed", failure_class), run.failure_message
    for phrase in phrases:
        assert phrase in (run.failure_message or ""), run.failure_message
    if run.remote_state:
        assert run_key_pids(run.remote_state["run_key"]) == []
    with new_session(engine) as session:
        assert [lock for lock in crud.gpu_locks(session) if lock.run_id == run_id] == []
    return run


def check_partial(engine: Engine, run_id: int, reason: str) -> ProfileResult:
    """The run kept one result: the requests measured before it stopped, marked partial."""
    [(result, records)] = results_of(engine, run_id)
    assert result.result["partial"] is True, result.result.get("partial_reason")
    assert reason in result.result["partial_reason"]
    assert 0 < len(records) == result.completed + result.failed < 300
    assert "Partial result:" in (result.text_block or "")
    return result
