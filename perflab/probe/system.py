"""CPU, memory, NUMA and OS facts from a small fixed ``sh`` script (no Python needed on the host)."""

from __future__ import annotations

import re

from perflab.probe.models import NumaNode, SystemInfo

# "numa_node: 0 0-31,64-95 Node 0 MemTotal:  263856084 kB" (cpulist and meminfo line may be missing)
_NUMA_LINE = re.compile(r"^numa_node:\s*(\d+)(?:\s+([0-9][0-9,\-]*))?(?:.*MemTotal:\s*(\d+)\s*kB)?")

SCRIPT = r"""
echo "hostname: $(cat /proc/sys/kernel/hostname 2>/dev/null)"
echo "kernel: $(uname -sr 2>/dev/null)"
echo "arch: $(uname -m 2>/dev/null)"
echo "cpu_cores: $(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null)"
model=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2-)
[ -z "$model" ] && model=$(LC_ALL=C lscpu 2>/dev/null | grep -m1 '^Model name' | cut -d: -f2-)
echo "cpu_model: $model"
grep -E '^(MemTotal|MemAvailable):' /proc/meminfo 2>/dev/null
for node in /sys/devices/system/node/node[0-9]*; do
    [ -d "$node" ] || continue
    cpus=$(cat "$node/cpulist" 2>/dev/null)
    echo "numa_node: ${node##*/node} $cpus $(grep -m1 MemTotal "$node/meminfo" 2>/dev/null)"
done
if [ -r /etc/os-release ]; then . /etc/os-release; echo "os: ${PRETTY_NAME:-$NAME}"; fi
"""

ARGV = ["sh", "-c", SCRIPT, "perflab-probe-system"]


def _kib_to_mib(value: str) -> int | None:
    parts = value.split()
    return int(parts[0]) // 1024 if parts and parts[0].isdigit() else None


def _numa_node(line: str) -> NumaNode | None:
    match = _NUMA_LINE.match(line)
    if match is None:
        return None
    node_id, cpus, mem_kib = match.groups()
    return NumaNode(id=int(node_id), cpus=cpus, memory_total_mib=int(mem_kib) // 1024 if mem_kib else None)


def parse(text: str) -> SystemInfo:
    values: dict[str, str] = {}
    nodes: list[NumaNode] = []
    for line in text.splitlines():
        node = _numa_node(line)
        if node is not None:
            nodes.append(node)
            continue
        key, sep, value = line.partition(":")
        if sep:
            values[key.strip()] = value.strip()
    cores = values.get("cpu_cores", "")
    return SystemInfo(
        hostname=values.get("hostname") or None,
        os=values.get("os") or None,
        kernel=values.get("kernel") or None,
        arch=values.get("arch") or None,
        cpu_model=" ".join(values.get("cpu_model", "").split()) or None,
        cpu_cores=int(cores) if cores.isdigit() else None,
        ram_total_mib=_kib_to_mib(values.get("MemTotal", "")),
        ram_available_mib=_kib_to_mib(values.get("MemAvailable", "")),
        numa_nodes=sorted(nodes, key=lambda node: node.id),
    )
