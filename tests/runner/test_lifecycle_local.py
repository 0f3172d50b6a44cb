"""Run lifecycles on a simulated local host (``transport: local``): readiness deadline, cancel while
launching, a load-curve sweep on one launch, datasets from the database and from a local hub (else the
shipped sample)."""

from __future__ import annotations

import itertools
import json
import os
import signal
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.models import Run
from db.session import new_session
from perflab.datasets import parse_upload, profile_dataset, store_dataset
from perflab.engines import EngineConfig
from perflab.hub.catalog import SHAREGPT, used_sample
from perflab.hub.sample import SAMPLE_NAME, SAMPLE_PATH
from perflab.inventory import HostConfig
from perflab.profiles import BenchmarkProfile
from perflab.runner import RunnerOptions, execute_run, live, submit_run
from perflab.runner.evidence import MIN_COMPLETED
from perflab.runner.execute import RunEvent
from perflab.runner.profile_spec import parse_profile
from perflab.transport import open_transport
from perflab.views import run_list
from tests.fixtures.hub_server import HubServer
from tests.fixtures.runs import (
    BackgroundRun,
    SimHostFactory,
    benchmarking_with_progress,
    cancel,
    free_port_block,
    inventory_of,
    run_key_pids,
    sized_count,
    stored_run,
    wait_for_run,
)

WORKER = "local-worker"


def _submit(engine: Engine, host: HostConfig, spec: str, **knobs: object) -> Run:
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", port=free_port_block(1), **knobs)
    return submit_run(
        engine, host_name=host.name, config=config, profiles=[parse_profile(spec)], worker_id=WORKER
    )


def _execute(engine: Engine, host: HostConfig, run: Run, options: RunnerOptions | None = None) -> Run:
    status = execute_run(
        run.id, engine=engine, inventory=inventory_of(host), worker_id=WORKER, options=options
    )
    stored = stored_run(engine, run.id)
    assert stored.status == status
    return stored


def test_an_engine_not_ready_by_the_deadline_fails_with_timeout(
    runs_db: Engine, sim_host: SimHostFactory
) -> None:
    # At real speed the simulated vLLM needs half a minute to load and warm up.
    host = sim_host("slow", kind="local", time_scale=1.0)
    run = _submit(runs_db, host, "short:n=5")
    options = RunnerOptions(ready_timeout_s=1.5, ready_poll_s=0.2, stop_grace_s=5.0)

    stored = _execute(runs_db, host, run, options)

    assert stored.status == "failed" and stored.failure_class == "timeout"
    assert stored.failure_message.startswith("vLLM: ") and "(1.5 s)" in stored.failure_message
    assert stored.remote_state["stopped"] == {"engine-0": "term"}
    assert run_key_pids(stored.remote_state["run_key"]) == []


def test_cancel_while_launching_stops_the_engine(runs_db: Engine, sim_host: SimHostFactory) -> None:
    host = sim_host("slow-cancel", kind="local", time_scale=1.0)
    run = _submit(runs_db, host, "short:n=5")
    options = RunnerOptions(ready_timeout_s=120.0, ready_poll_s=0.2, stop_grace_s=5.0)
    background = BackgroundRun(runs_db, run.id, host, WORKER, options)
    wait_for_run(runs_db, run.id, lambda r: "pid" in str(r.remote_state))
    cancel(runs_db, run.id)

    assert background.join() == "cancelled"
    stored = stored_run(runs_db, run.id)
    assert stored.status == "cancelled" and stored.ready_at is None
    assert stored.remote_state["stopped"] == {"engine-0": "term"}
    assert run_key_pids(stored.remote_state["run_key"]) == []


def test_a_sweep_stores_one_result_per_point_from_one_launch(
    runs_db: Engine, sim_host: SimHostFactory
) -> None:
    host = sim_host("sweeper", kind="local")
    run = _submit(runs_db, host, "random:in=128,out=16,n=12,sweep=concurrency:1/4/12,flat=no,name=curve")

    stored = _execute(runs_db, host, run)

    assert stored.status == "done", stored.failure_message
    assert len(stored.serve_commands) == 1
    with new_session(runs_db) as session:
        results = crud.list_profile_results(session, run_id=run.id)
    assert [result.sweep_point["value"] for result in results] == [1, 4, 12]
    assert [result.sweep_point["index"] for result in results] == [0, 1, 2]
    assert [result.profile["max_concurrency"] for result in results] == [1, 4, 12]
    assert all(result.profile_name == "curve" for result in results)
    assert all(result.completed == sized_count(result.result, 12) >= MIN_COMPLETED for result in results)
    assert [result.result["max_concurrency"] for result in results] == [1, 4, 12]


def test_a_custom_dataset_comes_from_the_database(runs_db: Engine, sim_host: SimHostFactory) -> None:
    host = sim_host("datasets", kind="local")
    prompts = "".join(
        json.dumps({"prompt": f"question {index}", "output_len": 4}) + "\n" for index in range(6)
    )
    with new_session(runs_db) as session:
        crud.create_dataset(session, name="my prompts", content=prompts.encode(), format="jsonl")
    run = _submit(runs_db, host, "custom:path=my prompts,n=6")

    stored = _execute(runs_db, host, run)

    assert stored.status == "done", stored.failure_message
    with new_session(runs_db) as session:
        (result,) = crud.list_profile_results(session, run_id=run.id)
    assert result.completed == sized_count(result.result, 6) >= MIN_COMPLETED
    assert result.result["total_output_tokens"] == 4 * result.completed


def test_sharegpt_is_fetched_from_the_hub_else_the_labelled_sample_is_used(
    runs_db: Engine,
    sim_host: SimHostFactory,
    hub_server: HubServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    host = sim_host("hub", kind="local")
    monkeypatch.setenv("PERFLAB_HUB_CACHE", str(tmp_path / "hub"))
    dump = (
        SAMPLE_PATH.read_bytes()[: SAMPLE_PATH.read_bytes().index(b', {"id": "perflab-sample-0010"')] + b"]"
    )
    hub_server.add(SHAREGPT.repo, SHAREGPT.path, dump)
    monkeypatch.setenv("PERFLAB_HF_ENDPOINT", hub_server.endpoint)
    events: list[RunEvent] = []
    run = _submit(runs_db, host, "sharegpt:n=5")
    status = execute_run(
        run.id, engine=runs_db, inventory=inventory_of(host), worker_id=WORKER, on_event=events.append
    )
    assert status == "done", stored_run(runs_db, run.id).failure_message
    with new_session(runs_db) as session:
        (fetched,) = crud.list_profile_results(session, run_id=run.id)
    assert not used_sample(fetched.result.get("notes")) and fetched.completed == sized_count(
        fetched.result, 5
    )
    assert fetched.result["dataset"]["path"].endswith(".json")
    assert any(
        event.data.get("downloading") == "ShareGPT_V3_unfiltered_cleaned_split.json" for event in events
    )
    command = stored_run(runs_db, run.id).bench_commands[0]
    assert command.endswith("-ShareGPT_V3_unfiltered_cleaned_split.json") and " --dataset-path " in command

    monkeypatch.setenv("PERFLAB_HUB_CACHE", str(tmp_path / "empty-cache"))
    hub_server.hub.shutdown()
    hub_server.hub.server_close()  # unreachable: connections are refused, not left unanswered
    offline = _submit(runs_db, host, "sharegpt:n=5")
    assert _execute(runs_db, host, offline).status == "done"
    with new_session(runs_db) as session:
        (sampled,) = crud.list_profile_results(session, run_id=offline.id)
    assert used_sample(sampled.result["notes"]) and sampled.completed == sized_count(sampled.result, 5)
    assert SAMPLE_NAME in stored_run(runs_db, offline.id).bench_commands[0]


def test_a_missing_dataset_fails_the_run_before_any_request(
    runs_db: Engine, sim_host: SimHostFactory
) -> None:
    host = sim_host("no-dataset", kind="local")
    run = _submit(runs_db, host, "sharegpt:path=/nonexistent/sharegpt.json,n=5")

    stored = _execute(runs_db, host, run)

    assert stored.status == "failed" and stored.failure_class == "dataset_missing"
    assert "'/nonexistent/sharegpt.json'" in stored.failure_message
    assert stored.remote_state is None, "nothing is started on the host"


def test_without_hand_back_a_run_waits_for_locked_gpus(runs_db: Engine, sim_host: SimHostFactory) -> None:
    host = sim_host("one-gpu", kind="local", count=1)
    holder = _submit(runs_db, host, "short:n=5")
    with new_session(runs_db) as session:
        assert crud.acquire_gpus(
            session, host_name=host.name, gpu_ids=[0], run_id=holder.id, worker_id="other"
        )
    waiting = _submit(runs_db, host, "random:in=64,out=8,n=5")
    options = RunnerOptions(hand_back_when_busy=False, gpu_wait_poll_s=0.2, ready_poll_s=0.2)
    background = BackgroundRun(runs_db, waiting.id, host, WORKER, options)

    blocked = wait_for_run(runs_db, waiting.id, lambda r: "waiting_for_gpus" in (r.progress or {}))
    assert blocked.status == "launching"
    assert blocked.progress["waiting_for_gpus"] == f"1 free GPUs needed; run(s) {holder.id} hold 1 of 1"
    with new_session(runs_db) as session:
        crud.release_gpus(session, run_id=holder.id)

    assert background.join() == "done"
    assert stored_run(runs_db, waiting.id).gpu_ids == [0]


def test_an_engine_dying_mid_benchmark_fails_the_run_and_keeps_its_records(
    runs_db: Engine, sim_host: SimHostFactory
) -> None:
    host = sim_host("dies", kind="local")
    # 300 requests at 10 a second: a round of 30 s, so the kill lands in the first round however late
    # a loaded machine lets the test see the first progress line.
    run = _submit(runs_db, host, "random:in=64,out=8,n=300,rate=10")
    background = BackgroundRun(runs_db, run.id, host, WORKER, RunnerOptions(ready_poll_s=0.2))
    benchmarking = wait_for_run(runs_db, run.id, benchmarking_with_progress)
    os.killpg(benchmarking.remote_state["processes"][0]["pid"], signal.SIGKILL)

    assert background.join() == "failed"
    stored = stored_run(runs_db, run.id)
    assert stored.failure_class == "engine_died"
    assert (
        "engine-0 exited" in stored.failure_message and "while benchmarking random" in stored.failure_message
    )
    with new_session(runs_db) as session:
        (result,) = crud.list_profile_results(session, run_id=run.id)
        records = crud.list_request_records(session, profile_result_id=result.id)
    # The bench stopped once the engine refused connections: the records are those of the requests
    # sent until then, and the result says it is partial.
    assert result.result["partial"] is True and "went away mid-run" in result.result["partial_reason"]
    assert result.completed > 0 and result.failed > 0 and 0 < len(records) < 300
    assert "Partial result:" in (result.text_block or "")


def test_a_flag_the_hosts_engine_lacks_fails_the_run_before_anything_starts(
    runs_db: Engine, sim_host: SimHostFactory
) -> None:
    """The preflight asks the host's vLLM (``vllm serve --help=all``) before locking GPUs or launching."""
    host = sim_host("preflight", kind="local")
    run = _submit(runs_db, host, "short:n=5", extra_args=("--no-such-flag",))

    stored = _execute(runs_db, host, run)

    assert stored.status == "failed" and stored.failure_class == "unknown_argument"
    assert stored.failure_message == (
        "preflight: vLLM 0.11.0 on host 'preflight' refuses this configuration: "
        "vLLM 0.11.0 has no flag --no-such-flag"
    )
    assert not stored.remote_state and not stored.serve_commands and not stored.gpu_ids
    with new_session(runs_db) as session:
        assert crud.gpu_locks(session, host_name=host.name) == []


def test_a_tensorrt_llm_run_samples_its_queue_gauges(runs_db: Engine, sim_host: SimHostFactory) -> None:
    """The launch's options file turns on /prometheus/metrics, where the sampler reads TRT-LLM's gauges."""
    host = sim_host("trt-metrics", kind="local")
    config = EngineConfig(engine="trtllm", model="Qwen/Qwen3-8B", port=free_port_block(1))
    run = submit_run(
        runs_db,
        host_name=host.name,
        config=config,
        profiles=[parse_profile("random:in=256,out=32,n=24,rate=8,name=paced")],
        worker_id=WORKER,
    )

    stored = _execute(runs_db, host, run, RunnerOptions(sample_interval_s=0.3, ready_poll_s=0.2))

    assert stored.status == "done", stored.failure_message
    assert "--extra_llm_api_options extra_llm_api_options.yaml" in stored.serve_commands[0]
    with new_session(runs_db) as session:
        engine_samples = [s.values for s in crud.list_samples(session, run_id=run.id) if s.source == "engine"]
    assert engine_samples
    assert all({"running", "waiting", "kv_cache_usage"} <= set(values) for values in engine_samples)


def test_a_host_whose_nvidia_smi_cannot_reach_the_driver_fails_with_the_probes_reason(
    runs_db: Engine, sim_host: SimHostFactory
) -> None:
    host = sim_host("no-driver", kind="local", count=1)
    with open_transport(host) as transport:
        assert transport.run(["nvidia-smi", "-L"], timeout=30).ok  # installs the simulator's shims
    recorded = Path(__file__).resolve().parents[1] / "data" / "probe" / "nvidia-smi" / "driver-failed.txt"
    shim = Path(host.workdir) / "sim" / "bin" / "nvidia-smi"
    shim.write_text(f"#!/bin/sh\ncat {recorded}\nexit 9\n")
    stored = _execute(runs_db, host, _submit(runs_db, host, "random:in=8,out=4,n=2"))
    assert (stored.status, stored.failure_class) == ("failed", "gpus_unavailable")
    message = stored.failure_message or ""
    assert "lists no accelerators: nvidia-smi cannot talk to the NVIDIA driver" in message
    assert "found none" not in message


def test_a_benchmark_says_its_step_and_since_when(runs_db: Engine, sim_host: SimHostFactory) -> None:
    """The runner's progress names the profile's step from the moment it starts the benchmark (before
    the first request: the agent and the prompts are being prepared) through the warm-up, counted
    apart from the measured requests, and the rounds that size the benchmark to the floor of evidence
    (the next one prepared between them), to collecting the result once the last request ended."""
    host = sim_host("steps", kind="local")
    events: list[RunEvent] = []
    run = _submit(runs_db, host, "random:in=64,out=8,n=40,warmup=6")
    status = execute_run(
        run.id, engine=runs_db, inventory=inventory_of(host), worker_id=WORKER, on_event=events.append
    )
    assert status == "done", stored_run(runs_db, run.id).failure_message
    stepped = [event.data for event in events if event.kind == "progress" and "step" in event.data]
    steps = [data["step"] for data in stepped]
    assert steps[0] == live.STARTING and steps[-1] == live.COLLECTING
    assert live.WARMUP in steps and steps.index(live.WARMUP) < steps.index(live.COLLECTING)
    warmup = [data for data in stepped if data["step"] == live.WARMUP]
    assert (warmup[-1]["warmup_done"], warmup[-1]["warmup_total"]) == (6, 6)
    assert all((data["done"], data["total"]) == (0, 40) for data in warmup)  # measured: none yet
    with new_session(runs_db) as session:
        (result,) = crud.list_profile_results(session, run_id=run.id)
    sized = sized_count(result.result, 40)
    assert sized >= MIN_COMPLETED and (stepped[-1]["done"], stepped[-1]["total"]) == (sized, sized)
    assert steps.count(live.COLLECTING) == 1 and live.PREPARING in steps  # 40 requests a round: 2 or more
    numbers = [data["rounds"]["number"] for data in stepped if "rounds" in data]
    assert numbers == sorted(numbers) and numbers[-1] == result.result["rounds"]["count"] >= 2
    # each step keeps the moment it began while it lasts; a later step began no earlier
    for before, after in itertools.pairwise(stepped):
        if before["step"] == after["step"]:
            assert after["step_since"] == before["step_since"], (before, after)
        else:
            assert after["step_since"] >= before["step_since"], (before, after)


def test_an_uploaded_session_file_is_replayed_turn_by_turn(runs_db: Engine, sim_host: SimHostFactory) -> None:
    """A session file stored as the Datasets page stores it runs as an agentic trace: every turn sent
    after the reply to the last, the later turns hitting the engine's prefix cache, and the Runs list
    shows that hit rate."""
    host = sim_host("sessions", kind="local")
    system = "You are a coding agent working in a large repository. " * 20
    conversations = [
        [
            {
                "messages": [
                    {"role": "system", "content": system},
                    {"role": "user", "content": f"Task {index}."},
                ]
            },
            {"messages": [{"role": "tool", "content": "README.md setup.py"}], "output_len": 8},
            {"messages": [{"role": "user", "content": "Go on."}], "output_len": 8},
        ]
        for index in range(4)
    ]
    content = "".join(json.dumps(conversation) + "\n" for conversation in conversations).encode()
    with new_session(runs_db) as session:
        dataset, _ = store_dataset(session, parse_upload("agents.jsonl", content), content, name="agents")
    profile = BenchmarkProfile(
        name="agents",
        title="Agents",
        **profile_dataset(dataset),
        num_prompts=4,
        max_concurrency=2,
        output_len=None,
    )
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", port=free_port_block(1))
    run = submit_run(runs_db, host_name=host.name, config=config, profiles=[profile], worker_id=WORKER)

    stored = _execute(runs_db, host, run)

    assert stored.status == "done", stored.failure_message
    with new_session(runs_db) as session:
        (result,) = crud.list_profile_results(session, run_id=run.id)
        page = run_list.load_run_page(session, run_list.RunFilters())
    assert result.completed == sized_count(result.result, 12) >= MIN_COMPLETED
    assert result.result["sessions"]["completed"] == result.completed // 3  # three turns each
    assert result.result["dataset"]["name"] == "agentic-trace"
    hit_rate = result.result["prefix_cache_hit_rate"]
    assert hit_rate is not None and hit_rate > 0
    assert page.table.loc[run.id, run_list.CACHE_HIT_COLUMN] == pytest.approx(hit_rate)
    assert run_list.CACHE_HIT_COLUMN in run_list.shown_columns("compact", page.table)


def test_a_local_host_too_slow_for_perflabs_commands_is_named_slow_not_a_lost_connection(
    runs_db: Engine, sim_host: SimHostFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local host has no connection to lose: a bookkeeping command past its limit (here, the scan
    for leftovers at the run's start, given no time at all) names the host as slow."""
    host = sim_host("crawling", kind="local")
    run = _submit(runs_db, host, "short:n=5")
    monkeypatch.setattr("perflab.remote.process._COMMAND_TIMEOUT_S", 0.001)

    stored = _execute(runs_db, host, run)

    assert stored.status == "failed" and stored.failure_class == "host_slow", stored.failure_message
    assert stored.failure_message.startswith("host 'crawling' is slow: 'perflab-")
    assert "' on host 'crawling' ran longer than 0.001 s" in stored.failure_message
