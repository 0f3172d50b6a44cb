"""The real vLLM (its CPU build) run from an image with real Podman, over the real sshd: the image holds
the system parts (Debian's python3, the C++ toolchain torch inductor compiles with, the libraries the
venv loads) and the host mounts the venv, the Python it was made with and vLLM's compile cache
(``container_mounts``); perflab pulls nothing, starts the container, waits for readiness, benchmarks,
reads the version inside the image and removes the container."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.engines import EngineConfig
from perflab.runner import RunnerOptions, execute_run, submit_run
from perflab.runner.profile_spec import parse_profile
from tests.fixtures.podman import launch_containers, venv_python_root, vllm_image
from tests.fixtures.real_vllm import (
    KVCACHE_SPACE_GIB,
    MAX_MODEL_LEN,
    SERVED_MODEL_NAME,
    VLLM_VERSION,
    cache_dir,
    free_port,
    require_real_vllm,
    tiny_model_dir,
    vllm_venv,
)
from tests.fixtures.runs import inventory_of, sized_count, stored_run
from tests.fixtures.sshd import SshServer

pytestmark = [pytest.mark.real_engine, pytest.mark.slow, pytest.mark.timeout(1200)]
OPTIONS = RunnerOptions(ready_poll_s=1.0, sample_interval_s=2.0, stop_grace_s=20.0, ready_timeout_s=900.0)


def test_the_real_vllm_serves_from_a_container_and_is_removed(
    runs_db: Engine, sshd: SshServer, podman_env: dict[str, str], tmp_path: Path
) -> None:
    require_real_vllm()
    venv = vllm_venv()
    compile_cache = cache_dir() / "vllm-container-compile-cache"
    compile_cache.mkdir(parents=True, exist_ok=True)
    host = sshd.host_config(
        "cpu-box",
        workdir=str(tmp_path / "work"),
        env=podman_env,
        container_mounts=[str(venv), venv_python_root(venv), f"{compile_cache}:/root/.cache/vllm:rw"],
    )
    config = EngineConfig(
        engine="vllm",
        model=str(tiny_model_dir()),
        served_model_name=SERVED_MODEL_NAME,
        max_model_len=MAX_MODEL_LEN,
        # A port of its own, away from the default ports other engines on this machine may take meanwhile.
        port=free_port(),
        image=vllm_image(venv),
        extra_args=("--dtype", "bfloat16"),
        cpu_kvcache_space_gib=KVCACHE_SPACE_GIB,
        env={
            "HF_HUB_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "PYTHONUNBUFFERED": "1",
        },
    )
    stored = submit_run(
        runs_db,
        host_name=host.name,
        config=config,
        profiles=[parse_profile("random:in=32,out=8,n=8")],
        worker_id="real-container",
    )
    status = execute_run(
        stored.id, engine=runs_db, inventory=inventory_of(host), worker_id="real-container", options=OPTIONS
    )
    run = stored_run(runs_db, stored.id)

    assert status == "done", f"{run.failure_class}: {run.failure_message}\n{run.log_tail}"
    assert run.environment["container"]["engine_version"].startswith(VLLM_VERSION)
    assert run.remote_state["stopped"]["engine-0"] in ("term", "kill")
    assert launch_containers(run.remote_state["run_key"]) == []
    with new_session(runs_db) as session:
        (result,) = crud.list_profile_results(session, run_id=run.id)
    assert result.completed == sized_count(result.result, 8), result.result.get("errors", [])[:1]
    assert result.failed == 0
