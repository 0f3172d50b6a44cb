"""What a probe learns about a host: accelerators, CPU/RAM, Python, installed engines, and problems.

Plain pydantic models, so the Hosts page, the CLI (``--json``) and the database share one shape, and the
sentence for a tool failure no parser explains.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

MIN_BENCH_PYTHON = (3, 9)


class Accelerator(BaseModel):
    """One GPU (nvidia-smi), NPU chip (npu-smi), or, on a host with neither, one NUMA node of its CPU
    (``vendor="cpu"``, see :mod:`perflab.probe.cpu`). Unknown values (``[N/A]``) are ``None``."""

    index: int
    vendor: Literal["nvidia", "ascend", "cpu"]
    name: str
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    utilization_pct: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    driver: str | None = None
    compute_cap: str | None = None
    uuid: str | None = None
    health: str | None = None


class NumaNode(BaseModel):
    """One NUMA node: its id, its logical CPUs as the kernel lists them (``0-31,64-95``), its memory."""

    id: int
    cpus: str | None = None
    memory_total_mib: int | None = None


class SystemInfo(BaseModel):
    hostname: str | None = None
    os: str | None = None
    kernel: str | None = None
    arch: str | None = None
    cpu_model: str | None = None
    cpu_cores: int | None = None
    ram_total_mib: int | None = None
    ram_available_mib: int | None = None
    numa_nodes: list[NumaNode] = Field(default_factory=list)


class PythonInfo(BaseModel):
    """The host's configured Python (``python:`` in hosts.yaml) as found on the host."""

    command: str
    version: str | None = None
    executable: str | None = None

    @property
    def usable_for_bench(self) -> bool:
        """The shipped benchmark needs Python >= 3.9 on the host."""
        if self.version is None:
            return False
        parts = tuple(int(part) for part in self.version.split(".")[:2] if part.isdigit())
        return parts >= MIN_BENCH_PYTHON


class ProbeProblem(BaseModel):
    """Something a probe could not learn, with what to do about it (e.g. a missing tool)."""

    tool: str
    message: str


class ProbeResult(BaseModel):
    host: str
    simulated: bool
    accelerators: list[Accelerator] = Field(default_factory=list)
    system: SystemInfo = Field(default_factory=SystemInfo)
    python: PythonInfo
    engines: dict[str, str] = Field(default_factory=dict, description="engine name -> installed version")
    container_runtimes: dict[str, str] = Field(
        default_factory=dict, description="usable container runtime (podman, docker) -> version"
    )
    container_runtime_errors: dict[str, str] = Field(
        default_factory=dict, description="installed runtime that did not answer -> its last output line"
    )
    problems: list[ProbeProblem] = Field(default_factory=list)
    probed_at: datetime
    duration_s: float


def tool_failure(tool: str, exit_status: int, output: str) -> str:
    """The sentence for a tool that failed in a way its parser does not know: its exit status, or that a
    signal ended it (a negative status: SSH reports no status then), and its last line of output."""
    text = output.strip()
    last = text.splitlines()[-1] if text else "no output"
    if exit_status < 0:
        return f"{tool} was killed by a signal each time it was asked (no exit status): {last}"
    return f"{tool} failed with exit status {exit_status}: {last}"
