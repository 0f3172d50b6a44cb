"""Run the benchmark for an engine on a host: on the host itself, or from the app through a forward.

On-host (preferred: no network between load generator and engine): ship the agent zipapp, run
``<python> agent.pyz bench <args> --base-url http://127.0.0.1:<port> --progress-json --save-result
<run dir>/<name>.json`` with the host's Python, stream its output, call ``on_progress`` for every
``PERFLAB_PROGRESS {json}`` line, and fetch the JSON result.

Forwarded (fallback when the host has no python3 >= 3.9): forward each engine port to the app machine
over SSH and run ``python -m perflab bench`` there with the same arguments, its run directory under
the app's own workdir (:func:`perflab.settings.app_workdir`). The returned :class:`BenchRun` records
which way was used and why.

Either way the bench is process ``name`` of the run where it runs (its pid file in that run dir, the
run's marker env), so :func:`find_bench` finds it again — stop, crash recovery and its partial result
— after its caller died; a forwarded one by a process on the same app machine.
"""

from __future__ import annotations

import json
import os
import posixpath
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from perflab import settings
from perflab.inventory import HostConfig
from perflab.probe.models import PythonInfo
from perflab.remote.agent import checkout_dir, ensure_agent, file_sha256, upload_once
from perflab.remote.process import RemoteProcess, load_process, run_dir, tracked_command
from perflab.transport.base import CommandStream, Transport
from perflab.transport.local import LocalTransport
from perflab.transport.retry import retrying

BenchMode = Literal["on-host", "forwarded"]
PROGRESS_PREFIX = "PERFLAB_PROGRESS "
DATASETS_DIR = "datasets"
_VERSION_SNIPPET = "import sys; print('%d.%d.%d' % sys.version_info[:3])"
_CHECK_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class BenchRun:
    """A finished benchmark: its JSON result and text block, where it ran (and why), its last lines."""

    mode: BenchMode
    result: dict[str, Any]
    text_block: str
    output_tail: list[str] = field(default_factory=list)
    fallback_reason: str | None = None


@dataclass(frozen=True)
class BenchProcess:
    """A benchmark found by its pid file: how it ran and the machine it runs on (the host on-host, the
    app's machine forwarded)."""

    mode: BenchMode
    transport: Transport
    process: RemoteProcess


class RemoteBenchFailed(RuntimeError):
    """The benchmark exited with an error (its last output lines say why)."""

    def __init__(self, host_name: str, mode: BenchMode, exit_status: int, output_tail: Sequence[str]) -> None:
        self.host_name = host_name
        self.mode = mode
        self.exit_status = exit_status
        self.output_tail = list(output_tail)
        last = next((line for line in reversed(self.output_tail) if line.strip()), "no output")
        super().__init__(
            f"The benchmark ({mode}) for host '{host_name}' failed with exit status {exit_status}: {last}"
        )


def choose_mode(transport: Transport, python: PythonInfo | None = None) -> tuple[BenchMode, str | None]:
    """``on-host`` if the host's Python can run the agent, else ``forwarded`` and the reason."""
    command = transport.host.python
    if python is None:
        result = transport.run([command, "-c", _VERSION_SNIPPET], timeout=_CHECK_TIMEOUT_S)
        version = result.stdout.strip() if result.ok else None
        python = PythonInfo(command=command, version=version or None)
    if python.usable_for_bench:
        return "on-host", None
    if python.version is None:
        return "forwarded", f"'{command}' is not available on host '{transport.host.name}'"
    return "forwarded", f"Python {python.version} on host '{transport.host.name}' is older than 3.9"


def app_machine(secret_env: Mapping[str, str] | None = None) -> LocalTransport:
    """The app's own machine, where forwarded benchmarks run (its workdir: ``settings.app_workdir()``);
    ``secret_env``: a host's secrets, for a bench that talks to that host's engines."""
    machine = LocalTransport(HostConfig(name="app", transport="local", workdir=settings.app_workdir()))
    machine.secret_env = dict(secret_env or {})
    return machine


def find_bench(transport: Transport, run_key: str, name: str) -> BenchProcess | None:
    """Bench ``name`` of run ``run_key`` as its pid file records it: on the host of ``transport``, else
    (forwarded) on this machine; None when it never started."""
    places: tuple[tuple[BenchMode, Transport], ...] = (("on-host", transport), ("forwarded", app_machine()))
    for mode, machine in places:
        try:
            return BenchProcess(mode, machine, load_process(machine, run_key, name))
        except FileNotFoundError:
            continue
    return None


def _target_args(ports: Sequence[int]) -> list[str]:
    args: list[str] = []
    for port in ports:
        args += ["--base-url", f"http://127.0.0.1:{port}"]
    return args


def _upload_files(transport: Transport, files: Mapping[str, Path]) -> list[str]:
    """Upload each file once per content to ``<workdir>/datasets``; return ``[flag, remote path, ...]``."""
    args: list[str] = []
    for flag, local in files.items():
        remote = posixpath.join(
            transport.workdir, DATASETS_DIR, f"{file_sha256(local)[:16]}-{Path(local).name}"
        )
        upload_once(transport, local, remote)
        args += [flag, remote]
    return args


def _app_command() -> tuple[list[str], dict[str, str]]:
    """``python -m perflab`` of this app (argv prefix and env), for benches on the app's machine."""
    python_path = os.pathsep.join(filter(None, [checkout_dir(), os.environ.get("PYTHONPATH")]))
    return [sys.executable, "-m", "perflab"], {"PYTHONPATH": python_path}


def _follow(
    stream: CommandStream,
    on_progress: Callable[[dict[str, Any]], None] | None,
    on_line: Callable[[str], None] | None,
) -> int:
    with stream:
        for line in stream:
            if line.startswith(PROGRESS_PREFIX):
                try:
                    progress = json.loads(line[len(PROGRESS_PREFIX) :])
                except ValueError:
                    progress = None
                if isinstance(progress, dict):
                    if on_progress is not None:
                        on_progress(progress)
                    continue
            if on_line is not None:
                on_line(line)
    assert stream.exit_status is not None
    return stream.exit_status


def run_remote_bench(
    transport: Transport,
    bench_args: Sequence[str],
    *,
    ports: Sequence[int],
    run_key: str,
    name: str = "bench",
    timeout: float,
    files: Mapping[str, Path] | None = None,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    on_line: Callable[[str], None] | None = None,
    mode: BenchMode | None = None,
    python: PythonInfo | None = None,
) -> BenchRun:
    """Benchmark the engine listening on ``ports`` of the host.

    ``bench_args`` are ``perflab bench`` arguments without ``--base-url``, ``--save-result``,
    ``--result-text`` and ``--progress-json`` (added here). ``files`` maps a bench flag to a local
    file (``{"--dataset-path": Path("sharegpt.json"), "--tokenizer": Path("tokenizer.json")}``), uploaded
    for an on-host run. ``mode`` forces a way; by default it follows the host's Python (pass ``python``
    from a probe to save a round trip). On the app's own machine (local transport) the bench runs with
    the app's interpreter. The result and text block are kept in ``<run dir>/<name>.json|.txt`` of the
    machine the bench runs on. There the bench is process ``name`` of the run (its pid file in the run
    dir, the run's marker env), so :func:`find_bench`, :func:`perflab.remote.process.stop` and
    :func:`~perflab.remote.process.find_leftovers` find it even after this caller died; stopped early,
    it leaves a result marked ``partial``.
    """
    reason: str | None = None
    if mode is None:
        mode, reason = ("on-host", None) if transport.kind == "local" else choose_mode(transport, python)
    with ExitStack() as stack:
        runner: Transport
        if mode == "forwarded":
            runner = app_machine(transport.secret_env)
            prefix, env = _app_command()
            targets = [stack.enter_context(transport.forward(port)) for port in ports]
            file_args = [part for flag, local in (files or {}).items() for part in (flag, str(local))]
        else:
            runner = transport
            prefix, env = (
                _app_command()
                if transport.kind == "local"
                else ([transport.host.python, ensure_agent(transport)], {})
            )
            targets = list(ports)
            file_args = _upload_files(transport, files or {})
        out_dir = run_dir(runner, run_key)
        runner.run(["mkdir", "-p", out_dir], timeout=_CHECK_TIMEOUT_S, check=True)
        result_path = posixpath.join(out_dir, f"{name}.json")
        text_path = posixpath.join(out_dir, f"{name}.txt")
        bench_argv = [
            *prefix, "bench", *bench_args, *file_args, *_target_args(targets),
            "--progress-json", "--save-result", result_path, "--result-text", text_path,
        ]  # fmt: skip
        argv, marker = tracked_command(runner, bench_argv, run_key=run_key, name=name)
        stream = runner.stream(argv, timeout=timeout, env={**env, **marker})
        status = _follow(stream, on_progress, on_line)
        tail = stream.tail
        if status != 0:
            raise RemoteBenchFailed(transport.host.name, mode, status, tail)
        result = json.loads(retrying(lambda: runner.read_text(result_path)))
        text = retrying(lambda: runner.read_text(text_path))
    return BenchRun(mode=mode, result=result, text_block=text, output_tail=tail, fallback_reason=reason)
