"""Failed starts of the real vLLM (CPU build), launched by perflab on a CPU host over a real sshd and
classified from the engine's own log, with the error line (never a traceback source line) as message.
Arguments the installed vLLM refuses are caught earlier by perflab's preflight; their real log lines are
classified from the engine run directly."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.models import Run
from db.session import new_session
from perflab.engines import EngineConfig, get_adapter
from perflab.inventory import HostConfig
from perflab.runner import RunnerOptions, execute_run, submit_run
from perflab.runner.profile_spec import parse_profile
from tests.fixtures.real_vllm import free_port, serve_env, tiny_model_dir, vllm_python
from tests.fixtures.runs import inventory_of, run_key_pids

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(900)]

WORKER = "real-engine-failures"
OPTIONS = RunnerOptions(ready_poll_s=0.5, sample_interval_s=2.0, stop_grace_s=10.0, ready_timeout_s=600.0)
PROFILE = parse_profile("random:in=16,out=4,n=2")


def _failed_run(engine: Engine, host: HostConfig, options: RunnerOptions = OPTIONS, **fields: object) -> Run:
    # A port of its own, away from the default ports other engines on this machine may take meanwhile.
    fields.setdefault("port", free_port())
    config = EngineConfig(
        engine="vllm",
        model=str(fields.pop("model", tiny_model_dir())),
        served_model_name="tiny",
        max_model_len=512,
        cpu_kvcache_space_gib=1,
        **fields,  # type: ignore[arg-type]
    )
    stored = submit_run(engine, host_name=host.name, config=config, profiles=[PROFILE], worker_id=WORKER)
    status = execute_run(
        stored.id, engine=engine, inventory=inventory_of(host), worker_id=WORKER, options=options
    )
    with new_session(engine) as session:
        run = crud.require_run(session, run_id=stored.id)
    assert status == "failed", f"the run ended {status}"
    if run.remote_state is not None:  # None: refused before anything was started
        assert run_key_pids(run.remote_state["run_key"]) == [], "no engine process is left behind"
    return run


REFUSED = {
    ("--no-such-flag",): "vllm: error: unrecognized arguments: --no-such-flag",
    ("--dtype", "float99"): "vllm serve: error: argument --dtype: invalid choice: 'float99'",
}
ARGV_DONE = "--- argv done, exit status "
# vLLM's own CLI (what the ``vllm`` console script runs) given each argv of standard input in turn, in one
# interpreter: one import of vLLM for all of them; after each, a line with the status it exited with.
ENGINE_CLI = f"""
import json, sys
from vllm.entrypoints.cli.main import main
for argv in json.loads(sys.stdin.read()):
    sys.argv = argv
    try:
        status = main()
    except SystemExit as exit:
        status = exit.code
    print({ARGV_DONE!r} + str(status), file=sys.stderr, flush=True)
"""


@pytest.mark.parser_only  # refused before the engine starts
def test_refused_arguments(runs_db: Engine, vllm_cpu_host: HostConfig) -> None:
    """perflab's preflight refuses an unknown flag and an invalid value before the engine starts, naming
    each; vLLM's own CLI, given each, exits with the same refusal, and its log is classified as such."""
    extra_args = tuple(word for words in REFUSED for word in words)
    run = _failed_run(runs_db, vllm_cpu_host, extra_args=extra_args)
    assert run.remote_state is None, "refused before the engine was started"
    assert run.failure_class == "unknown_argument"
    assert "vLLM 0.32.0+cpu" in run.failure_message
    assert all(words[-1] in run.failure_message for words in REFUSED), run.failure_message

    adapter = get_adapter("vllm")
    argvs = [
        adapter.serve_argv(
            EngineConfig(engine="vllm", model=str(tiny_model_dir()), extra_args=words), port=free_port()
        )
        for words in REFUSED
    ]
    engine_run = subprocess.run(
        [str(vllm_python()), "-c", ENGINE_CLI],
        input=json.dumps(argvs),
        capture_output=True,
        text=True,
        env=serve_env(),
        timeout=600,
    )
    assert engine_run.returncode == 0, engine_run.stderr[-3000:]
    parts = re.split(rf"{re.escape(ARGV_DONE)}(\S+)\n", engine_run.stderr)
    assert len(parts) == 2 * len(REFUSED) + 1, engine_run.stderr[-3000:]
    for error_line, log, status in zip(REFUSED.values(), parts[0::2], parts[1::2], strict=False):
        assert status not in ("0", "None"), f"vLLM accepted it:\n{log[-3000:]}"
        failure = adapter.classify_failure(log)
        assert failure is not None and failure.failure_class == "unknown_argument", log[-3000:]
        assert error_line in failure.message


def test_missing_model_names_the_error_line(
    runs_db: Engine, vllm_cpu_host: HostConfig, tmp_path: Path
) -> None:
    missing = tmp_path / "does-not-exist-model"
    run = _failed_run(runs_db, vllm_cpu_host, model=missing)
    assert run.failure_class == "model_not_found"
    assert str(missing) in run.failure_message
    assert "HFValidationError: Repo id must be in the form" in run.failure_message
    assert "raise " not in run.failure_message, run.failure_message


def test_directory_without_config_json(runs_db: Engine, vllm_cpu_host: HostConfig, tmp_path: Path) -> None:
    empty = tmp_path / "empty-model"
    empty.mkdir()
    run = _failed_run(runs_db, vllm_cpu_host, model=empty)
    assert run.failure_class == "model_not_found"
    assert str(empty) in run.failure_message and "raise " not in run.failure_message


def test_truncated_weights(runs_db: Engine, vllm_cpu_host: HostConfig, tmp_path: Path) -> None:
    broken = tmp_path / "truncated-model"
    shutil.copytree(tiny_model_dir(), broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    run = _failed_run(runs_db, vllm_cpu_host, model=broken)
    assert run.failure_class == "weights_format"
    assert "incomplete metadata, file not fully covered" in run.failure_message
    assert "raise " not in run.failure_message


@pytest.fixture
def port_held_without_listening() -> Iterator[int]:
    """A loopback port bound (not listening): perflab's check of listening ports passes, vLLM's bind
    fails with EADDRINUSE."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        yield int(holder.getsockname()[1])


def test_port_taken_after_perflabs_check(
    runs_db: Engine, vllm_cpu_host: HostConfig, port_held_without_listening: int
) -> None:
    run = _failed_run(runs_db, vllm_cpu_host, port=port_held_without_listening)
    assert run.failure_class == "port_in_use"
    assert "Address already in use" in run.failure_message


def test_ready_timeout(runs_db: Engine, vllm_cpu_host: HostConfig) -> None:
    quick = RunnerOptions(ready_poll_s=0.5, stop_grace_s=10.0, ready_timeout_s=8.0)
    run = _failed_run(runs_db, vllm_cpu_host, options=quick)
    assert run.failure_class == "timeout"
    assert "did not become ready before the deadline (8 s)" in run.failure_message
