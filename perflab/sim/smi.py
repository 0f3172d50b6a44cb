"""``nvidia-smi`` and ``npu-smi`` of a simulated host, in the real tools' output formats.

Devices come from ``host.json``; memory in use and utilisation from the GPU state files of running
simulated engines (:mod:`perflab.sim.gpustate`); power draw, SM clock and temperature follow that
utilisation (:mod:`perflab.sim.power`). ``nvidia-smi`` answers the plain table, ``-L``,
``--query-gpu=FIELDS --format=csv[,noheader][,nounits]`` (any subset and order of the supported
fields, with ``-i``/``--id`` to select devices), ``--query-compute-apps`` and ``--version``.
``npu-smi info`` prints the Ascend table (910B layout with HBM usage and the process table).
"""

from __future__ import annotations

import hashlib
import sys
import time
from typing import Callable, Dict, List, Optional, Tuple

from perflab.sim import power
from perflab.sim.gpustate import DeviceUse, read_usage
from perflab.sim.hostspec import CUDA_VERSION, NPU_SMI_VERSION, NVIDIA_DRIVER, HostSpec, load_host

NPU_IDLE_HBM_MB = 3337
_BUS_IDS = ["04", "05", "17", "18", "41", "42", "81", "82", "B9", "BA", "C1", "C2", "D1", "D2", "E1", "E2"]


class Device:
    """One accelerator as the tools report it."""

    def __init__(self, host: HostSpec, index: int, uses: List[DeviceUse]) -> None:
        accel = host.accelerator
        self.index = index
        self.accel = accel
        self.uses = uses
        self.used_mib = sum(use.memory_mib for use in uses)
        self.utilization = max((use.utilization for use in uses), default=0.0)
        digest = hashlib.md5(f"{host.home}:{index}".encode()).hexdigest()
        self.uuid = f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
        self.bus = _BUS_IDS[index % len(_BUS_IDS)]
        self.limit_w = power.profile(accel.key).limit_w
        self.max_sm_mhz = power.profile(accel.key).max_sm_mhz
        self.power, self.sm_clock, self.temperature = power.reading(accel.key, self.utilization)


def devices(host: HostSpec) -> List[Device]:
    usage = read_usage(host.state_dir)
    return [Device(host, index, usage.get(index, [])) for index in range(host.count)]


# Query fields: name → (unit or "", value function). Units follow nvidia-smi's CSV headers; HEADER_NAMES
# holds the headers nvidia-smi spells otherwise (driver 580.159.04: tests/data/nvidia-h200/).
QueryField = Tuple[str, Callable[[Device, int], str]]
QUERY_FIELDS: Dict[str, QueryField] = {
    "index": ("", lambda d, n: str(d.index)),
    "count": ("", lambda d, n: str(n)),
    "name": ("", lambda d, n: d.accel.name),
    "uuid": ("", lambda d, n: d.uuid),
    "pci.bus_id": ("", lambda d, n: f"00000000:{d.bus}:00.0"),
    "driver_version": ("", lambda d, n: NVIDIA_DRIVER),
    "compute_cap": ("", lambda d, n: d.accel.compute_cap),
    "pstate": ("", lambda d, n: "P0"),
    "memory.total": ("MiB", lambda d, n: str(d.accel.memory_mib)),
    "memory.used": ("MiB", lambda d, n: str(d.used_mib)),
    "memory.free": ("MiB", lambda d, n: str(max(0, d.accel.memory_mib - d.used_mib))),
    "utilization.gpu": ("%", lambda d, n: str(int(round(d.utilization * 100)))),
    "utilization.memory": ("%", lambda d, n: str(int(round(d.utilization * 60)))),
    "temperature.gpu": ("", lambda d, n: str(d.temperature)),
    "power.draw": ("W", lambda d, n: f"{d.power:.2f}"),
    "power.draw.average": ("W", lambda d, n: f"{d.power:.2f}"),
    "power.draw.instant": ("W", lambda d, n: f"{d.power:.2f}"),
    "power.limit": ("W", lambda d, n: f"{d.limit_w:.2f}"),
    "enforced.power.limit": ("W", lambda d, n: f"{d.limit_w:.2f}"),
    "clocks.sm": ("MHz", lambda d, n: str(d.sm_clock)),
    "clocks.max.sm": ("MHz", lambda d, n: str(d.max_sm_mhz)),
}
HEADER_NAMES = {"clocks.sm": "clocks.current.sm"}
FIELD_ALIASES = {
    "gpu_name": "name",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci.bus_id",
    "memory.used_mib": "memory.used",
    "clocks.current.sm": "clocks.sm",
}


class UsageError(Exception):
    """Arguments nvidia-smi would refuse (message and exit status)."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


def _option_values(argv: List[str]) -> Dict[str, str]:
    """``--opt=value`` / ``--opt value`` / ``-L`` / ``-i 0`` into a dict of long names."""
    short = {"-L": "--list-gpus", "-i": "--id", "-q": "--query", "-h": "--help"}
    takes_value = {"--query-gpu", "--query-compute-apps", "--format", "--id"}
    options: Dict[str, str] = {}
    index = 0
    while index < len(argv):
        name, sep, value = argv[index].partition("=")
        name = short.get(name, name)
        index += 1
        if name in takes_value and not sep:
            if index >= len(argv):
                raise UsageError(f"Option {name} requires a value.")
            value = argv[index]
            index += 1
        if name not in takes_value | {"--list-gpus", "--version", "--help"}:
            raise UsageError("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.")
        options[name] = value
    return options


def _selected(all_devices: List[Device], ids: Optional[str]) -> List[Device]:
    if ids is None:
        return all_devices
    chosen = []
    for part in ids.split(","):
        if not part.strip().isdigit() or int(part) >= len(all_devices):
            raise UsageError(f"No devices were found (invalid id '{part.strip()}')", 6)
        chosen.append(all_devices[int(part)])
    return chosen


def query_gpu(host: HostSpec, fields_text: str, fmt: str, ids: Optional[str] = None) -> str:
    """``--query-gpu=FIELDS --format=FMT`` output."""
    modifiers = [part.strip() for part in fmt.split(",")]
    if not modifiers or modifiers[0] != "csv" or not set(modifiers[1:]) <= {"noheader", "nounits"}:
        raise UsageError(
            f"\"{fmt}\" is not a valid format. Please run 'nvidia-smi --help-query-gpu' for help."
        )
    fields = []
    for raw in fields_text.split(","):
        name = FIELD_ALIASES.get(raw.strip(), raw.strip())
        if name not in QUERY_FIELDS:
            raise UsageError(f'Field "{raw.strip()}" is not a valid field to query.')
        fields.append(name)
    all_devices = devices(host)
    lines = []
    if "noheader" not in modifiers:
        headers = [HEADER_NAMES.get(name, name) for name in fields]
        lines.append(
            ", ".join(
                f"{header} [{QUERY_FIELDS[name][0]}]" if QUERY_FIELDS[name][0] else header
                for name, header in zip(fields, headers)
            )
        )
    with_units = "nounits" not in modifiers
    for device in _selected(all_devices, ids):
        values = []
        for name in fields:
            unit, value = QUERY_FIELDS[name]
            text = value(device, len(all_devices))
            values.append(f"{text} {unit}" if unit and with_units else text)
        lines.append(", ".join(values))
    return "\n".join(lines) + "\n"


def query_compute_apps(host: HostSpec, fields_text: str, fmt: str) -> str:
    known = {
        "pid": ("pid", ""),
        "process_name": ("process_name", ""),
        "used_memory": ("used_gpu_memory", "MiB"),
        "used_gpu_memory": ("used_gpu_memory", "MiB"),
        "gpu_uuid": ("gpu_uuid", ""),
        "gpu_bus_id": ("gpu_bus_id", ""),
    }
    fields = [field.strip() for field in fields_text.split(",")]
    for field in fields:
        if field not in known:
            raise UsageError(f'Field "{field}" is not a valid field to query.')
    modifiers = [part.strip() for part in fmt.split(",")]
    lines = []
    if "noheader" not in modifiers:
        lines.append(
            ", ".join(f"{known[f][0]} [{known[f][1]}]" if known[f][1] else known[f][0] for f in fields)
        )
    for device in devices(host):
        for use in device.uses:
            row = {
                "pid": str(use.pid),
                "process_name": use.process_name,
                "gpu_uuid": device.uuid,
                "gpu_bus_id": f"00000000:{device.bus}:00.0",
                "used_memory": f"{use.memory_mib} MiB" if "nounits" not in modifiers else str(use.memory_mib),
            }
            row["used_gpu_memory"] = row["used_memory"]
            lines.append(", ".join(row[field] for field in fields))
    return "\n".join(lines) + ("\n" if lines else "")


def list_gpus(host: HostSpec) -> str:
    return "".join(f"GPU {d.index}: {d.accel.name} (UUID: {d.uuid})\n" for d in devices(host))


def nvidia_table(host: HostSpec) -> str:
    """The default ``nvidia-smi`` screen (driver 570 layout)."""
    rule = "+-----------------------------------------+------------------------+----------------------+"
    lines = [
        time.strftime("%a %b %d %H:%M:%S %Y") + "       ",
        "+" + "-" * 89 + "+",
        f"| NVIDIA-SMI {NVIDIA_DRIVER:<23}Driver Version: {NVIDIA_DRIVER:<15}"
        f"CUDA Version: {CUDA_VERSION:<9}|",
        "|-----------------------------------------+------------------------+----------------------+",
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                        |               MIG M. |",
        "|=========================================+========================+======================|",
    ]
    all_devices = devices(host)
    for d in all_devices:
        lines.append(
            f"| {d.index:>3}  {d.accel.name:<31}On  |{'00000000:' + d.bus + ':00.0':>19} Off |{'0':>21} |"
        )
        lines.append(
            f"| N/A  {d.temperature:>3}C    P0{int(d.power):>15}W / {int(d.limit_w):>4}W |"
            f"{d.used_mib:>8}MiB / {d.accel.memory_mib:>6}MiB |"
            f"{int(round(d.utilization * 100)):>7}%      Default |"
        )
        lines.append(f"|{'':41}|{'':24}|{'Disabled':>21} |")
        lines.append(rule)
    lines += [
        "",
        "+" + "-" * 89 + "+",
        "| Processes:" + " " * 78 + "|",
        "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
        "|        ID   ID                                                               Usage      |",
        "|" + "=" * 89 + "|",
    ]
    processes = [(d.index, use) for d in all_devices for use in d.uses]
    if not processes:
        lines.append("|  No running processes found" + " " * 61 + "|")
    for index, use in processes:
        lines.append(
            f"|  {index:>3}   N/A  N/A  {use.pid:>14}      C   {use.process_name:<35}{use.memory_mib:>8}MiB |"
        )
    lines.append("+" + "-" * 89 + "+")
    return "\n".join(lines) + "\n"


def npu_table(host: HostSpec) -> str:
    """``npu-smi info`` for a 910B host."""
    block_rule = (
        "+===========================+===============+====================================================+"
    )
    lines = [
        "+" + "-" * 96 + "+",
        f"| npu-smi {NPU_SMI_VERSION:<25}Version: {NPU_SMI_VERSION:<53}|",
        "+---------------------------+---------------+----------------------------------------------------+",
        "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|",
        "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |",
        block_rule,
    ]
    all_devices = devices(host)
    for d in all_devices:
        hbm_used = NPU_IDLE_HBM_MB + d.used_mib
        lines.append(
            f"| {d.index:<6}{d.accel.name:<20}| {'OK':<14}| "
            f"{d.power:<12.1f}{d.temperature:<18}{0:<5}/ {0:<14}|"
        )
        lines.append(
            f"| {0:<26}| {'0000:' + d.bus + ':00.0':<14}| {int(round(d.utilization * 100)):<12}"
            f"{0:<5}/ {0:<11}{hbm_used:<5}/ {d.accel.memory_mib:<14}|"
        )
        lines.append(block_rule)
    lines += [
        "+---------------------------+---------------+----------------------------------------------------+",
        "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |",
        block_rule,
    ]
    for d in all_devices:
        if not d.uses:
            lines.append(f"| {'No running processes found in NPU ' + str(d.index):<95}|")
        for use in d.uses:
            lines.append(
                f"| {d.index:<8}{0:<18}| {use.pid:<14}| {use.process_name:<25}| {use.memory_mib:<24}|"
            )
        lines.append(block_rule)
    return "\n".join(lines) + "\n"


def _run(tool: str, render: Callable[[HostSpec], str]) -> int:
    try:
        host = load_host()
    except ValueError as exc:
        print(f"{tool} (simulated): {exc}", file=sys.stderr)
        return 1
    try:
        sys.stdout.write(render(host))
    except UsageError as error:
        print(str(error))
        return error.status
    return 0


def nvidia_smi_main(argv: List[str]) -> int:
    def render(host: HostSpec) -> str:
        if host.accelerator.is_npu:
            raise UsageError(
                "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                "Make sure that the latest NVIDIA driver is installed and running.",
                9,
            )
        options = _option_values(argv)
        if "--version" in options:
            return (
                f"NVIDIA-SMI version  : {NVIDIA_DRIVER}\nNVML version        : {NVIDIA_DRIVER[:7]}\n"
                f"DRIVER version      : {NVIDIA_DRIVER}\nCUDA Version        : {CUDA_VERSION}\n"
            )
        if "--list-gpus" in options:
            return list_gpus(host)
        if "--query-gpu" in options:
            return query_gpu(
                host, options["--query-gpu"], options.get("--format", "csv"), options.get("--id")
            )
        if "--query-compute-apps" in options:
            return query_compute_apps(host, options["--query-compute-apps"], options.get("--format", "csv"))
        if options:
            raise UsageError("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.")
        return nvidia_table(host)

    return _run("nvidia-smi", render)


def npu_smi_main(argv: List[str]) -> int:
    def render(host: HostSpec) -> str:
        if not host.accelerator.is_npu:
            raise UsageError("npu-smi: no Ascend NPU device found", 1)
        if argv != ["info"]:
            raise UsageError("Usage: npu-smi info (only 'npu-smi info' is simulated)", 1)
        return npu_table(host)

    return _run("npu-smi", render)
