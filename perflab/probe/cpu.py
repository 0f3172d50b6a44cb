"""A host without GPUs or NPUs as devices for engines with a CPU backend (vLLM's CPU build).

Each NUMA node is one device, numbered by its node id: that is how vLLM's CPU backend divides a host
(``CPU_VISIBLE_MEMORY_NODES`` selects nodes, and with ``VLLM_CPU_OMP_THREADS_BIND=auto`` rank *i* binds
its threads to the *i*-th visible node; vllm 0.32.0 ``vllm/utils/cpu_resource_utils.py`` and
``vllm/utils/ompmultiprocessing.py``). A run locks the nodes it uses like GPUs, so a second run on the
same node waits; a host whose kernel shows no NUMA nodes is one device. A CPU device's memory is the
node's RAM, which other processes share, so it is never taken for "in use by someone else".
"""

from __future__ import annotations

from perflab.probe.models import Accelerator, SystemInfo

VENDOR = "cpu"


def device_name(system: SystemInfo) -> str:
    """``CPU (AMD EPYC 9654)``, or ``CPU`` when the model is unknown."""
    return f"CPU ({system.cpu_model})" if system.cpu_model else "CPU"


def cpu_devices(system: SystemInfo) -> list[Accelerator]:
    """One device per NUMA node of the host (one for the whole host without NUMA information)."""
    name = device_name(system)
    if not system.numa_nodes:
        return [Accelerator(index=0, vendor=VENDOR, name=name, memory_total_mib=system.ram_total_mib)]
    return [
        Accelerator(index=node.id, vendor=VENDOR, name=name, memory_total_mib=node.memory_total_mib)
        for node in system.numa_nodes
    ]


def is_cpu_host(accelerators: list[Accelerator]) -> bool:
    return bool(accelerators) and all(acc.vendor == VENDOR for acc in accelerators)


def summary(system: SystemInfo, devices: list[Accelerator]) -> str:
    """E.g. ``CPU (AMD EPYC): 64 cores, 2 NUMA nodes`` for a CPU host's devices."""
    nodes = len(devices)
    cores = f"{system.cpu_cores} cores, " if system.cpu_cores else ""
    return f"{device_name(system)}: {cores}{nodes} NUMA node{'s' if nodes != 1 else ''}"
