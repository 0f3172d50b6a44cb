"""Probe a host: accelerators (nvidia-smi / npu-smi; CPU NUMA nodes without either), CPU, RAM and NUMA,
its Python, installed engines.

``probe_host(transport)`` runs the five small probes concurrently over the transport and gathers what
they learn into a :class:`ProbeResult` (``probe_accelerators`` asks nvidia-smi and npu-smi alone, for
the memory in use at the moment a run is placed); whatever one probe cannot learn (a missing tool, a
failing driver, an old Python, a tool that hangs, floods its output or prints garbage) becomes a
:class:`ProbeProblem` with a sentence a user can act on, while the other probes still report. A
command whose connection dropped while it ran is run again on a new connection (the probes only read);
a host that cannot be reached propagates as a transport error.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

from perflab.engines.registry import ADAPTERS
from perflab.probe import ascend, containers, cpu, engines, nvidia, system
from perflab.probe.models import Accelerator, ProbeProblem, ProbeResult, PythonInfo, SystemInfo
from perflab.transport.base import EXIT_NOT_FOUND, CommandResult, Transport
from perflab.transport.errors import CommandTimeout, ConnectionLost, OutputTooLarge
from perflab.transport.retry import retrying

__all__ = [
    "Accelerator",
    "ProbeProblem",
    "ProbeResult",
    "PythonInfo",
    "SystemInfo",
    "probe_accelerators",
    "probe_host",
]

DEFAULT_TIMEOUT_S = 30.0

_Found = tuple[list[Accelerator], ProbeProblem | None, bool]


class _Signalled(Exception):
    """A probe's command ended by a signal instead of exiting (on a host that others share, someone
    else's kill, the OOM killer)."""

    def __init__(self, result: CommandResult) -> None:
        super().__init__(f"killed by a signal ({result.exit_status})")
        self.result = result


def _read(transport: Transport, argv: list[str], timeout: float) -> CommandResult:
    result = transport.run(argv, timeout=timeout)
    if result.exit_status < 0:
        raise _Signalled(result)
    return result


def _run(transport: Transport, argv: list[str], timeout: float, tool: str) -> CommandResult | ProbeProblem:
    """The command's result, or the problem of a command that hung past ``timeout`` or printed more
    than the transport keeps (it is stopped either way). Every probe only reads, so a command whose
    connection dropped is run again on a new one, and so is one that a signal ended (the last such
    result is returned when every try was killed); a hung tool is not (its timeout is its answer), nor
    is a host that cannot be reached (the connection pool has tried it again already)."""
    try:
        return retrying(lambda: _read(transport, argv, timeout), transient=(ConnectionLost, _Signalled))
    except _Signalled as killed:
        return killed.result
    except CommandTimeout:
        message = f"{tool} did not answer within {timeout:g} s (a hung driver?)."
        return ProbeProblem(tool=tool, message=message)
    except OutputTooLarge as exc:
        last = exc.kept.strip().splitlines()[-1][:120] if exc.kept.strip() else ""
        message = f"{tool} printed more than {exc.limit // (1024 * 1024)} MiB and was stopped"
        return ProbeProblem(tool=tool, message=f"{message} (it ended: {last!r})." if last else f"{message}.")


def _probe_nvidia(transport: Transport, timeout: float) -> _Found:
    result = _run(transport, nvidia.query_argv(), timeout, "nvidia-smi")
    if (
        isinstance(result, CommandResult)
        and not result.ok
        and nvidia.rejects_field(result.stdout + result.stderr, "compute_cap")
    ):
        fields = tuple(field for field in nvidia.QUERY_FIELDS if field != "compute_cap")
        result = _run(transport, nvidia.query_argv(fields), timeout, "nvidia-smi")
    if isinstance(result, ProbeProblem):
        return [], result, True
    if result.exit_status == EXIT_NOT_FOUND:
        return [], None, False
    if not result.ok:
        message = nvidia.explain_failure(result.exit_status, result.stdout + result.stderr)
        return [], ProbeProblem(tool="nvidia-smi", message=message), True
    try:
        return nvidia.parse_query_csv(result.stdout), None, True
    except ValueError as exc:
        return [], ProbeProblem(tool="nvidia-smi", message=f"Unexpected nvidia-smi output: {exc}"), True


def _probe_ascend(transport: Transport, timeout: float) -> _Found:
    result = _run(transport, ascend.INFO_ARGV, timeout, "npu-smi")
    if isinstance(result, ProbeProblem):
        return [], result, True
    if result.exit_status == EXIT_NOT_FOUND:
        return [], None, False
    output = result.stdout + result.stderr
    if not result.ok or "dcmi module initialize failed" in output:
        return (
            [],
            ProbeProblem(tool="npu-smi", message=ascend.explain_failure(result.exit_status, output)),
            True,
        )
    found = ascend.parse_info(result.stdout)
    if not found:
        return [], ProbeProblem(tool="npu-smi", message="npu-smi info listed no NPU."), True
    return found, None, True


def _probe_system(transport: Transport, timeout: float) -> tuple[SystemInfo, ProbeProblem | None]:
    result = _run(transport, system.ARGV, timeout, "system")
    if isinstance(result, ProbeProblem):
        return SystemInfo(), result
    return system.parse(result.stdout), None


def _probe_python(
    transport: Transport, timeout: float
) -> tuple[PythonInfo, dict[str, str], list[ProbeProblem]]:
    python = transport.host.python
    result = _run(transport, engines.argv(python), timeout, python)
    fallback = (
        "engine versions are unknown and benchmarks will run from the app machine through a port forward."
    )
    if isinstance(result, ProbeProblem):
        return PythonInfo(command=python), {}, [result]
    if result.exit_status == EXIT_NOT_FOUND:
        message = f"'{python}' was not found on host '{transport.host.name}': {fallback}"
        return PythonInfo(command=python), {}, [ProbeProblem(tool="python", message=message)]
    try:
        info, found = engines.parse(python, result.stdout)
    except ValueError:
        detail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        message = f"'{python}' failed on host '{transport.host.name}' ({detail}): {fallback}"
        return PythonInfo(command=python), {}, [ProbeProblem(tool="python", message=message)]
    for engine in engines.CLI_VERSIONS.keys() - found.keys():
        answered = _run(transport, engines.cli_version_argv(engine), timeout, engine)
        ok = isinstance(answered, CommandResult) and answered.ok
        version = engines.parse_cli_version(answered.stdout) if ok else None
        if version is not None:
            found[engine] = version
    problems = []
    if not info.usable_for_bench:
        problems.append(
            ProbeProblem(
                tool="python",
                message=f"Python {info.version} on host '{transport.host.name}' is older than 3.9: "
                "benchmarks will run from the app machine through a port forward.",
            )
        )
    if not found:
        names = ", ".join(adapter.display_name for adapter in ADAPTERS.values())
        problems.append(
            ProbeProblem(tool="engines", message=f"No inference engine found for {python} ({names}).")
        )
    return info, found, problems


def _probe_containers(transport: Transport, timeout: float) -> containers.RuntimeScan:
    result = _run(transport, containers.ARGV, timeout, "containers")
    return containers.parse(result.stdout) if isinstance(result, CommandResult) else containers.RuntimeScan()


def probe_host(transport: Transport, *, timeout: float = DEFAULT_TIMEOUT_S) -> ProbeResult:
    """Everything perflab wants to know about the host behind ``transport``."""
    started = time.monotonic()
    probed_at = datetime.now(timezone.utc)
    with ThreadPoolExecutor(max_workers=5, thread_name_prefix="probe") as pool:
        nvidia_future = pool.submit(_probe_nvidia, transport, timeout)
        ascend_future = pool.submit(_probe_ascend, transport, timeout)
        system_future = pool.submit(_probe_system, transport, timeout)
        python_future = pool.submit(_probe_python, transport, timeout)
        runtimes_future = pool.submit(_probe_containers, transport, timeout)
        gpus, gpu_problem, has_nvidia = nvidia_future.result()
        npus, npu_problem, has_ascend = ascend_future.result()
        system_info, system_problem = system_future.result()
        python_info, installed, python_problems = python_future.result()
        runtimes = runtimes_future.result()
    problems = [problem for problem in (gpu_problem, npu_problem, system_problem) if problem is not None]
    accelerators = gpus + npus
    if not has_nvidia and not has_ascend:
        # Neither tool is installed: a CPU host, whose NUMA nodes are the devices (engines with a CPU
        # backend run there; placement refuses the others).
        accelerators = cpu.cpu_devices(system_info)
    problems.extend(python_problems)
    return ProbeResult(
        host=transport.host.name,
        simulated=transport.host.simulated,
        accelerators=accelerators,
        system=system_info,
        python=python_info,
        engines=installed,
        container_runtimes=runtimes.usable,
        container_runtime_errors=runtimes.broken,
        problems=problems,
        probed_at=probed_at,
        duration_s=round(time.monotonic() - started, 3),
    )


def probe_accelerators(transport: Transport, *, timeout: float = DEFAULT_TIMEOUT_S) -> list[Accelerator]:
    """The host's GPUs and NPUs as nvidia-smi and npu-smi list them now (memory in use included);
    empty when neither tool lists one."""
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="probe") as pool:
        nvidia_future = pool.submit(_probe_nvidia, transport, timeout)
        ascend_future = pool.submit(_probe_ascend, transport, timeout)
        return nvidia_future.result()[0] + ascend_future.result()[0]
