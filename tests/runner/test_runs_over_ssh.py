"""End-to-end runs over real SSH (the sshd fixture) to simulated hosts: launch, readiness, benchmark,
sampling, stop and storage — executed by a worker (two hosts in parallel) or by ``execute_run``."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Engine

from db import crud
from db.models import Run
from db.session import new_session
from perflab.engines import EngineConfig
from perflab.profiles import PRESETS, scaled
from perflab.runner import RunnerOptions, execute_run, submit_run
from perflab.runner.evidence import MIN_COMPLETED
from perflab.runner.profile_spec import parse_profile
from perflab.worker import Worker
from tests.fixtures.runs import (
    BackgroundRun,
    SimHostFactory,
    benchmarking_with_progress,
    cancel,
    free_port_block,
    inventory_of,
    run_key_pids,
    sized_count,
    wait_for_run,
    write_hosts_file,
)

WORKER = "test-worker"
FAST = RunnerOptions(ready_poll_s=0.2, sample_interval_s=1.0, stop_grace_s=5.0, ready_timeout_s=60.0)


def _run(engine: Engine, host, config: EngineConfig, profiles, options: RunnerOptions = FAST):  # type: ignore[no-untyped-def]
    stored = submit_run(engine, host_name=host.name, config=config, profiles=profiles, worker_id=WORKER)
    status = execute_run(
        stored.id, engine=engine, inventory=inventory_of(host), worker_id=WORKER, options=options
    )
    with new_session(engine) as session:
        return status, crud.require_run(session, run_id=stored.id)


def _check_done_run(engine: Engine, run: Run, prompts: list[int], ready_line: str) -> None:
    assert run.status == "done" and run.failure_class is None, run.failure_message
    assert run.launching_at < run.ready_at < run.benchmarking_at < run.finished_at
    assert run.simulated is True and run.accelerator == "NVIDIA H100 80GB HBM3"
    assert run.gpu_ids == [0, 1]
    assert run.environment["engine_version"] and run.environment["simulated"] is True
    assert run.environment["driver"] and run.environment["gpu_ids"] == [0, 1]
    assert len(run.serve_commands) == 1 and "CUDA_VISIBLE_DEVICES=0,1" in run.serve_commands[0]
    assert f"--port {run.config['port']}" in run.serve_commands[0]
    assert len(run.bench_commands) == len(prompts)
    assert ready_line in (run.log_tail or "")
    assert run.remote_state["stopped"] == {"engine-0": "term"}
    assert run_key_pids(run.remote_state["run_key"]) == []
    with new_session(engine) as session:
        results = crud.list_profile_results(session, run_id=run.id)
        assert [result.profile_name for result in results] == ["short", "paced"]
        for result, per_round in zip(results, prompts, strict=True):
            count = sized_count(result.result, per_round)
            assert result.completed == count >= MIN_COMPLETED and result.failed == 0
            assert result.bench_mode == "on-host"
            assert "Serving Benchmark Result" in (result.text_block or "")
            records = crud.list_request_records(session, profile_result_id=result.id)
            assert len(records) == count and all(record.success for record in records)
        samples = crud.list_samples(session, run_id=run.id)
    assert {sample.source for sample in samples} == {"engine", "accelerator"}
    accelerator = [sample.values for sample in samples if sample.source == "accelerator"]
    # The simulated H100's power model: 68.2 W idle (perflab.sim.power), more while the engine works.
    assert all(values["power_w"] >= 68.2 and values["sm_clock_mhz"] for values in accelerator)
    assert all(values["temperature_c"] >= 34 and "energy_mj" not in values for values in accelerator)


def test_vllm_and_sglang_runs_on_two_hosts_proceed_in_parallel(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path
) -> None:
    hosts = [sim_host("node-a"), sim_host("node-b")]
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", hosts)
    # The second profile sends 10 requests/s for 20 requests: about 2 s of benchmarking.
    profiles = [scaled(PRESETS["short"], 0.03), parse_profile("random:in=256,out=16,n=20,rate=10,name=paced")]
    queued = {
        engine_name: submit_run(
            runs_db,
            host_name=host.name,
            config=EngineConfig(engine=engine_name, model="Qwen/Qwen3-8B", tp=2, port=free_port_block(1)),
            profiles=profiles,
        )
        for engine_name, host in zip(("vllm", "sglang"), hosts, strict=True)
    }
    worker = Worker(runs_db, inventory_path=hosts_file, max_parallel_runs=2, runner_options=FAST)

    finished = worker.run_once()
    worker.stop()

    assert finished == {run.id: "done" for run in queued.values()}
    with new_session(runs_db) as session:
        vllm, sglang = (crud.require_run(session, run_id=queued[name].id) for name in ("vllm", "sglang"))
        assert crud.gpu_locks(session) == []
    _check_done_run(runs_db, vllm, [30, 20], "Application startup complete")
    _check_done_run(runs_db, sglang, [30, 20], "The server is fired up and ready to roll!")
    assert vllm.benchmarking_at < sglang.finished_at and sglang.benchmarking_at < vllm.finished_at


def test_fp8_trtllm_on_a100_fails_with_the_classified_reason(
    runs_db: Engine, sim_host: SimHostFactory
) -> None:
    host = sim_host("ssh-a100", accelerator="A100")
    config = EngineConfig(engine="trtllm", model="Qwen/Qwen3-8B-FP8", port=free_port_block(1))

    status, run = _run(runs_db, host, config, [parse_profile("short:n=5")])

    assert status == "failed"
    assert run.failure_class == "unsupported_hardware"
    assert "FP8" in run.failure_message and run.failure_message.startswith("TensorRT-LLM")
    assert run.ready_at is None and run.finished_at is not None
    assert "Traceback" in (run.log_tail or "")
    assert run_key_pids(run.remote_state["run_key"]) == []
    with new_session(runs_db) as session:
        assert crud.list_profile_results(session, run_id=run.id) == []
        assert crud.gpu_locks(session, host_name=host.name) == []


def test_two_replicas_report_node_totals_times_two(runs_db: Engine, sim_host: SimHostFactory) -> None:
    host = sim_host("ssh-replicas")
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", replicas=2, port=free_port_block(2))

    status, run = _run(runs_db, host, config, [parse_profile("random:in=128,out=16,n=40")])

    assert status == "done", run.failure_message
    assert run.replicas == 2 and run.knobs_summary.endswith("×2")
    assert run.gpu_ids == [0, 1]
    assert [command.split()[0] for command in run.serve_commands] == [
        "CUDA_VISIBLE_DEVICES=0",
        "CUDA_VISIBLE_DEVICES=1",
    ]
    assert run.remote_state["stopped"] == {"engine-0": "term", "engine-1": "term"}
    with new_session(runs_db) as session:
        (result,) = crud.list_profile_results(session, run_id=run.id)
    assert result.completed == sized_count(result.result, 40)
    per_replica = result.result["per_replica"]
    assert [row["base_url"] for row in per_replica] == [
        f"http://127.0.0.1:{config.port}",
        f"http://127.0.0.1:{config.port + 1}",
    ]
    assert all(row["completed"] > 0 for row in per_replica)
    assert sum(row["completed"] for row in per_replica) == result.completed
    per_replica_total = result.total_token_throughput / 2
    assert f"{per_replica_total:.2f}×2" in (result.text_block or "")


def test_cancel_during_benchmarking_stops_the_engine(runs_db: Engine, sim_host: SimHostFactory) -> None:
    host = sim_host("ssh-cancel")
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", port=free_port_block(1))
    # 10 requests/s for 300 requests: about 30 s unless cancelled.
    profile = parse_profile("random:in=64,out=8,n=300,rate=10")
    stored = submit_run(runs_db, host_name=host.name, config=config, profiles=[profile], worker_id=WORKER)
    background = BackgroundRun(runs_db, stored.id, host, WORKER, FAST)
    wait_for_run(runs_db, stored.id, benchmarking_with_progress)
    cancel(runs_db, stored.id)

    assert background.join() == "cancelled"
    with new_session(runs_db) as session:
        run = crud.require_run(session, run_id=stored.id)
        assert crud.gpu_locks(session, host_name=host.name) == []
    assert run.status == "cancelled" and run.finished_at is not None
    assert run.remote_state["stopped"] == {"engine-0": "term"}
    assert run_key_pids(run.remote_state["run_key"]) == []
    # The stopped bench wrote what it had measured, and the run kept it.
    with new_session(runs_db) as session:
        (result,) = crud.list_profile_results(session, run_id=stored.id)
        records = crud.list_request_records(session, profile_result_id=result.id)
    assert result.result["partial"] is True and result.result["partial_reason"] == "received SIGTERM"
    assert 0 < len(records) == result.completed < 300
