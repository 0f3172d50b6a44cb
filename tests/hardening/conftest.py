"""Fixtures of the hardening tests: ``hostile(mode)`` starts ``tests.fixtures.hostile_server`` as its
own process on loopback and returns its base URL; the processes are killed after the test."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest


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
