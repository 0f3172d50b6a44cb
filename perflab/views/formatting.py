"""How numbers, changes, hosts and times are written on the pages (the seeds' style: ``3019.19``,
``+59.2%``, ``3019.19×2`` for a node running two replicas), and the words for what has no value."""

from __future__ import annotations

import math
from datetime import datetime, timezone

from perflab.runner.results import times_replicas
from perflab.views.metrics import Metric

# One vocabulary for what has no value: a value that does not exist (yet) is ``—``; a figure that was
# not measured says so; a run or candidate still waiting says its state (``queued``, ``launching``).
MISSING = "—"
NOT_MEASURED = "not measured"
SIMULATED_MARK = "(simulated)"
# A result covering only the requests that ended before its benchmark was stopped.
PARTIAL_MARK = "(partial)"


def format_number(value: float | int | None, *, decimals: int = 2) -> str:
    """``1234.5`` → ``1234.50``; integers stay whole; None or NaN → ``—``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return f"{value:.{decimals}f}"


def format_metric(metric: Metric, value: float | None) -> str:
    """A metric's value with the precision its unit calls for (counts whole, rates as percent)."""
    if value is None:
        return MISSING
    if metric.unit == "%":
        return f"{value:.1f} %"
    if metric.group in ("Cost", "Energy") and abs(value) < 1:
        return f"{value:.3g}"  # $0.0042 per 1M tokens, 0.311 J per token: significant digits
    if metric.unit == "" and float(value).is_integer():
        return str(int(value))
    return format_number(float(value))


def format_throughput(value: float | None, replicas: int = 1) -> str:
    """A node-level throughput; for N replicas written per replica ×N as the seeds do (6038.38 over
    two replicas → ``3019.19×2``)."""
    if value is None or replicas <= 1:
        return format_number(value)
    return times_replicas(value, replicas)


def replicas_mark(replicas: int) -> str:
    """``×2`` for a run of two replicas, empty for one."""
    return f"×{replicas}" if replicas > 1 else ""


CHANGE_DECIMALS = 1


def shown_change(change: float) -> float:
    """A % change at the precision it is printed with (no negative zero): a change that prints as
    ``+0.0%`` is no change."""
    return round(change, CHANGE_DECIMALS) + 0.0


def format_change(change: float | None) -> str:
    """A relative change in percent as the seeds write it: ``+59.2%``, ``-3.0%``, ``—``."""
    if change is None or math.isnan(change) or math.isinf(change):
        return MISSING
    return f"{shown_change(change):+.{CHANGE_DECIMALS}f}%"


def percent_change(value: float | None, baseline: float | None) -> float | None:
    """``(value − baseline) / baseline`` in percent; None when either is missing or the baseline is 0."""
    if value is None or baseline is None or baseline == 0:
        return None
    return (value - baseline) / abs(baseline) * 100.0


def host_label(host_name: str | None, simulated: bool) -> str:
    """The host as shown everywhere: ``gpu-a``, ``local-sim (simulated)``, or ``—`` for none."""
    name = host_name or MISSING
    return f"{name} {SIMULATED_MARK}" if simulated else name


def format_time(moment: datetime | None) -> str:
    """A UTC timestamp as ``2025-01-31 14:05:09 UTC``."""
    if moment is None:
        return MISSING
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def format_duration(seconds: float | None) -> str:
    """``75`` → ``1 min 15 s``; ``3.2`` → ``3.2 s``."""
    if seconds is None:
        return MISSING
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def format_bytes(size: int) -> str:
    """``2048`` → ``2.0 KiB``."""
    if size < 1024:
        return f"{size} B"
    value = size / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``1 accelerator``, ``2 accelerators`` (``plural`` where adding an s is wrong)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def shorten(text: str | None, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis."""
    if not text:
        return ""
    return text if len(text) <= limit else text[: limit - 1] + "…"
