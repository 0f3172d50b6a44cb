"""Detached processes on a host: start, watch, read logs, stop, and clean up leftovers of old runs.

Each process lives in a per-run directory ``<workdir>/runs/<run-key>/`` holding ``cmd.json`` (argv,
env, cwd), ``<name>.log`` (stdout and stderr), ``<name>.pid`` (pid = process group id, then its start
time) and, once it ended, ``<name>.exit``. The process runs in its own session with stdin from
/dev/null, so it outlives the SSH connection and the app. Stopping sends TERM to every process of the
run, then KILL after a grace period, and checks that none is left; see :mod:`perflab.remote.scripts`
for how a run's processes are recognised even when pids are reused. Reading a process's state, log or
pid file is retried when the connection blips (:mod:`perflab.transport.retry`).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from perflab.remote import scripts
from perflab.transport.base import Transport
from perflab.transport.retry import retrying

RUNS_DIR = "runs"
RUN_KEY_ENV = "PERFLAB_RUN_KEY"
PROCESS_ENV = "PERFLAB_PROCESS"
VISIBLE_DEVICES_ENVS = ("CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES")

_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_COMMAND_TIMEOUT_S = 30.0
# The most of a log's end a tail keeps: an engine printing one endless line cannot flood the runner.
MAX_TAIL_BYTES = 256 * 1024


def _check_key(kind: str, value: str) -> str:
    if not _KEY.match(value):
        raise ValueError(
            f"{kind} {value!r} must be 1-128 letters, digits, '.', '_' or '-' (starting alphanumeric)"
        )
    return value


@dataclass(frozen=True)
class RemoteProcess:
    """A process started by :func:`start_detached` (or found again by :func:`load_process`)."""

    host_name: str
    run_key: str
    name: str
    run_dir: str
    pid: int
    start_time: str

    @property
    def log_path(self) -> str:
        return posixpath.join(self.run_dir, f"{self.name}.log")

    @property
    def pid_path(self) -> str:
        return posixpath.join(self.run_dir, f"{self.name}.pid")

    @property
    def exit_path(self) -> str:
        return posixpath.join(self.run_dir, f"{self.name}.exit")

    @property
    def marker(self) -> str:
        """The environment entry every process of this one carries (unique per workdir, run and name)."""
        return f"{PROCESS_ENV}={self.run_dir}/{self.name}"

    def _identity_args(self) -> list[str]:
        return [str(self.pid), self.start_time, self.marker]


@dataclass(frozen=True)
class ProcessState:
    """Whether any process of the run is alive (its pids), and the exit status once the command ended."""

    pids: tuple[int, ...]
    exit_status: int | None

    @property
    def running(self) -> bool:
        return bool(self.pids)


@dataclass(frozen=True)
class StopResult:
    """How a stop went: ``none`` (nothing ran), ``term`` (ended on TERM) or ``kill``; ``left``: survivors."""

    outcome: str
    left: tuple[int, ...] = ()

    @property
    def clean(self) -> bool:
        return not self.left


@dataclass(frozen=True)
class LogChunk:
    """Complete log lines from a byte offset, and the offset to continue from."""

    text: str
    next_offset: int


@dataclass(frozen=True)
class Leftover:
    """A process of an earlier run that is still alive on the host."""

    process: RemoteProcess
    pids: tuple[int, ...]


def _pid_tuple(text: str) -> tuple[int, ...]:
    return tuple(sorted(int(pid) for pid in text.split()))


def run_dir(transport: Transport, run_key: str) -> str:
    return posixpath.join(transport.workdir, RUNS_DIR, _check_key("run key", run_key))


def _pid_file(directory: str, name: str) -> str:
    return posixpath.join(directory, f"{_check_key('process name', name)}.pid")


def visible_devices_env(gpu_ids: Sequence[int] | None, variable: str) -> dict[str, str]:
    """``{CUDA_VISIBLE_DEVICES: "0,1"}`` (or the Ascend variable) for the given accelerator ids."""
    if gpu_ids is None:
        return {}
    if variable not in VISIBLE_DEVICES_ENVS:
        raise ValueError(f"{variable} is not one of {', '.join(VISIBLE_DEVICES_ENVS)}")
    if any(not isinstance(gpu, int) or gpu < 0 for gpu in gpu_ids):
        raise ValueError(f"accelerator ids must be non-negative integers, got {list(gpu_ids)}")
    return {variable: ",".join(str(gpu) for gpu in gpu_ids)}


def marker_env(directory: str, run_key: str, name: str) -> dict[str, str]:
    """The variables that mark every process of process ``name`` of a run (see the module doc)."""
    return {RUN_KEY_ENV: run_key, PROCESS_ENV: f"{directory}/{name}"}


def tracked_command(
    transport: Transport, argv: Sequence[str], *, run_key: str, name: str
) -> tuple[list[str], dict[str, str]]:
    """``argv`` wrapped to write ``<run dir>/<name>.pid`` before it starts, and the marker env it must
    carry: for a command run attached (its output streamed back) that :func:`stop`,
    :func:`find_leftovers` and crash recovery must still find. The run dir must exist."""
    directory = run_dir(transport, run_key)
    wrapped = ["sh", "-c", scripts.RECORD, "perflab-record", _pid_file(directory, name), *argv]
    return wrapped, marker_env(directory, run_key, name)


def start_detached(
    transport: Transport,
    argv: Sequence[str],
    *,
    run_key: str,
    name: str,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    gpu_ids: Sequence[int] | None = None,
    visible_devices: str = "CUDA_VISIBLE_DEVICES",
    files: Mapping[str, str] | None = None,
) -> RemoteProcess:
    """Start ``argv`` detached on the host; ``files`` (name -> text) are written into the run dir first."""
    _check_key("process name", name)
    directory = run_dir(transport, run_key)
    for file_name, text in (files or {}).items():
        if posixpath.basename(file_name) != file_name or file_name.startswith("."):
            raise ValueError(f"run file name {file_name!r} must be a plain file name")
        transport.write_text(posixpath.join(directory, file_name), text)
    marker = marker_env(directory, run_key, name)
    process_env = {**dict(env or {}), **visible_devices_env(gpu_ids, visible_devices), **marker}
    cmd_json = json.dumps({"argv": list(argv), "env": process_env, "cwd": cwd}, ensure_ascii=False)
    exit_file = posixpath.join(directory, f"{name}.exit")
    launch_argv = [
        "sh", "-c", scripts.LAUNCH, "perflab-launch", directory, name, cmd_json,
        "--", *(f"{key}={value}" for key, value in process_env.items()),
        "setsid", "sh", "-c", scripts.WRAPPER, "perflab-run", exit_file, *argv,
    ]  # fmt: skip
    # The launcher itself carries the marker, so the child it forks does from the fork on, before that
    # child has become the command: the process is found from the moment this function returns.
    launcher_env = {PROCESS_ENV: marker[PROCESS_ENV]}
    result = transport.run(launch_argv, timeout=_COMMAND_TIMEOUT_S, env=launcher_env, cwd=cwd, check=True)
    fields = result.stdout.split()
    pid = int(fields[0])
    start_time = fields[1] if len(fields) > 1 else "-"
    return RemoteProcess(transport.host.name, run_key, name, directory, pid, start_time)


def load_process(transport: Transport, run_key: str, name: str) -> RemoteProcess:
    """The process recorded in ``<run dir>/<name>.pid`` (e.g. after the app restarted)."""
    directory = run_dir(transport, run_key)
    pid_file = _pid_file(directory, name)
    lines = retrying(lambda: transport.read_text(pid_file)).splitlines()
    return RemoteProcess(
        transport.host.name, run_key, name, directory, int(lines[0]), (lines[1:] or ["-"])[0]
    )


def process_state(transport: Transport, process: RemoteProcess) -> ProcessState:
    argv = ["sh", "-c", scripts.STATE, "perflab-state", *process._identity_args(), process.exit_path]
    result = retrying(lambda: transport.run(argv, timeout=_COMMAND_TIMEOUT_S, check=True))
    values = dict(line.split(":", 1) for line in result.stdout.splitlines() if ":" in line)
    pids = _pid_tuple(values.get("pids", ""))
    code = values.get("exit", "").strip()
    return ProcessState(pids, int(code) if code.lstrip("-").isdigit() else None)


def serves_port(transport: Transport, process: RemoteProcess, port: int) -> bool:
    """Whether one of ``process``'s processes is the one listening on TCP ``port`` (not another program
    that took the port)."""
    argv = ["sh", "-c", scripts.SERVES, "perflab-serves", str(port), *process._identity_args()]
    return retrying(lambda: transport.run(argv, timeout=_COMMAND_TIMEOUT_S)).ok


def is_running(transport: Transport, process: RemoteProcess) -> bool:
    return process_state(transport, process).running


def stop(transport: Transport, process: RemoteProcess, grace_s: float = 10.0) -> StopResult:
    """TERM every process of ``process``, KILL what is left after ``grace_s``; report what happened."""
    ticks = max(int(round(grace_s * 10)), 0)
    result = transport.run(
        ["sh", "-c", scripts.STOP, "perflab-stop", *process._identity_args(), str(ticks)],
        timeout=grace_s + _COMMAND_TIMEOUT_S,
        check=True,
    )
    kind, _, rest = result.stdout.strip().partition(":")
    if kind == "left":
        return StopResult("kill", _pid_tuple(rest))
    return StopResult(rest.strip())


def tail_log(transport: Transport, process: RemoteProcess, lines: int = 200) -> str:
    """The last ``lines`` lines of the process's log, at most its last ``MAX_TAIL_BYTES`` ("" if
    there is no log yet)."""
    argv = ["sh", "-c", 'tail -n "$1" -- "$3" 2>/dev/null | tail -c "$2"', "perflab-tail",
            str(int(lines)), str(MAX_TAIL_BYTES), process.log_path]  # fmt: skip
    result = retrying(lambda: transport.run(argv, timeout=_COMMAND_TIMEOUT_S))
    return result.stdout if result.ok else ""


def read_log(
    transport: Transport, process: RemoteProcess, offset: int = 0, max_bytes: int = 1 << 20
) -> LogChunk:
    """Complete lines of the log from byte ``offset`` (at most ``max_bytes``), to follow a log; a
    line longer than ``max_bytes`` comes in pieces of that size, so following never stalls on it."""
    argv = ["sh", "-c", 'tail -c +"$1" -- "$3" 2>/dev/null | head -c "$2"', "perflab-log",
            str(int(offset) + 1), str(int(max_bytes)), process.log_path]  # fmt: skip
    result = retrying(lambda: transport.run(argv, timeout=_COMMAND_TIMEOUT_S))
    text = result.stdout
    endless_line = "\n" not in text and len(text.encode("utf-8")) >= max_bytes
    complete = text if endless_line else text[: text.rfind("\n") + 1]
    return LogChunk(complete, offset + len(complete.encode("utf-8")))


@dataclass(frozen=True)
class LeftoverScan:
    """What one scan for leftovers found, and how many processes it looked at: those the host's index
    still lists as possibly alive (:mod:`perflab.remote.scripts`), not every pid file of its history."""

    leftovers: tuple[Leftover, ...]
    examined: int


def scan_leftovers(transport: Transport) -> LeftoverScan:
    """Processes of runs (any indexed pid file under ``<workdir>/runs``) that are still alive."""
    runs = posixpath.join(transport.workdir, RUNS_DIR)
    result = transport.run(
        ["sh", "-c", scripts.LEFTOVERS, "perflab-leftovers", runs], timeout=_COMMAND_TIMEOUT_S, check=True
    )
    found, examined = [], 0
    for line in result.stdout.splitlines():
        kind, _, rest = line.partition(": ")
        if kind == "examined":
            examined = int(rest)
        elif kind == "leftover":
            run_key, name, pid, start_time, *pids = rest.split()
            process = RemoteProcess(
                transport.host.name, run_key, name, posixpath.join(runs, run_key), int(pid), start_time
            )
            found.append(Leftover(process, _pid_tuple(" ".join(pids))))
    return LeftoverScan(tuple(found), examined)


def find_leftovers(transport: Transport, *, exclude_run_keys: Iterable[str] = ()) -> list[Leftover]:
    """Processes of earlier runs that are still alive (:func:`scan_leftovers`), but those of
    ``exclude_run_keys``."""
    excluded = set(exclude_run_keys)
    return [left for left in scan_leftovers(transport).leftovers if left.process.run_key not in excluded]


def cleanup_leftovers(
    transport: Transport, leftovers: Iterable[Leftover], grace_s: float = 10.0
) -> dict[str, StopResult]:
    """Stop each leftover; returns ``{"<run-key>/<name>": StopResult}``."""
    return {
        f"{left.process.run_key}/{left.process.name}": stop(transport, left.process, grace_s)
        for left in leftovers
    }
