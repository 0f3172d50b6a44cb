"""npu-smi: a parser for the ``npu-smi info`` table (Ascend 910B and relatives), over plain text.

The table pairs a device row (``| <npu> <name> | <health> | <power> <temp> <hugepages> |``) with one
row per chip (``| <chip> | <bus-id> | <aicore%> <mem used>/<total> <hbm used>/<total> |``); both the
classic and the wider (npu-smi 26) layouts share that shape; the device row's ``Power(W)`` is the
chip's power draw. The process table that follows is ignored.
"""

from __future__ import annotations

import re

from perflab.probe.models import Accelerator, tool_failure

INFO_ARGV = ["npu-smi", "info"]

_VERSION = re.compile(r"npu-smi\s+\S+\s+Version:\s*(\S+)")
_DEVICE = re.compile(r"^(\d+)\s+(\S.*?)$")
_CHIP = re.compile(r"^(\d+)$")
_DEVICE_METRICS = re.compile(r"^(\S+)\s+(\S+)")
_CHIP_METRICS = re.compile(r"^(\S+)\s+(\d+)\s*/\s*(\d+)(?:\s+(\d+)\s*/\s*(\d+))?")


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def parse_info(text: str) -> list[Accelerator]:
    """Accelerators (one per chip) from ``npu-smi info`` output; the driver is npu-smi's version."""
    version = _VERSION.search(text)
    driver = version.group(1) if version else None
    accelerators: list[Accelerator] = []
    device: tuple[str, str, float | None, float | None] | None = None
    for line in text.splitlines():
        if "Process id" in line:
            break
        if not line.startswith("|") or "Health" in line or "Bus-Id" in line:
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 3:
            continue
        device_match = _DEVICE.match(cells[0])
        if device_match:
            metrics = _DEVICE_METRICS.match(cells[2])
            temperature = _number(metrics.group(2)) if metrics else None
            power = _number(metrics.group(1)) if metrics else None
            device = (device_match.group(2), cells[1], temperature, power)
            continue
        if device is None or not _CHIP.match(cells[0]):
            continue
        chip = _CHIP_METRICS.match(cells[2])
        if chip is None:
            continue
        memory_used, memory_total = int(chip.group(2)), int(chip.group(3))
        if chip.group(4) is not None and int(chip.group(5)) > 0:
            memory_used, memory_total = int(chip.group(4)), int(chip.group(5))
        name, health, temperature, power = device
        accelerators.append(
            Accelerator(
                index=len(accelerators),
                vendor="ascend",
                name=name,
                memory_total_mib=memory_total,
                memory_used_mib=memory_used,
                utilization_pct=_number(chip.group(1)),
                temperature_c=temperature,
                power_w=power,
                driver=driver,
                health=health,
            )
        )
    return accelerators


def explain_failure(exit_status: int, output: str) -> str:
    text = output.strip()
    if "dcmi module initialize failed" in text:
        return (
            "npu-smi cannot initialise the Ascend driver (dcmi); after a driver or firmware upgrade the host "
            "needs a reboot, or the user lacks access to the NPU devices."
        )
    return tool_failure("npu-smi", exit_status, text)
