"""Which simulated engine holds which GPUs: one pid-stamped file per process in the sim home.

A running shim engine writes ``state/gpu-<pid>.json`` (GPU index → memory it holds, its current
utilisation, a process name) and removes it on exit; ``nvidia-smi``/``npu-smi`` sum these files to
show busy devices. Files of processes that no longer exist are ignored and cleaned up, so a killed
engine frees its GPUs as a real one does. Writes are atomic (temporary file + rename).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import Dict, List


class DeviceUse:
    """One process's use of one device."""

    __slots__ = ("pid", "process_name", "memory_mib", "utilization")

    def __init__(self, pid: int, process_name: str, memory_mib: int, utilization: float) -> None:
        self.pid = pid
        self.process_name = process_name
        self.memory_mib = memory_mib
        self.utilization = utilization


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write_atomic(path: str, payload: dict) -> None:
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".gpu-", dir=directory)
    with os.fdopen(handle, "w") as stream:
        json.dump(payload, stream)
    os.replace(temporary, path)


class Registration:
    """This process's entry in the state directory."""

    def __init__(
        self, state_dir: str, engine: str, process_names: Dict[int, str], memory_mib: Dict[int, int]
    ) -> None:
        self.path = os.path.join(state_dir, f"gpu-{os.getpid()}.json")
        self._payload = {
            "pid": os.getpid(),
            "engine": engine,
            "utilization": 0.0,
            "devices": {
                str(index): {"memory_mib": memory_mib[index], "process_name": process_names[index]}
                for index in memory_mib
            },
        }
        _write_atomic(self.path, self._payload)

    def set_utilization(self, utilization: float) -> None:
        self._payload["utilization"] = round(max(0.0, min(1.0, utilization)), 3)
        _write_atomic(self.path, self._payload)

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.path)


def read_usage(state_dir: str) -> Dict[int, List[DeviceUse]]:
    """Device index → uses by live processes (stale files of dead processes are removed)."""
    usage: Dict[int, List[DeviceUse]] = {}
    try:
        names = sorted(os.listdir(state_dir))
    except FileNotFoundError:
        return usage
    for name in names:
        if not (name.startswith("gpu-") and name.endswith(".json")):
            continue
        path = os.path.join(state_dir, name)
        try:
            with open(path, encoding="utf-8") as handle:
                payload = json.load(handle)
            pid = int(payload["pid"])
            devices = payload["devices"]
            utilization = float(payload.get("utilization", 0.0))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not _alive(pid):
            with contextlib.suppress(OSError):
                os.remove(path)
            continue
        for index, use in devices.items():
            usage.setdefault(int(index), []).append(
                DeviceUse(
                    pid, str(use.get("process_name", "python3")), int(use.get("memory_mib", 0)), utilization
                )
            )
    return usage


def busy_mib(state_dir: str, device: int) -> int:
    """Memory other live processes hold on ``device``."""
    return sum(use.memory_mib for use in read_usage(state_dir).get(device, []) if use.pid != os.getpid())
