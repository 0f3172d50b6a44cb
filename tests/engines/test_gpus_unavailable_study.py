"""vLLM's start-up memory messages that say another process holds the GPU end ``gpus_unavailable``, and a
study retries them instead of calling the configuration failed.

The logs are tests/data/logs/vllm/gpus_unavailable_*.log: the ValueErrors of ``request_memory``
(``vllm/v1/worker/utils.py``, vLLM 0.33.0, the same in 0.32.0) built from their format strings (header
of each). A simulated local host's ``vllm`` prints one and exits as vLLM does; a real worker launches it,
the runner classifies the log, and the study measures the configuration again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db.session import new_session
from perflab import settings
from perflab.study.progress import load_progress
from perflab.transport import open_transport
from tests.fixtures.runs import SimHostFactory, write_hosts_file
from tests.fixtures.study_data import run_study

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs" / "vllm"
SPEC = """
name: memory held by others
hosts: [{host}]
model: Qwen/Qwen3-8B
stages: [{{name: Batching, dimension: max_num_seqs, candidates: [64]}}]
baseline: {{engine: vllm}}
tuning_profile: {{name: tune, title: Chat, dataset: random, input_len: 64, output_len: 8, num_prompts: 4}}
gpus: 1
"""
MESSAGES = {
    "gpus_unavailable_engine_budget.log": (
        "is less than the engine's budget after excluding external process's weights"
    ),
    "gpus_unavailable_external_weights.log": (
        "Externally held weights on device cuda:0 (30.0/79.65 GiB) exceed the desired GPU memory utilization"
    ),
}


@pytest.mark.parametrize("log", sorted(MESSAGES))
def test_a_vllm_start_refused_for_memory_others_hold_is_retried_by_the_study(
    log: str, runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PERFLAB_STUDY_RETRY_DELAYS_S", "0")
    monkeypatch.setenv(settings.APP_WORKDIR_ENV, str(tmp_path / "app"))
    host = sim_host("memory-held", kind="local", count=1, time_scale=100)
    with open_transport(host) as transport:
        assert transport.run(["nvidia-smi", "-L"], timeout=30).ok  # installs the simulator's shims
    recorded = tmp_path / log
    recorded.write_text("\n".join((LOGS / log).read_text(encoding="utf-8").splitlines()[1:]) + "\n")
    shim = Path(host.workdir) / "sim" / "bin" / "vllm"
    shim.write_text(f"#!/bin/sh\ncat '{recorded}'\nexit 1\n")
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [host])

    final = run_study(runs_db, SPEC.format(host=host.name), hosts_file)

    assert final.status == "incomplete", final.state
    with new_session(runs_db) as session:
        runs = load_progress(session, study_id=final.id).runs
    # the first attempt and one retry (PERFLAB_STUDY_RETRY_DELAYS_S=0), both the baseline
    assert len(runs) == 2 and {run.config_fingerprint for run in runs} == {runs[0].config_fingerprint}
    for run in runs:
        assert (run.status, run.failure_class) == ("failed", "gpus_unavailable")
        assert MESSAGES[log] in (run.failure_message or "")
    (unmeasured,) = final.state["unmeasured"]
    assert unmeasured["label"] == "Baseline"
    assert unmeasured["reason"].startswith(
        "not measured (infrastructure): gpus_unavailable: vLLM: other processes"
    )
    assert MESSAGES[log] in unmeasured["reason"]
