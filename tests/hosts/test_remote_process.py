"""Detached processes on both transports: start, state, logs, stop, failed starts, leftovers, pid reuse."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TypeVar

import pytest

from perflab.remote import process as rp
from perflab.transport import Transport, open_transport
from tests.fixtures.polling import wait_until
from tests.hosts.conftest import HostFactory, local_host
from tests.hosts.test_transport_contract import pid_alive

PY = sys.executable
T = TypeVar("T")

# A small "engine": prints a ready line, spawns a child that also lives on, handles TERM by exiting.
ENGINE = """
import os, signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
print("ready", os.getpid(), child.pid, os.environ.get("CUDA_VISIBLE_DEVICES"), flush=True)
print("args", sys.argv[1:], flush=True)
signal.signal(signal.SIGTERM, lambda *a: (child.terminate(), sys.exit(0)))
time.sleep(120)
"""

# Ignores TERM, so only the KILL after the grace period ends it.
STUBBORN = (
    "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('up', flush=True)\ntime.sleep(120)"
)


def log_line(transport: Transport, process: rp.RemoteProcess, prefix: str) -> str:
    def find() -> str:
        return next(
            (line for line in rp.tail_log(transport, process).splitlines() if line.startswith(prefix)), ""
        )

    return wait_until(find)


def test_start_state_log_and_stop(transport: Transport) -> None:
    weird = ["--model", "org/m; rm -rf / $(id) `x` | & > ' \"\nnext"]
    process = rp.start_detached(
        transport, [PY, "-c", ENGINE, *weird], run_key="run-1", name="engine", gpu_ids=[2, 3]
    )
    ready = log_line(transport, process, "ready").split()
    assert ready[3] == "2,3"
    engine_pid, child_pid = int(ready[1]), int(ready[2])
    assert log_line(transport, process, "args") == f"args {weird!r}".split("\n")[0]

    state = rp.process_state(transport, process)
    assert state.running and {process.pid, engine_pid, child_pid} <= set(state.pids)
    assert state.exit_status is None

    recorded = json.loads(transport.read_text(f"{process.run_dir}/cmd.json"))
    assert recorded["argv"][3:] == weird
    assert recorded["env"]["CUDA_VISIBLE_DEVICES"] == "2,3" and recorded["env"]["PERFLAB_RUN_KEY"] == "run-1"
    assert transport.read_text(process.pid_path).split()[0] == str(process.pid)

    outcome = rp.stop(transport, process, grace_s=5)
    assert outcome.outcome == "term" and outcome.clean
    assert not any(pid_alive(pid) for pid in (process.pid, engine_pid, child_pid))
    assert not rp.is_running(transport, process)
    assert rp.stop(transport, process).outcome == "none"


def test_stubborn_process_is_killed_after_the_grace(transport: Transport) -> None:
    process = rp.start_detached(transport, [PY, "-c", STUBBORN], run_key="run-2", name="stubborn")
    log_line(transport, process, "up")
    outcome = rp.stop(transport, process, grace_s=0.5)
    assert outcome.outcome == "kill" and outcome.clean
    assert not pid_alive(process.pid)


def test_failed_start_leaves_nothing_behind(transport: Transport) -> None:
    crash = (
        "import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
        "print('error: unrecognized arguments: --bogus', flush=True); sys.exit(2)"
    )
    process = rp.start_detached(transport, [PY, "-c", crash, "--bogus"], run_key="run-3", name="engine")
    state = wait_until(lambda: (s := rp.process_state(transport, process)).exit_status is not None and s)
    assert state.exit_status == 2
    assert state.running, "the orphaned child still belongs to the run"
    assert "unrecognized arguments" in rp.tail_log(transport, process)
    assert rp.stop(transport, process, grace_s=2).clean
    assert not rp.is_running(transport, process)


def test_missing_program_is_reported_through_the_exit_file(transport: Transport) -> None:
    process = rp.start_detached(transport, ["perflab-no-such-engine"], run_key="run-4", name="engine")
    state = wait_until(lambda: (s := rp.process_state(transport, process)).exit_status is not None and s)
    assert state.exit_status == 127 and not state.running


def test_a_process_is_recognised_the_moment_its_start_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a busy host the launched command may not have become itself yet when its start returns (an
    ``env`` slow to run stands in for a scheduler that has not run it yet): it is running all the same,
    not a process that ended without an exit status."""
    slow_bin = tmp_path / "slow-bin"
    slow_bin.mkdir()
    (slow_bin / "env").write_text(f'#!/bin/sh\nsleep 1\nexec {shutil.which("env")} "$@"\n')
    (slow_bin / "env").chmod(0o755)
    monkeypatch.setenv("PATH", f"{slow_bin}{os.pathsep}{os.environ['PATH']}")
    with open_transport(local_host(tmp_path)) as transport:
        process = rp.start_detached(transport, ["sleep", "30"], run_key="slow-start", name="engine")
        state = rp.process_state(transport, process)
        assert state.running and state.exit_status is None
        assert rp.stop(transport, process, grace_s=2).clean


def test_read_log_follows_complete_lines(transport: Transport) -> None:
    script = (
        "import time\nfor i in range(3):\n    print('line', i, 'é', flush=True); time.sleep(0.2)\n"
        "print('partial', end='', flush=True)\ntime.sleep(60)"
    )
    process = rp.start_detached(transport, [PY, "-c", script], run_key="run-5", name="engine")
    text, offset = "", 0
    deadline = time.monotonic() + 15
    while text.count("\n") < 3 and time.monotonic() < deadline:
        chunk = rp.read_log(transport, process, offset)
        text, offset = text + chunk.text, chunk.next_offset
    assert text == "line 0 é\nline 1 é\nline 2 é\n"
    assert rp.read_log(transport, process, offset).text == ""
    rp.stop(transport, process, grace_s=1)


def test_files_are_written_into_the_run_dir(transport: Transport) -> None:
    process = rp.start_detached(
        transport,
        ["sh", "-c", 'cat "$1"', "sh", "config.json"],
        run_key="run-6",
        name="mindie",
        files={"config.json": '{"port": 1025}'},
        cwd=f"{transport.workdir}/runs/run-6",
    )
    assert wait_until(lambda: rp.tail_log(transport, process)) == '{"port": 1025}'
    with pytest.raises(ValueError):
        rp.start_detached(transport, ["true"], run_key="run-6", name="x", files={"../escape": ""})
    with pytest.raises(ValueError):
        rp.start_detached(transport, ["true"], run_key="../up", name="x")


def test_leftovers_are_found_and_cleaned(transport: Transport) -> None:
    old = rp.start_detached(transport, [PY, "-c", ENGINE], run_key="old-run", name="engine")
    current = rp.start_detached(transport, [PY, "-c", ENGINE], run_key="current-run", name="engine")
    finished = rp.start_detached(transport, ["true"], run_key="done-run", name="engine")
    log_line(transport, old, "ready")
    log_line(transport, current, "ready")
    wait_until(lambda: not rp.is_running(transport, finished))

    leftovers = rp.find_leftovers(transport, exclude_run_keys=["current-run"])
    assert [(left.process.run_key, left.process.pid) for left in leftovers] == [("old-run", old.pid)]
    assert len(leftovers[0].pids) == 3  # wrapper, engine, its child
    assert rp.load_process(transport, "old-run", "engine") == leftovers[0].process

    results = rp.cleanup_leftovers(transport, leftovers, grace_s=5)
    assert results["old-run/engine"].clean
    assert rp.find_leftovers(transport, exclude_run_keys=["current-run"]) == []
    assert rp.is_running(transport, current)
    rp.stop(transport, current, grace_s=5)


def test_a_reused_pid_is_not_mistaken_for_the_run(transport: Transport) -> None:
    """A pid file pointing at an unrelated live process (as after pid reuse) finds nothing to stop."""
    stranger = open_stranger()
    try:
        fake = rp.RemoteProcess(transport.host.name, "ghost", "engine", rp.run_dir(transport, "ghost"),
                                stranger.pid, "1")  # fmt: skip
        transport.write_text(fake.pid_path, f"{stranger.pid}\n1\n")
        assert not rp.is_running(transport, fake)
        assert rp.find_leftovers(transport) == []
        assert rp.stop(transport, fake, grace_s=0.5).outcome == "none"
        assert stranger.poll() is None, "an unrelated process was signalled"
    finally:
        stranger.kill()
        stranger.wait()


def open_stranger() -> subprocess.Popen[bytes]:
    """An unrelated process in its own session, like one that got a reused pid."""
    return subprocess.Popen(["sleep", "60"], start_new_session=True)


def test_detached_process_survives_the_connection(make_host: HostFactory, tmp_path: Path) -> None:
    host = make_host()
    transport = open_transport(host)
    process = rp.start_detached(transport, [PY, "-c", ENGINE], run_key="run-7", name="engine")
    log_line(transport, process, "ready")
    from perflab.transport import close_all

    close_all()
    again = open_transport(host)
    assert rp.is_running(again, process)
    assert rp.stop(again, process, grace_s=5).clean
    assert os.path.exists(process.log_path)


# What a finished run leaves in its run dir: the pid file of a process long gone, its exit status, its log.
FINISHED_RUNS = r"""
runs=$1; count=$2; i=0
while [ "$i" -lt "$count" ]; do
  mkdir -p "$runs/old-$i" && printf '999999%s\n1\n' "$i" > "$runs/old-$i/engine-0.pid"
  echo 0 > "$runs/old-$i/engine-0.exit" && : > "$runs/old-$i/engine-0.log"
  i=$((i + 1))
done
"""


def _write_finished_runs(transport: Transport, count: int) -> None:
    runs = f"{transport.workdir}/{rp.RUNS_DIR}"
    transport.run(["sh", "-c", FINISHED_RUNS, "finished-runs", runs, str(count)], timeout=60, check=True)


def test_a_scan_for_leftovers_looks_only_at_processes_that_may_still_run(transport: Transport) -> None:
    """300 finished runs' pid files left by an earlier perflab are looked at once, by the first scan
    (which drops them from the index); runs that ended as runs end (their processes stopped) are never
    looked at; one whose process ended without a stop is looked at once. Later scans look only at the
    processes still running."""
    _write_finished_runs(transport, 300)
    first = rp.scan_leftovers(transport)
    assert (first.leftovers, first.examined) == ((), 300)
    assert rp.scan_leftovers(transport).examined == 0

    stopped = [
        rp.start_detached(transport, [PY, "-c", ENGINE], run_key=f"ended-{index}", name="engine-0")
        for index in range(3)
    ]
    for process in stopped:
        log_line(transport, process, "ready")
        assert rp.stop(transport, process, grace_s=5).clean
    unstopped = rp.start_detached(transport, ["true"], run_key="died", name="engine-0")
    wait_until(lambda: not rp.is_running(transport, unstopped))
    live = rp.start_detached(transport, [PY, "-c", ENGINE], run_key="current", name="engine-0")
    log_line(transport, live, "ready")
    _write_finished_runs(transport, 300)  # written after the index began: never indexed

    scan = rp.scan_leftovers(transport)
    assert scan.examined == 2  # the live engine and the process that ended unstopped
    assert [(left.process.run_key, left.process.pid) for left in scan.leftovers] == [("current", live.pid)]
    again = rp.scan_leftovers(transport)
    assert again.examined == 1 and [left.process.run_key for left in again.leftovers] == ["current"]
    rp.stop(transport, live, grace_s=5)
    assert rp.scan_leftovers(transport).examined == 0


def test_an_engine_left_before_the_index_began_is_found_and_indexed(transport: Transport) -> None:
    """A workdir from before the index: the first scan looks at every pid file, finds the engine still
    running, and indexes it; later scans look at it alone."""
    old = rp.start_detached(transport, [PY, "-c", ENGINE], run_key="before-index", name="engine-0")
    log_line(transport, old, "ready")
    _write_finished_runs(transport, 30)
    runs = f"{transport.workdir}/{rp.RUNS_DIR}"
    transport.run(
        ["rm", "-rf", f"{runs}/.active", f"{runs}/.index-since", f"{runs}/.indexed"], timeout=30, check=True
    )

    first = rp.scan_leftovers(transport)
    assert first.examined == 31 and [left.process.pid for left in first.leftovers] == [old.pid]
    again = rp.scan_leftovers(transport)
    assert again.examined == 1 and [left.process.pid for left in again.leftovers] == [old.pid]
    assert rp.stop(transport, old, grace_s=5).clean
    assert rp.scan_leftovers(transport).examined == 0


def test_the_leftover_scan_benchmarks_small_mode_counts_what_each_scan_examines() -> None:
    """``--smoke`` (20 finished runs, 1 live engine): the first scan examines every pid file, the later
    ones the live engine alone."""
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "leftover_scan.py"
    done = subprocess.run(
        [PY, str(script), "--smoke"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.splitlines()[-1])
    assert figures["first scan"]["examined"] == 21
    assert figures["later scan"]["examined"] == figures["after 20 more runs"]["examined"] == 1
