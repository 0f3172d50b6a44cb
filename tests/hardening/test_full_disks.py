"""Full disks are classified failures with one line, never a traceback or a run that goes on without
its log: a host workdir full before the first run, a workdir that fills while the run benchmarks,
and the database with its spool on one disk that fills mid-run (``perflab run``). Each disk is a
real tmpfs (root only)."""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db import session as db_session
from db.session import new_session
from perflab.engines import EngineConfig
from perflab.inventory import HostConfig, SimulateSpec
from perflab.runner import submit_run
from perflab.runner.disks import MIN_FREE_BYTES
from perflab.runner.profile_spec import parse_profile
from tests.fixtures.runs import (
    DEFAULT_TIME_SCALE,
    BackgroundRun,
    benchmarking_with_progress,
    run_key_pids,
    stored_run,
    wait_for_run,
    write_hosts_file,
)
from tests.hardening.conftest import FAST, perflab_run_process


def fill(directory: Path) -> None:
    """Write into ``directory`` until its disk takes no more."""
    subprocess.run(["dd", "if=/dev/zero", f"of={directory / 'filler'}", "bs=64k"], capture_output=True)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """``tmpfs("4m")``: a directory on a fresh tmpfs of that size, unmounted after the test."""
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        directory = tmp_path / f"disk{len(mounted)}"
        directory.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)]).returncode:
            pytest.skip("mounting a tmpfs needs root")
        mounted.append(directory)
        return directory

    yield mount
    for directory in mounted:
        subprocess.run(["umount", "-l", str(directory)], check=True)


def _host(name: str, workdir: Path) -> HostConfig:
    simulate = SimulateSpec(accelerator="H100", count=8, time_scale=DEFAULT_TIME_SCALE)
    return HostConfig(name=name, transport="local", workdir=str(workdir), simulate=simulate)


def _queue(engine: Engine, host: HostConfig, profile: str) -> int:
    config = EngineConfig(engine="vllm", model="Qwen/Qwen3-8B")
    run = submit_run(
        engine, host_name=host.name, config=config, profiles=[parse_profile(profile)], worker_id="w"
    )
    return int(run.id)


def test_a_workdir_full_before_the_first_run_fails_it_in_one_line(
    runs_db: Engine, tmpfs: Callable[[str], Path], caplog: pytest.LogCaptureFixture
) -> None:
    disk = tmpfs("1m")
    fill(disk)
    host = _host("full-node", disk / "perflab")
    run_id = _queue(runs_db, host, "random:in=64,out=8,n=20")

    with caplog.at_level(logging.WARNING):
        assert BackgroundRun(runs_db, run_id, host, "w", FAST).join(120) == "failed"

    run = stored_run(runs_db, run_id)
    assert run.failure_class == "disk_full"
    assert run.failure_message == (
        f"host 'full-node': the disk holding its workdir {disk / 'perflab'} is full (No space left on "
        "device); free space there and run again"
    )
    assert not [record for record in caplog.records if record.exc_info], caplog.text


def test_a_workdir_that_fills_mid_run_ends_it_disk_full(
    runs_db: Engine, tmpfs: Callable[[str], Path]
) -> None:
    disk = tmpfs("16m")
    host = _host("filling-node", disk / "perflab")
    # 20 requests/s for 3000 requests: minutes of benchmark, the engine logging every request
    run_id = _queue(runs_db, host, "random:in=64,out=8,n=3000,rate=20")
    background = BackgroundRun(runs_db, run_id, host, "w", FAST)
    run = wait_for_run(runs_db, run_id, benchmarking_with_progress, timeout_s=120)
    fill(disk)

    assert background.join(180) == "failed"

    ended = stored_run(runs_db, run_id)
    assert ended.failure_class == "disk_full"
    assert ended.failure_message.startswith(
        f"host 'filling-node': the disk holding its workdir {disk / 'perflab'}"
    )
    assert "KiB free); free space there and run again" in ended.failure_message
    assert run_key_pids(run.remote_state["run_key"]) == []
    assert MIN_FREE_BYTES == 1024 * 1024


def test_database_and_spool_on_one_full_disk_wind_down_without_a_traceback(
    tmpfs: Callable[[str], Path], tmp_path: Path
) -> None:
    disk = tmpfs("16m")
    url = f"sqlite:///{disk / 'perflab.db'}"
    db_session.upgrade(url)
    engine = db_session.get_engine(url)
    host = _host("spooling-node", tmp_path / "work")
    env = {
        **os.environ,
        "PERFLAB_DATABASE_URL": url,
        "PERFLAB_SPOOL_DIR": str(disk / "spool"),
        "PERFLAB_HOSTS": str(write_hosts_file(tmp_path / "hosts.yaml", [host])),
    }
    process = perflab_run_process(env, host.name, "random:in=64,out=8,n=600,rate=20")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with new_session(engine) as session:
                runs = crud.list_runs(session).rows
            if runs and runs[0].status == "benchmarking":
                break
            time.sleep(0.2)
        fill(disk)
        out, err = process.communicate(timeout=180)
    finally:
        process.kill()
        engine.dispose()

    text = err.decode()
    assert process.returncode == 1, text
    assert "Traceback" not in text, text
    assert "the run's writes since are lost" in text
    assert text.splitlines()[-1].startswith("error: run 1 ended failed, but ")
