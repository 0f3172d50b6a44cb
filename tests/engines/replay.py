"""A real local host whose ``vllm`` answers perflab's check with an answer recorded from vLLM's own parser.

Its ``vllm`` is a Python program by its ``#!`` line (so perflab's wrapper pipes the check program to that
"interpreter"), and the interpreter prints a file of tests/data/engine_check instead of importing the
multi-GB GPU build.
"""

from __future__ import annotations

import os
from pathlib import Path

from perflab.inventory import HostConfig
from perflab.transport.local import LocalTransport

RECORDED = Path(__file__).resolve().parents[1] / "data" / "engine_check"


def recorded_argv(answer: str) -> str:
    """The words after ``vllm serve`` the recorded answer was asked for (its header's ``run as:`` line)."""
    for line in (RECORDED / answer).read_text(encoding="utf-8").splitlines():
        if line.startswith("# run as: python - "):
            return line.removeprefix("# run as: python - ").rpartition(" < ")[0]
    raise AssertionError(f"{answer} names no argv")


def replaying_host(directory: Path, answer: str, name: str = "gpu-033") -> LocalTransport:
    """A local host called ``name`` whose ``vllm`` replays ``answer`` (a file of tests/data/engine_check)."""
    bin_dir = directory / "bin"
    bin_dir.mkdir()
    interpreter = bin_dir / "replay-python"
    interpreter.write_text(f"#!/bin/sh\ncat >/dev/null\ncat '{RECORDED / answer}'\n")
    program = bin_dir / "vllm"
    program.write_text(f"#!{interpreter}\n")
    for path in (interpreter, program):
        path.chmod(0o755)
    transport = LocalTransport(HostConfig(name=name, transport="local", workdir=str(directory / "w")))
    transport.extra_env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    return transport
