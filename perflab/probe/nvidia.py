"""nvidia-smi: the query perflab runs and a parser for its CSV output (pure functions over text).

The parser reads the header, so it accepts any ``--query-gpu`` field list and order, with or without
units (``81559 MiB``, ``100 %``); ``[N/A]`` and ``[Not Supported]`` become ``None``. Power is
``power.draw.average`` where the query has it, else ``power.draw``; the SM clock is ``clocks.sm``,
which nvidia-smi heads ``clocks.current.sm`` (driver 580.159.04, tests/data/nvidia-h200/). Whatever
else it cannot read — broken CSV, numbers no GPU has, more than ``MAX_DEVICES`` rows — raises
``ValueError``, which the probe reports as a problem of the host.
"""

from __future__ import annotations

import csv
import io
import math
import re

from perflab.probe.models import Accelerator, tool_failure

QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "memory.total",
    "memory.used",
    "utilization.gpu",
    "temperature.gpu",
    "driver_version",
    "compute_cap",
)

# The sampling query: load, memory, power, SM clock and temperature. ``power.draw.average`` (the
# driver's 1-second average, listed by ``--help-query-gpu`` of driver 580) is steadier than the instant
# reading; drivers that do not know it get ``power.draw`` instead (SAMPLE_FIELDS_FALLBACK).
SAMPLE_FIELDS = (
    "index",
    "name",
    "utilization.gpu",
    "memory.used",
    "memory.total",
    "power.draw.average",
    "clocks.sm",
    "temperature.gpu",
)
SAMPLE_FIELDS_FALLBACK = tuple(
    "power.draw" if field == "power.draw.average" else field for field in SAMPLE_FIELDS
)

# More rows than any machine has GPUs (an NVL72 rack is 72) means the output is not a GPU list.
MAX_DEVICES = 1024
_UNKNOWN = {"[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", ""}
_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")


def query_argv(fields: tuple[str, ...] = QUERY_FIELDS) -> list[str]:
    return ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv"]


def rejects_field(output: str, field: str) -> bool:
    """True if nvidia-smi refused ``field`` (older drivers do not know ``compute_cap``)."""
    return f'Field "{field}" is not a valid field to query' in output


def _clean(value: str) -> str | None:
    text = value.strip()
    return None if text.lower() in _UNKNOWN else text


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    match = _NUMBER.match(value)
    if not match:
        return None
    number = float(match.group(1))
    if not math.isfinite(number) or abs(number) > 2**53:
        raise ValueError(f"nvidia-smi value {value[:20]!r} is out of range")
    return number


def _integer(value: str | None) -> int | None:
    number = _number(value)
    return None if number is None else int(number)


def parse_query_csv(text: str) -> list[Accelerator]:
    """Accelerators from ``nvidia-smi --query-gpu=... --format=csv`` output (header line required)."""
    try:
        rows = [row for row in csv.reader(io.StringIO(text.strip()), skipinitialspace=True) if row]
    except csv.Error as exc:
        raise ValueError(f"not nvidia-smi CSV output ({exc})") from None
    if len(rows) > MAX_DEVICES + 1:
        raise ValueError(f"nvidia-smi listed {len(rows) - 1} rows, more than {MAX_DEVICES} GPUs")
    if not rows:
        return []
    header = [column.split(" [")[0].strip() for column in rows[0]]
    if "name" not in header:
        raise ValueError(f"not nvidia-smi CSV output (no 'name' column): {text.strip()[:200]!r}")
    accelerators = []
    for position, row in enumerate(rows[1:]):
        if len(row) != len(header):
            raise ValueError(
                f"nvidia-smi row {position + 1} has {len(row)} fields, expected {len(header)}: {row}"
            )
        values = {column: _clean(value) for column, value in zip(header, row, strict=True)}
        accelerators.append(
            Accelerator(
                index=_integer(values.get("index")) if values.get("index") is not None else position,
                vendor="nvidia",
                name=values.get("name") or "unknown NVIDIA GPU",
                memory_total_mib=_integer(values.get("memory.total")),
                memory_used_mib=_integer(values.get("memory.used")),
                utilization_pct=_number(values.get("utilization.gpu")),
                temperature_c=_number(values.get("temperature.gpu")),
                power_w=_number(values.get("power.draw.average") or values.get("power.draw")),
                sm_clock_mhz=_number(values.get("clocks.current.sm") or values.get("clocks.sm")),
                driver=values.get("driver_version"),
                compute_cap=values.get("compute_cap"),
                uuid=values.get("uuid"),
            )
        )
    return accelerators


def explain_failure(exit_status: int, output: str) -> str:
    """A user-facing sentence for a failed nvidia-smi run."""
    text = output.strip()
    if "couldn't communicate with the NVIDIA driver" in text:
        return (
            "nvidia-smi cannot talk to the NVIDIA driver (not loaded, or a driver/library version mismatch)."
        )
    if "No devices were found" in text:
        return "nvidia-smi found no GPUs (the driver is up but no device is visible)."
    return tool_failure("nvidia-smi", exit_status, text)
