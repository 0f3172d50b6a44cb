"""The simulated host a shim runs on: ``$PERFLAB_SIM_HOME/host.json``.

A host entry's ``simulate:`` block (``{accelerator: H100, count: 8}``) becomes ``host.json`` in the
sim home; every shim reads it to know which accelerators exist, the engine versions to report and
the time scale of start-up delays and engine steps, and the seeded speed noise of its engines
(:mod:`perflab.sim.noise`). :func:`normalize_spec` validates and completes a
spec and is shared with :mod:`perflab.sim.shims`, which writes the file.
"""

from __future__ import annotations

import json
import os
from typing import Dict, Optional

from perflab.sim.hardware import Accelerator, accelerator_names, find_accelerator
from perflab.sim.noise import NoiseModel, check_noise

HOME_ENV = "PERFLAB_SIM_HOME"
DEFAULT_VERSIONS = {
    "vllm": "0.11.0",
    "sglang": "0.5.5.post1",
    "tensorrt_llm": "1.0.0",
    "mindie": "2.1.RC1",
    "vllm_ascend": "0.11.0rc0",
}
NVIDIA_ENGINES = ("vllm", "sglang", "tensorrt_llm")
ASCEND_ENGINES = ("vllm", "vllm_ascend", "mindie")
NVIDIA_DRIVER = "570.172.08"
CUDA_VERSION = "12.8"
NPU_SMI_VERSION = "23.0.7"
# KV transfer libraries a simulated host has for disaggregated workers (the others are missing there)
DEFAULT_TRANSFER_BACKENDS = ("mooncake", "nixl")


def normalize_spec(spec: Dict[str, object]) -> Dict[str, object]:
    """The complete spec (accelerator, count, versions, time_scale, startup_scale, engines, noise, the KV
    transfer libraries ``transfer_backends`` its disaggregated workers find, default mooncake and nixl);
    ValueError names the field. ``startup_scale`` shortens engine start-up alone (default: ``time_scale``),
    so a demo host can launch quickly while its benchmark timings stay realistic."""
    if not isinstance(spec, dict):
        raise ValueError("simulate: expected a mapping like {accelerator: H100, count: 8}")
    known = {
        "accelerator",
        "count",
        "versions",
        "time_scale",
        "startup_scale",
        "engines",
        "noise",
        "transfer_backends",
    }
    unknown = set(spec) - known
    if unknown:
        raise ValueError(f"simulate: unknown field(s) {', '.join(sorted(unknown))}")
    name = spec.get("accelerator")
    accel = find_accelerator(str(name)) if name is not None else None
    if accel is None:
        raise ValueError(f"simulate.accelerator: {name!r} is not one of {accelerator_names()}")
    count = spec.get("count", 8)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 64:
        raise ValueError(f"simulate.count: expected an integer 1..64, got {count!r}")
    time_scale = spec.get("time_scale", 1.0)
    if isinstance(time_scale, bool) or not isinstance(time_scale, (int, float)) or time_scale <= 0:
        raise ValueError(f"simulate.time_scale: expected a number > 0, got {time_scale!r}")
    startup_scale = spec.get("startup_scale", time_scale)
    if isinstance(startup_scale, bool) or not isinstance(startup_scale, (int, float)) or startup_scale <= 0:
        raise ValueError(f"simulate.startup_scale: expected a number > 0, got {startup_scale!r}")
    versions = spec.get("versions") or {}
    if not isinstance(versions, dict) or not all(isinstance(v, str) for v in versions.values()):
        raise ValueError("simulate.versions: expected a mapping of engine name to version string")
    default_engines = ASCEND_ENGINES if accel.is_npu else NVIDIA_ENGINES
    engines = spec.get("engines") or list(default_engines)
    if not isinstance(engines, list) or not set(engines) <= set(DEFAULT_VERSIONS):
        raise ValueError(
            f"simulate.engines: expected a list drawn from {', '.join(sorted(DEFAULT_VERSIONS))}"
        )
    merged = {engine: str(versions.get(engine, DEFAULT_VERSIONS[engine])) for engine in engines}
    backends = spec.get("transfer_backends", list(DEFAULT_TRANSFER_BACKENDS))
    if not isinstance(backends, list) or not all(
        isinstance(name, str) and name.isidentifier() for name in backends
    ):
        raise ValueError(
            f"simulate.transfer_backends: expected a list of names like [mooncake, nixl], got {backends!r}"
        )
    return {
        "accelerator": accel.key,
        "count": count,
        "versions": merged,
        "time_scale": float(time_scale),
        "startup_scale": float(startup_scale),
        "engines": list(engines),
        "noise": check_noise(spec.get("noise")),
        "transfer_backends": list(backends),
    }


class HostSpec:
    """A loaded, validated ``host.json``."""

    def __init__(self, home: str, spec: Dict[str, object]) -> None:
        normalized = normalize_spec(spec)
        self.home = home
        self.accelerator: Accelerator = find_accelerator(str(normalized["accelerator"]))  # type: ignore[assignment]
        self.count = int(normalized["count"])  # type: ignore[arg-type]
        self.versions: Dict[str, str] = dict(normalized["versions"])  # type: ignore[arg-type]
        self.time_scale = float(normalized["time_scale"])  # type: ignore[arg-type]
        self.startup_scale = float(normalized["startup_scale"])  # type: ignore[arg-type]
        noise = normalized["noise"] or {}
        self.noise: Optional[NoiseModel] = NoiseModel(**noise) if noise else None  # type: ignore[arg-type]
        self.transfer_backends = list(normalized["transfer_backends"])  # type: ignore[call-overload]

    @property
    def state_dir(self) -> str:
        return os.path.join(self.home, "state")

    def version(self, engine: str) -> str:
        return self.versions.get(engine, DEFAULT_VERSIONS.get(engine, "0.0.0"))

    def visible_devices(self, env_name: str, environ: Optional[Dict[str, str]] = None) -> list:
        """Physical device ids a process may use: ``env_name`` (CUDA_VISIBLE_DEVICES…) or all."""
        value = (environ if environ is not None else os.environ).get(env_name)
        if value is None:
            return list(range(self.count))
        devices = []
        for part in value.split(","):
            part = part.strip()
            if not part:
                continue
            if not part.isdigit() or int(part) >= self.count:
                break  # like CUDA: devices after an invalid entry are ignored
            devices.append(int(part))
        return devices


def load_host(home: Optional[str] = None) -> HostSpec:
    """The host spec of ``home`` (default ``$PERFLAB_SIM_HOME``); ValueError says what is missing."""
    home = home or os.environ.get(HOME_ENV, "")
    if not home:
        raise ValueError(f"{HOME_ENV} is not set: this shim only runs on a simulated host")
    path = os.path.join(home, "host.json")
    try:
        with open(path, encoding="utf-8") as handle:
            spec = json.load(handle)
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from exc
    try:
        return HostSpec(home, spec)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from exc
