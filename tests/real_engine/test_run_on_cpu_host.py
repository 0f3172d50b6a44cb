"""``perflab run`` of the real vLLM (CPU build) on a CPU host reached over a real sshd on loopback.

Launch, readiness, ``/metrics`` sampling, the benchmark on the host, the stored result, the engine
version as the engine reports it, the effective configuration its own parser read back before the
launch, and the engine stopped with no process left behind. The engine runs eager (no torch.compile,
which would double its start-up and prove nothing more here).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.cli import main
from perflab.inventory import HostConfig
from tests.fixtures.real_vllm import EAGER, free_port, tiny_model_dir
from tests.fixtures.runs import perflab_env, run_key_pids, sized_count, stored_run, write_hosts_file

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(900)]


def test_perflab_run_of_real_vllm_on_a_cpu_host_end_to_end(
    vllm_cpu_host: HostConfig,
    vllm_reported_version: str,
    runs_db: Engine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in perflab_env(
        runs_db, write_hosts_file(tmp_path / "hosts.yaml", [vllm_cpu_host])
    ).items():
        monkeypatch.setenv(name, value)
    model = tiny_model_dir()
    code = main(
        [
            "run",
            "--host",
            vllm_cpu_host.name,
            "--engine",
            "vllm",
            "--model",
            str(model),
            "--served-model-name",
            "tiny",
            "--max-model-len",
            "1024",
            "--cpu-kvcache-space-gib",
            "1",
            "--port",
            str(free_port()),
            f"--extra-arg={EAGER}",
            "--profile",
            "random:in=48,out=24,n=12,concurrency=4,name=tiny-load",
            "--json",
        ]
    )
    output = json.loads(capsys.readouterr().out)
    assert code == 0, output["failure_message"]
    assert output["status"] == "done" and output["simulated"] is False
    assert output["accelerator"].startswith("CPU (") and output["gpu_ids"] == [0]
    (command,) = output["serve_commands"]
    assert "CPU_VISIBLE_MEMORY_NODES=0" in command and "CUDA_VISIBLE_DEVICES" not in command
    assert "VLLM_CPU_KVCACHE_SPACE=1" in command and f"vllm serve {model}" in command
    assert f" {EAGER}" in command  # the engine's extra argument, passed verbatim
    # the preflight's read-back through vLLM's own parser, over SSH: the values the engine ran with
    effective = output["environment"]["effective_config"]
    assert (effective["model"], effective["max_model_len"], effective["served_model_name"]) == (
        str(model),
        1024,
        ["tiny"],
    )

    assert output["environment"]["engine_version"] == vllm_reported_version == "0.32.0+cpu"

    (result,) = output["results"]
    assert result["profile"] == "tiny-load"
    bench = result["result"]
    assert (
        bench["completed"] == sized_count(bench, 12)
        and bench["failed"] == 0
        and bench["total_output_tokens"] > 0
    )
    assert bench["mean_ttft_ms"] > 0 and bench["model_id"] == "tiny"

    run = stored_run(runs_db, output["run_id"])
    # the stored excerpt begins with the engine's log; a long log (a slow machine's) loses its middle to
    # "[... N lines omitted ...]", and with it perhaps the start-up line: the whole log stays in the run's
    # directory
    engine_log = (Path(run.remote_state["run_dir"]) / "engine-0.log").read_text()
    assert "Application startup complete" in engine_log
    head = [line.rstrip() for line in (run.log_tail or "").split("\n[... ")[0].splitlines()]
    assert head and head == [line.rstrip() for line in engine_log.splitlines()[: len(head)]]
    assert run.remote_state["stopped"]["engine-0"] in ("term", "kill")
    assert run_key_pids(run.remote_state["run_key"]) == [], "no engine process is left behind"
    with new_session(runs_db) as session:
        samples = crud.list_samples(session, run_id=run.id)
    engine_samples = [sample for sample in samples if sample.source == "engine"]
    assert engine_samples, "vLLM's /metrics were sampled while it served"
    assert {"running", "waiting", "kv_cache_usage"} <= set(engine_samples[0].values)
