"""Engine ports on a simulated local host: chosen free unless pinned, and chosen again when another
process takes one between perflab's check and the engine's bind (a pinned port that is taken fails the
run: tests/team/test_faults.py)."""

from __future__ import annotations

from sqlalchemy.engine import Engine

from db import crud
from db.models import Run
from db.session import new_session
from perflab.engines import EngineConfig
from perflab.inventory import HostConfig
from perflab.runner import RunnerOptions, execute_run, submit_run
from perflab.runner.profile_spec import parse_profile
from perflab.runner.store import RunStore
from tests.fixtures.ports import answering_server, held_ports
from tests.fixtures.runs import (
    BackgroundRun,
    SimHostFactory,
    inventory_of,
    run_key_pids,
    stored_run,
    wait_for_run,
)

WORKER = "port-worker"
OPTIONS = RunnerOptions(ready_timeout_s=120.0, ready_poll_s=0.2, stop_grace_s=5.0)


def _submit(engine: Engine, host: HostConfig, name: str, **knobs: object) -> Run:
    config = EngineConfig(engine=name, model="Qwen/Qwen3-8B", **knobs)  # type: ignore[arg-type]
    return submit_run(
        engine, host_name=host.name, config=config, profiles=[parse_profile("short:n=5")], worker_id=WORKER
    )


def _ports(run: Run) -> list[int]:
    return [entry["port"] for entry in run.remote_state["processes"]]


def test_replicas_get_free_ports_next_to_the_ports_others_hold(
    runs_db: Engine, sim_host: SimHostFactory
) -> None:
    host = sim_host("crowded-ports", kind="local", count=2)
    with held_ports(range(8000, 8011)) as held:
        run = _submit(runs_db, host, "vllm", replicas=2)
        status = execute_run(
            run.id, engine=runs_db, inventory=inventory_of(host), worker_id=WORKER, options=OPTIONS
        )
        stored = stored_run(runs_db, run.id)

    assert status == "done", stored.failure_message
    ports = _ports(stored)
    assert held and len(set(ports)) == 2 and not set(ports) & set(held)
    for port, command in zip(ports, stored.serve_commands, strict=True):
        assert f"--port {port}" in command


def test_ports_other_unfinished_runs_recorded_on_the_host_are_avoided(
    runs_db: Engine, sim_host: SimHostFactory
) -> None:
    host = sim_host("shared-ports", kind="local", count=2)
    other = _submit(runs_db, host, "vllm")
    finished = _submit(runs_db, host, "vllm")
    elsewhere = _submit(runs_db, sim_host("elsewhere", kind="local"), "vllm")
    with new_session(runs_db) as session:
        for claimed, port in ((other, 8001), (finished, 8002), (elsewhere, 8003)):
            crud.update_run(
                session, run_id=claimed.id, remote_state={"processes": [{"name": "engine-0", "port": port}]}
            )
        crud.set_run_status(session, run_id=finished.id, status="failed")
    run = _submit(runs_db, host, "vllm")
    assert RunStore(runs_db, run.id).ports_of_other_runs({host.name}) == {8001}
    assert RunStore(runs_db, run.id).ports_of_other_runs({host.name, "elsewhere"}) == {8001, 8003}


def test_a_port_taken_before_the_engine_binds_it_is_chosen_again(
    runs_db: Engine, sim_host: SimHostFactory
) -> None:
    # The simulated SGLang binds its port only once the model is loaded and warmed up (as SGLang does):
    # at a quarter of its start-up time, seconds in which even a loaded machine takes the port first.
    host = sim_host("racy-ports", kind="local", count=1, startup_scale=4.0)
    run = _submit(runs_db, host, "sglang")
    background = BackgroundRun(runs_db, run.id, host, WORKER, OPTIONS)
    first = wait_for_run(runs_db, run.id, lambda r: "pid" in str(r.remote_state))
    [taken] = _ports(first)
    # The other program answers the health probe, but it is not the engine: the run waits for its own.
    with answering_server(taken):
        assert background.join(120.0) == "done"

    stored = stored_run(runs_db, run.id)
    [port] = _ports(stored)
    assert port != taken and stored.remote_state["run_key"] != first.remote_state["run_key"]
    # (other programs on a shared machine may take a later choice too: each is chosen again)
    retries = stored.remote_state["port_retries"]
    assert retries[0]["ports"] == [taken] and "already in use" in retries[0]["reason"].lower()
    assert port not in {retried for retry in retries for retried in retry["ports"]}
    assert [f"--port {port}" in command for command in stored.serve_commands] == [True]
    assert run_key_pids(first.remote_state["run_key"]) == []
