"""Cumulative energy counters read on a host: NVML's per-GPU counter and the CPU's RAPL packages.

Both are monotonic counters that the energy computation differences over a benchmark window; perflab
stores them as read and never guesses a missing one.

- NVML: ``nvmlDeviceGetTotalEnergyConsumption`` (millijoules since the driver loaded; Volta and
  later), read by a small Python program run with the host's Python where it can import ``pynvml``
  (the ``nvidia-ml-py`` package). A host without the bindings answers ``{"unavailable": ...}``.
- RAPL: ``/sys/class/powercap/intel-rapl:N/energy_uj`` of each package zone ``N`` (the kernel's
  powercap interface, also used by AMD's RAPL driver) with ``max_energy_range_uj``, where the counter
  wraps. Most kernels make ``energy_uj`` readable by root only; an unreadable counter is left out.
"""

from __future__ import annotations

import json
import re
from typing import Any

NVML_PROGRAM = """
import json
try:
    import pynvml
except ImportError as exc:
    print(json.dumps({"unavailable": "no NVML bindings (pip install nvidia-ml-py): %s" % exc}))
    raise SystemExit(0)
try:
    pynvml.nvmlInit()
except pynvml.NVMLError as exc:
    print(json.dumps({"unavailable": "NVML did not start: %s" % exc}))
    raise SystemExit(0)
counters = {}
for index in range(pynvml.nvmlDeviceGetCount()):
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        counters[str(index)] = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except pynvml.NVMLError:
        pass
pynvml.nvmlShutdown()
print(json.dumps({"energy_mj": counters}))
"""

# Reads each top-level RAPL zone's counter and wrap point; a zone whose counter cannot be read prints
# nothing. The zone names come from the kernel's directory, never from perflab's input.
RAPL_SCRIPT = r"""
for zone in /sys/class/powercap/intel-rapl:*; do
  case "${zone##*/}" in intel-rapl:*:*) continue ;; esac
  energy=$(cat "$zone/energy_uj" 2>/dev/null) || continue
  wrap=$(cat "$zone/max_energy_range_uj" 2>/dev/null) || wrap=
  echo "${zone##*/} $energy $wrap"
done
"""
# Counters and wrap points are unsigned 64-bit (at most 20 digits), zone numbers small.
_RAPL_LINE = re.compile(r"^intel-rapl:(\d{1,4})\s+(\d{1,20})(?:\s+(\d{1,20}))?\s*$")
COUNTER_LIMIT = 2**64


def nvml_argv(python: str) -> list[str]:
    return [python, "-c", NVML_PROGRAM]


def rapl_argv() -> list[str]:
    return ["sh", "-c", RAPL_SCRIPT]


def parse_nvml(output: str) -> dict[int, int] | None:
    """GPU index → cumulative energy in mJ from the NVML program's output (a counter that is not an
    unsigned 64-bit number, NVML's type, is left out); None where the host has no NVML bindings (or
    NVML did not start) or the output is not the program's."""
    lines = output.strip().splitlines()
    try:
        answer: Any = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    counters = answer.get("energy_mj") if isinstance(answer, dict) else None
    if not isinstance(counters, dict):
        return None
    return {
        int(index): int(value)
        for index, value in counters.items()
        if str(index).isdigit()
        and len(str(index)) <= 4
        and isinstance(value, int)
        and not isinstance(value, bool)
        and 0 <= value < COUNTER_LIMIT
    }


def parse_rapl(output: str) -> list[dict[str, int | None]]:
    """One ``{"package", "energy_uj", "max_energy_range_uj"}`` per readable package zone (a line whose
    numbers do not fit 64 bits is left out)."""
    packages: list[dict[str, int | None]] = []
    for line in output.splitlines():
        match = _RAPL_LINE.match(line.strip())
        if match and all(int(number) < COUNTER_LIMIT for number in match.groups(default="0")):
            wrap = match.group(3)
            packages.append(
                {
                    "package": int(match.group(1)),
                    "energy_uj": int(match.group(2)),
                    "max_energy_range_uj": int(wrap) if wrap is not None else None,
                }
            )
    return packages
