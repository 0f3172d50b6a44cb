"""The suite's own guards against processes outliving the tests: the ``/proc`` scan that finds what
points into a directory (and stops it), and the real vLLM server dying with the process that
started it even when that process is killed before its teardown."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.fixtures.leftovers import processes_under, stop_processes
from tests.fixtures.polling import wait_until

STARTER = """
import subprocess, sys
from tests.fixtures.real_vllm import _terminate_with_parent
child = subprocess.Popen(["sleep", "600"], start_new_session=True, preexec_fn=_terminate_with_parent)
print(child.pid, flush=True)
sys.stdin.read()
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state != b"Z"


def _wait_for_arguments(pid: int) -> None:
    """Until the kernel shows the process's arguments: Popen returns once exec closed its pipe, which is
    before the new program's arguments are placed (``/proc/PID/cmdline`` reads empty meanwhile)."""
    wait_until(
        lambda: Path(f"/proc/{pid}/cmdline").read_bytes(), 10, interval_s=0.01, failure="no arguments shown"
    )


def test_a_process_pointing_into_a_directory_is_found_with_its_origin_and_stopped(tmp_path: Path) -> None:
    (tmp_path / "test_one0").mkdir()
    log = tmp_path / "test_one0" / "engine.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(["sleep", "600"], stdout=out, start_new_session=True)
    try:
        _wait_for_arguments(process.pid)
        (found,) = processes_under(tmp_path)
        assert (found.pid, found.origin, found.command) == (process.pid, "test_one0", "sleep 600")
        assert processes_under(tmp_path / "elsewhere") == []
        stop_processes([found.pid])
        process.wait(timeout=10)
        assert processes_under(tmp_path) == []
    finally:
        process.kill()
        process.wait()


def test_the_real_vllm_server_is_terminated_when_its_starter_is_killed() -> None:
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=Path(__file__).parent.parent,
    )
    assert starter.stdout is not None
    child = int(starter.stdout.readline())
    assert _alive(child)
    starter.kill()  # no teardown runs
    starter.wait()
    deadline = time.monotonic() + 30
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _alive(child)
    if alive:
        stop_processes([child])
    assert not alive
