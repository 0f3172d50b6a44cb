"""Fixtures of the hardening tests: ``hostile(mode)`` starts ``tests.fixtures.hostile_server`` as its
own process on loopback and returns its base URL (the processes are killed after the test);
``unreadable_inputs``: a device and a FIFO in the place of data files; ``worker_process(...)`` and
``perflab_run_process(...)``: a worker, a ``perflab run`` in its own process; ``FAST``: runner options
for simulated hosts."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO

import pytest
from sqlalchemy.engine import Engine

from perflab.runner import RunnerOptions
from tests.fixtures.runs import perflab_env

REPO_ROOT = Path(__file__).resolve().parents[2]
FAST = RunnerOptions(ready_poll_s=0.2, sample_interval_s=0.5, stop_grace_s=5.0, ready_timeout_s=60.0)


@pytest.fixture
def hostile() -> Iterator[Callable[[str], str]]:
    started: list[subprocess.Popen[str]] = []

    def start(mode: str) -> str:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fixtures.hostile_server", mode], stdout=subprocess.PIPE, text=True
        )
        started.append(proc)
        line = proc.stdout.readline() if proc.stdout is not None else ""
        assert line.startswith("PORT "), line
        return f"http://127.0.0.1:{int(line.split()[1])}"

    yield start
    for proc in started:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture
def unreadable_inputs(tmp_path: Path) -> list[tuple[Path, str]]:
    """Inputs no reader may wait on or read without end, named like data files, with what each is:
    ``/dev/zero`` behind a symbolic link, and a FIFO no one writes to."""
    zero = tmp_path / "zero.jsonl"
    zero.symlink_to("/dev/zero")
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    return [(zero, "a character device"), (fifo, "a FIFO")]


def worker_process(
    engine: Engine, hosts_file: Path, worker_id: str, output: int | IO[bytes] = subprocess.DEVNULL
) -> subprocess.Popen[bytes]:
    """``python -m perflab worker`` in its own process (to be frozen, killed or resumed), its stdout and
    stderr to ``output``."""
    return subprocess.Popen(
        [sys.executable, "-m", "perflab", "worker", "--worker-id", worker_id, "--poll", "0.2"],
        cwd=REPO_ROOT,
        env={**os.environ, **perflab_env(engine, hosts_file)},
        stdout=output,
        stderr=subprocess.STDOUT,
    )


def perflab_run_process(env: Mapping[str, str], host_name: str, profile: str) -> subprocess.Popen[bytes]:
    """``python -m perflab run`` of vLLM's Qwen3-8B on ``host_name`` with ``profile``, in its own
    process with ``env`` (its stdout and stderr piped)."""
    command = [sys.executable, "-m", "perflab", "run", "--host", host_name, "--engine", "vllm"]
    command += ["--model", "Qwen/Qwen3-8B", "--profile", profile]
    return subprocess.Popen(
        command, cwd=REPO_ROOT, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
