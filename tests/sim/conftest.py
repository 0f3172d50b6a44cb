"""Simulated hosts for the shim tests: a sim home with the real shim files, and engine processes on it."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perflab.sim.shims import shim_env, shim_files

REPO_ROOT = Path(__file__).resolve().parents[2]


class EngineProcess:
    """A shim engine started in the background, its output in a log file."""

    def __init__(self, process: subprocess.Popen, log_path: Path) -> None:
        self.process = process
        self.log_path = log_path

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float = 30.0) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(pattern, self.log)
            if match:
                return match
            if self.process.poll() is not None:
                raise AssertionError(
                    f"engine exited {self.process.returncode} before {pattern!r}:\n{self.log}"
                )
            time.sleep(0.02)
        raise AssertionError(f"no {pattern!r} within {timeout} s:\n{self.log}")

    def terminate(self, timeout: float = 15.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)


class SimHost:
    """A directory set up the way the host side sets up a simulated host."""

    def __init__(self, home: Path, spec: dict, python: str = sys.executable) -> None:
        self.home = home
        for relative, (content, mode) in shim_files(python, str(REPO_ROOT), str(home), spec).items():
            path = home / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            path.chmod(mode)
        self.env = dict(os.environ)
        for name in ("CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES", "MIES_CONFIG_JSON_PATH"):
            self.env.pop(name, None)
        self.env.update(shim_env(str(home), str(REPO_ROOT), os.environ.get("PATH", "/usr/bin:/bin")))
        self._processes: list[EngineProcess] = []

    def run(
        self,
        argv: list[str],
        env: dict[str, str] | None = None,
        timeout: float = 60.0,
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            argv,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.home,
        )

    def start(self, argv: list[str], env: dict[str, str] | None = None) -> EngineProcess:
        log_path = self.home / f"engine-{len(self._processes)}.log"
        with open(log_path, "wb") as log_file:
            process = subprocess.Popen(
                argv,
                env={**self.env, **(env or {})},
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=self.home,
            )
        engine = EngineProcess(process, log_path)
        self._processes.append(engine)
        return engine

    def stop_all(self) -> None:
        for engine in self._processes:
            if engine.process.poll() is None:
                engine.process.kill()
                engine.process.wait(timeout=10)


@pytest.fixture
def sim_host(tmp_path: Path):
    """Factory: ``sim_host(accelerator="H100", count=8, time_scale=1000.0, python=..., **spec)`` → SimHost."""
    hosts: list[SimHost] = []

    def make(
        accelerator: str = "H100",
        count: int = 8,
        time_scale: float = 1000.0,
        python: str = sys.executable,
        **spec: object,
    ) -> SimHost:
        host = SimHost(
            tmp_path / f"simhome-{len(hosts)}",
            {"accelerator": accelerator, "count": count, "time_scale": time_scale, **spec},
            python,
        )
        hosts.append(host)
        return host

    yield make
    for host in hosts:
        host.stop_all()


def free_port() -> int:
    """A port free right now (engines bind the port they are given, like the real ones)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
