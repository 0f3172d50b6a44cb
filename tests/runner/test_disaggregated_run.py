"""A disaggregated SGLang or vLLM configuration run end to end on a simulated local host: prefill and
decode workers on their own GPUs, the real ``sglang-router`` or ``vllm-router`` in front, the benchmark
through the router (by the wall clock: the router passes the simulator's clock marks on to no worker),
every request prefill → decode, every worker sampled and everything stopped; a router or transfer library
the host lacks fails the run as an infrastructure failure."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.engines import EngineConfig
from perflab.inventory import HostConfig, SimulateSpec
from perflab.runner import RunnerOptions, execute_run, submit_run
from perflab.runner.errors import INFRASTRUCTURE_FAILURES
from perflab.runner.profile_spec import parse_profile
from tests.fixtures.runs import inventory_of, run_key_pids, sized_count, stored_run

WORKER = "disagg-worker"
OPTIONS = RunnerOptions(ready_timeout_s=120.0, ready_poll_s=0.2, stop_grace_s=5.0, sample_interval_s=0.5)
LAYOUT = {
    "prefill": {"workers": 2, "tp": 1},
    "decode": {"workers": 1, "tp": 2},
    "transfer_backend": "mooncake",
}


def _host(tmp_path: Path, name: str, *, router_installed: bool = True, **simulate: object) -> HostConfig:
    """A simulated local host; its PATH leads to this venv's ``python3`` (where sglang-router is
    installed) only when ``router_installed``."""
    system_path = "/usr/local/bin:/usr/bin:/bin"
    path = f"{Path(sys.executable).parent}:{system_path}" if router_installed else system_path
    spec = SimulateSpec(accelerator="H200", count=4, time_scale=20.0, startup_scale=1000.0, **simulate)
    return HostConfig(
        name=name, transport="local", workdir=str(tmp_path / name), simulate=spec, env={"PATH": path}
    )


def _run(engine: Engine, host: HostConfig, name: str = "sglang", **layout: object) -> tuple[str, object]:
    config = EngineConfig(engine=name, model="Qwen/Qwen3-8B", disaggregation={**LAYOUT, **layout})
    run = submit_run(
        engine,
        host_name=host.name,
        config=config,
        profiles=[parse_profile("short:n=24,in=200,out=8")],
        worker_id=WORKER,
    )
    status = execute_run(
        run.id, engine=engine, inventory=inventory_of(host), worker_id=WORKER, options=OPTIONS
    )
    return status, stored_run(engine, run.id)


# what each engine's simulated workers log of a handoff: SGLang's room, vLLM's NIXL request id
HANDOFF = {"sglang": r"room=(\d+)", "vllm": r"request=(\S+)"}
ROUTER_COMMAND = {
    "sglang": "sglang_router.launch_router --pd-disaggregation",
    "vllm": "vllm-router --vllm-pd",
}
ROUTER_PACKAGE = {"sglang": "sglang-router 0.3.2", "vllm": "vllm-router 0.1.17"}


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("name", "backend"), [("sglang", "mooncake"), ("vllm", "nixl")])
def test_a_disaggregated_run_benchmarks_through_the_real_router(
    runs_db: Engine, tmp_path: Path, name: str, backend: str
) -> None:
    pytest.importorskip("sglang_router" if name == "sglang" else "vllm_router")
    host = _host(tmp_path, "pd-host")
    status, run = _run(runs_db, host, name, transfer_backend=backend)
    assert status == "done", (run.failure_class, run.failure_message, run.log_tail)
    names = [entry["name"] for entry in run.remote_state["processes"]]
    assert names == ["prefill-0", "prefill-1", "decode-0", "router"]
    gpus = {entry["name"]: entry["gpu_ids"] for entry in run.remote_state["processes"]}
    assert gpus == {"prefill-0": [0], "prefill-1": [1], "decode-0": [2, 3], "router": []}
    assert sorted(run.gpu_ids) == [0, 1, 2, 3]
    assert run.remote_state["stopped"] == {name: "term" for name in names}
    assert run_key_pids(run.remote_state["run_key"]) == []
    # the commands: each worker's role, then the router naming every worker
    if name == "sglang":
        assert [
            ("--disaggregation-mode prefill" in c, "--disaggregation-mode decode" in c)
            for c in run.serve_commands[:3]
        ] == [(True, False), (True, False), (False, True)]
    else:
        assert all("NixlConnector" in command for command in run.serve_commands[:3])
    assert ROUTER_COMMAND[name] in run.serve_commands[3]
    router_port = run.remote_state["processes"][3]["port"]
    assert run.bench_commands and f"--base-url http://127.0.0.1:{router_port}" in run.bench_commands[0]
    # the router passes no clock mark on to the simulated workers: the benchmark goes by the wall clock
    assert "--wall-clock" in run.bench_commands[0]
    with new_session(runs_db) as session:
        (result,) = crud.list_profile_results(session, run_id=run.id)
        samples = crud.list_samples(session, run_id=run.id)
    measured = sized_count(result.result, 24)  # 24 prompts a round, in as many rounds as the floor asks
    assert result.result["completed"] == measured and result.result["failed"] == 0
    assert result.result["total_output_tokens"] == measured * 8
    assert result.result["timing_source"] != "simulated"
    note = f"timed by the wall clock: {ROUTER_PACKAGE[name]} passes no x-perflab-sim-clock header"
    assert any(text.startswith(note) for text in result.result["notes"])
    # every worker's metrics were sampled (the router has none of the engine's)
    assert {sample.values["replica"] for sample in samples if sample.source == "engine"} == {0, 1, 2}
    # every request went prefill → decode: each room the decode worker received, a prefill worker sent
    run_dir = Path(run.remote_state["run_dir"])
    sent: dict[str, str] = {}
    for worker in ("prefill-0", "prefill-1"):
        log = (run_dir / f"{worker}.log").read_text()
        sent.update(re.findall(rf"KV sent {HANDOFF[name]} tokens=(\d+)", log))
    received = re.findall(
        rf"KV received {HANDOFF[name]} from (?:127\.0\.0\.1|localhost):\d+ tokens=(\d+)",
        (run_dir / "decode-0.log").read_text(),
    )
    warmup = len(received) - measured
    assert warmup >= 0 and len(sent) == len(received)
    assert all(sent[room] == tokens for room, tokens in received)


@pytest.mark.timeout(300)
def test_a_router_the_host_lacks_is_an_infrastructure_failure(runs_db: Engine, tmp_path: Path) -> None:
    python3 = Path("/usr/bin/python3")
    if not python3.exists() or os.system(f"{python3} -c 'import sglang_router' 2>/dev/null") == 0:
        pytest.skip("the system python3 must lack sglang-router for this test")
    host = _host(tmp_path, "no-router", router_installed=False)
    status, run = _run(runs_db, host)
    assert status == "failed" and run.failure_class == "router_missing"
    assert "router_missing" in INFRASTRUCTURE_FAILURES
    assert "No module named 'sglang_router'" in run.failure_message
    assert run.remote_state["stopped"]["decode-0"] == "term"
    assert run_key_pids(run.remote_state["run_key"]) == []


@pytest.mark.timeout(300)
def test_a_transfer_library_the_host_lacks_is_an_infrastructure_failure(
    runs_db: Engine, tmp_path: Path
) -> None:
    host = _host(tmp_path, "no-nixl", transfer_backends=["mooncake"])
    status, run = _run(runs_db, host, transfer_backend="nixl")
    assert status == "failed" and run.failure_class == "transfer_backend_missing"
    assert "transfer_backend_missing" in INFRASTRUCTURE_FAILURES
    assert "Please install NIXL" in run.failure_message
