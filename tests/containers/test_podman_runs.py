"""Engines run from images with real Podman, over the real sshd to a simulated host: started, ready,
benchmarked and stopped with no container left; secrets reach the container through a 0600 file only;
pulls from a real registry (progress, not found, unauthorized); a worker killed with ``kill -9``
leaves no container once recovered."""

from __future__ import annotations

import os
import shlex
import signal
import stat
import subprocess
import sys
from pathlib import Path

from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.containers.runtime import LABEL_RUN
from perflab.engines import EngineConfig
from perflab.inventory import HostConfig
from perflab.profiles import PRESETS, scaled
from perflab.runner import RunnerOptions, execute_run, submit_run
from perflab.runner.profile_spec import parse_profile
from perflab.worker import RESTART_MESSAGE, Worker
from tests.fixtures.podman import Registry, launch_containers, podman
from tests.fixtures.runs import (
    BackgroundRun,
    SimHostFactory,
    benchmarking_with_progress,
    cancel,
    free_port_block,
    inventory_of,
    perflab_env,
    stored_run,
    wait_for_run,
    write_hosts_file,
)
from tests.fixtures.sshd import SshServer

WORKER = "container-test-worker"
FAST = RunnerOptions(ready_poll_s=0.2, sample_interval_s=1.0, stop_grace_s=5.0, ready_timeout_s=120.0)
REPO_ROOT = Path(__file__).resolve().parents[2]
SECRET = "hf_containerSecretValue123"
RECORDED_H100 = Path(__file__).resolve().parents[1] / "data" / "probe" / "nvidia-smi" / "h100x1.csv"


def _config(image: str, **knobs: object) -> EngineConfig:
    fields: dict[str, object] = {"tp": 2, **knobs}
    return EngineConfig(engine="vllm", model="Qwen/Qwen3-8B", port=free_port_block(1), image=image, **fields)


def _execute(engine: Engine, host, config: EngineConfig, profiles) -> object:  # type: ignore[no-untyped-def]
    stored = submit_run(engine, host_name=host.name, config=config, profiles=profiles, worker_id=WORKER)
    execute_run(stored.id, engine=engine, inventory=inventory_of(host), worker_id=WORKER, options=FAST)
    return stored_run(engine, stored.id)


def test_a_containerised_engine_is_started_benchmarked_and_removed(
    runs_db: Engine, sim_host: SimHostFactory, podman_env: dict[str, str], python_image: str
) -> None:
    host = sim_host("podman-node", env=podman_env)
    run = _execute(runs_db, host, _config(python_image), [scaled(PRESETS["short"], 0.03)])

    assert run.status == "done" and run.failure_class is None, run.failure_message
    assert run.knobs_summary == f"image {python_image} · tp=2"
    (command,) = run.serve_commands
    key = run.remote_state["run_key"]
    assert command.startswith(f"podman run --detach --name perflab-{key}-0 --pull never")
    assert f"--label {LABEL_RUN}={run.id}" in command and "--ipc host" in command
    assert f"--entrypoint vllm {python_image} serve Qwen/Qwen3-8B" in command
    container = run.environment["container"]
    assert container["runtime"] == "podman" and container["runtime_version"]
    assert container["image"] == python_image and container["image_id"] and container["pulled"] is False
    # The version the engine reports inside the container (the simulated one, as the host's probe saw it).
    assert (
        container["engine_version"] == run.environment["engines"]["vllm"] == run.environment["engine_version"]
    )
    assert run.remote_state["stopped"] == {"engine-0": "term"}
    assert "Application startup complete" in (run.log_tail or "")
    assert launch_containers(run.remote_state["run_key"]) == []
    with new_session(runs_db) as session:
        (result,) = crud.list_profile_results(session, run_id=run.id)
        sources = {sample.source for sample in crud.list_samples(session, run_id=run.id)}
    assert result.completed > 0 and result.failed == 0
    assert sources == {"engine", "accelerator"}


def test_secrets_reach_the_container_through_a_private_file_only(
    runs_db: Engine, sim_host: SimHostFactory, podman_env: dict[str, str], python_image: str, tmp_path: Path
) -> None:
    secret_file = tmp_path / "hf-token"
    secret_file.write_text(SECRET + "\n")
    host = sim_host("podman-secrets", env=podman_env, secrets={"HF_TOKEN": {"file": str(secret_file)}})
    config = _config(python_image)
    stored = submit_run(
        runs_db,
        host_name=host.name,
        config=config,
        profiles=[parse_profile("random:in=64,out=8,n=300,rate=5")],
        worker_id=WORKER,
    )
    background = BackgroundRun(runs_db, stored.id, host, WORKER, FAST)
    try:
        run = wait_for_run(runs_db, stored.id, benchmarking_with_progress, timeout_s=120)
        name = f"perflab-{run.remote_state['run_key']}-0"
        env_file = Path(run.remote_state["run_dir"]) / f"{name}.env"
        assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
        assert env_file.read_text() == f"HF_TOKEN={SECRET}\n"
        inside = podman("container", "inspect", "--format", "{{json .Config.Env}}", name).stdout
        assert f"HF_TOKEN={SECRET}" in inside
        assert (
            SECRET not in " ".join(run.serve_commands) and f"--env-file {env_file}" in run.serve_commands[0]
        )
        assert all(SECRET not in _command_line(pid) for pid in _pids())
    finally:
        cancel(runs_db, stored.id)
        assert background.join(120) == "cancelled"
    assert not env_file.exists()
    assert launch_containers(run.remote_state["run_key"]) == []


def test_an_image_pulled_from_a_registry_shows_progress_and_its_digest(
    runs_db: Engine,
    sim_host: SimHostFactory,
    python_image: str,
    registry: Registry,
    podman_env: dict[str, str],
) -> None:
    remote = registry.reference("perflab/python3:pulled")
    podman("push", "--quiet", python_image, remote)
    podman("rmi", "--force", remote, check=False)
    host = sim_host("podman-pull", env=podman_env)
    events: list[str] = []
    stored = submit_run(
        runs_db,
        host_name=host.name,
        config=_config(remote),
        profiles=[scaled(PRESETS["short"], 0.02)],
        worker_id=WORKER,
    )
    try:
        status = execute_run(
            stored.id,
            engine=runs_db,
            inventory=inventory_of(host),
            worker_id=WORKER,
            options=FAST,
            on_event=lambda event: events.append(str(event.data.get("log_line", ""))),
        )
        run = stored_run(runs_db, stored.id)
        assert status == "done", run.failure_message
        assert any(line.startswith("Copying blob") for line in events), events[:20]
        container = run.environment["container"]
        assert container["pulled"] is True
        assert any(
            digest.startswith(f"{remote.rsplit(':', 1)[0]}@sha256:") for digest in container["digests"]
        )
    finally:
        podman("rmi", "--force", remote, check=False)  # the pulled tag; its layers are the local image's


def test_pull_failures_are_classified(
    runs_db: Engine, sim_host: SimHostFactory, registry: Registry, podman_env: dict[str, str]
) -> None:
    host = sim_host("podman-missing", env=podman_env)
    profiles = [scaled(PRESETS["short"], 0.02)]
    missing = _execute(runs_db, host, _config(registry.reference("perflab/does-not-exist:1")), profiles)
    assert missing.status == "failed" and missing.failure_class == "image_not_found"
    assert "manifest unknown" in missing.failure_message
    assert missing.serve_commands == [] and missing.remote_state is None

    locked = _execute(runs_db, host, _config(registry.reference("perflab/private:1", auth=True)), profiles)
    assert locked.failure_class == "image_unauthorized"
    assert "authentication required" in locked.failure_message


def _h100_host(sshd: SshServer, tmp_path: Path, podman_env: dict[str, str], *mounts: str) -> HostConfig:
    """A host whose nvidia-smi reports one idle H100 (a recorded output) but that has no CDI spec for it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncat {shlex.quote(str(RECORDED_H100))}\n")
    smi.chmod(0o755)
    env = {**podman_env, "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin"}
    return sshd.host_config(
        "h100-box", workdir=str(tmp_path / "work"), env=env, container_mounts=list(mounts)
    )


def test_a_gpu_the_runtime_cannot_pass_through_is_classified(
    runs_db: Engine, sshd: SshServer, podman_env: dict[str, str], python_image: str, tmp_path: Path
) -> None:
    # Podman itself refuses `--device nvidia.com/gpu=0`. The image's `vllm` is a shell (mounted through
    # container_mounts), so the preflight in the image finds the program but no help to check.
    host = _h100_host(sshd, tmp_path, podman_env, "/usr/bin/dash:/usr/local/bin/vllm")
    run = _execute(runs_db, host, _config(python_image, tp=1), [scaled(PRESETS["short"], 0.02)])

    assert run.failure_class == "container_gpu_unavailable", run.failure_message
    assert "unresolvable CDI devices nvidia.com/gpu=0" in run.failure_message
    assert "--device nvidia.com/gpu=0" in run.serve_commands[0]
    assert run.environment["container"]["engine_version"] is None  # the image has no vLLM package
    assert launch_containers(run.remote_state["run_key"]) == []


def test_an_image_without_the_engine_is_refused_before_the_start(
    runs_db: Engine, sshd: SshServer, podman_env: dict[str, str], python_image: str, tmp_path: Path
) -> None:
    run = _execute(
        runs_db,
        _h100_host(sshd, tmp_path, podman_env),
        _config(python_image, tp=1),
        [scaled(PRESETS["short"], 0.02)],
    )

    assert run.failure_class == "launch_failed"
    assert "vLLM is not installed" in run.failure_message
    assert 'exec: "vllm": executable file not found' in run.failure_message
    assert run.serve_commands == [] and run.remote_state is None


def test_a_worker_killed_mid_run_leaves_no_container_after_recovery(
    runs_db: Engine, sim_host: SimHostFactory, podman_env: dict[str, str], python_image: str, tmp_path: Path
) -> None:
    host = sim_host("podman-crash", env=podman_env)
    hosts_file = write_hosts_file(tmp_path / "hosts.yaml", [host])
    queued = submit_run(
        runs_db,
        host_name=host.name,
        config=_config(python_image),
        profiles=[parse_profile("random:in=64,out=8,n=300,rate=5")],
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "perflab", "worker", "--worker-id", "container-crash", "--poll", "0.2"],
        cwd=REPO_ROOT,
        env={**os.environ, **perflab_env(runs_db, hosts_file)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_run(runs_db, queued.id, benchmarking_with_progress, timeout_s=120)
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
    key = stored_run(runs_db, queued.id).remote_state["run_key"]
    assert launch_containers(key) == [f"perflab-{key}-0"]

    restarted = Worker(runs_db, inventory_path=hosts_file, worker_id="container-crash", runner_options=FAST)
    try:
        assert restarted.run_once() == {}
    finally:
        restarted.stop()
    run = stored_run(runs_db, queued.id)
    assert run.failure_class == "worker_restarted" and run.failure_message == RESTART_MESSAGE
    assert run.remote_state["stopped"]["engine-0"] == "term"
    assert launch_containers(key) == []


def _pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def _command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_another_perflabs_container_of_the_same_run_id_is_no_obstacle_and_is_left_alone(
    runs_db: Engine, sim_host: SimHostFactory, podman_env: dict[str, str], python_image: str
) -> None:
    """Two perflabs on one host count their runs from 1 alike: containers are named after the launch's
    random run key, so another's container of the same run id and replica neither blocks the run nor
    is touched by it."""
    host = sim_host("podman-shared", env=podman_env)
    stored = submit_run(
        runs_db,
        host_name=host.name,
        config=_config(python_image),
        profiles=[scaled(PRESETS["short"], 0.02)],
        worker_id=WORKER,
    )
    foreign = f"perflab-run-{stored.id}-a1b2c3-0"  # the other perflab's run of the same id
    podman("create", "--name", foreign, python_image, "true")
    try:
        execute_run(stored.id, engine=runs_db, inventory=inventory_of(host), worker_id=WORKER, options=FAST)
        run = stored_run(runs_db, stored.id)
        assert run.status == "done", run.failure_message
        assert run.remote_state["run_key"] != f"run-{stored.id}-a1b2c3"
        assert podman("container", "exists", foreign, check=False).returncode == 0
    finally:
        podman("rm", "--force", foreign, check=False)
