"""Simulated hosts: install the simulator's shims on a host whose entry says ``simulate:``.

The shims (``nvidia-smi``/``npu-smi``, ``vllm``, ``python3 -m sglang.launch_server``, ``trtllm-serve``,
``mindieservice_daemon`` and the engines' package metadata) go under ``<workdir>/sim/``, rewritten
only when their content changes; :func:`prepare_host` returns the environment (``PATH`` with the shims
first, ``PYTHONPATH``, ...) the transport applies to every command on that host. From there on every
real code path (probing, detached starts, readiness, logs, stop, the benchmark) runs unchanged.

The shims run the simulator from the agent zipapp shipped to the host; on the app's own machine
(``transport: local``) they run it straight from this source checkout. An engine started from a
container image on a simulated host gets the same shims: :func:`container_setup` mounts the sim home
and the agent into the container and gives it the shims' environment, so the image only needs the
``python:`` command the shims run.
"""

from __future__ import annotations

import hashlib
import posixpath
import threading

from perflab.containers.runtime import Mount
from perflab.inventory import HostConfig
from perflab.remote.agent import checkout_dir, ensure_agent
from perflab.sim.shims import DEFAULT_PATH, shim_env, shim_files
from perflab.transport.base import Transport

SIM_DIR = "sim"
STAMP_FILE = ".perflab-shims.sha256"
_TIMEOUT_S = 30.0

_lock = threading.Lock()
_prepared: dict[str, dict[str, str]] = {}


class SimulatedHostError(RuntimeError):
    """The simulator's shims could not be installed on a simulated host."""


def _files_digest(files: dict[str, tuple[str, int]]) -> str:
    digest = hashlib.sha256()
    for path in sorted(files):
        text, mode = files[path]
        digest.update(f"{path}\0{mode:o}\0{len(text)}\0".encode())
        digest.update(text.encode("utf-8"))
    return digest.hexdigest()


def _host_path(transport: Transport) -> str:
    """The PATH commands on the host get (with the host's own ``env``), before the shims go first."""
    result = transport.run(["sh", "-c", 'printf %s "$PATH"'], timeout=_TIMEOUT_S)
    if not result.ok or not result.stdout:
        raise SimulatedHostError(f"Cannot read PATH on host '{transport.host.name}': {result.stderr.strip()}")
    return result.stdout


def _agent_path(transport: Transport) -> str:
    return checkout_dir() if transport.kind == "local" else ensure_agent(transport)


def prepare_host(transport: Transport, host: HostConfig) -> dict[str, str]:
    """Install (or refresh) the shims for ``host.simulate`` and return the env to apply to commands."""
    if host.simulate is None:
        raise SimulatedHostError(f"Host '{host.name}' is not simulated (no simulate: in hosts.yaml).")
    key = f"{transport.kind}|{host.model_dump_json()}"
    with _lock:
        if key in _prepared:
            return dict(_prepared[key])
    agent_path = _agent_path(transport)
    sim_home = posixpath.join(transport.workdir, SIM_DIR)
    try:
        files = shim_files(host.python, agent_path, sim_home, host.simulate.as_spec())
    except ValueError as exc:
        raise SimulatedHostError(f"Host '{host.name}': {exc}") from None
    digest = _files_digest(files)
    stamp = posixpath.join(sim_home, STAMP_FILE)
    try:
        installed = transport.read_text(stamp).strip()
    except FileNotFoundError:
        installed = ""
    if installed != digest:
        transport.write_files({posixpath.join(sim_home, path): content for path, content in files.items()})
        transport.write_text(stamp, digest + "\n")
    env = shim_env(sim_home, agent_path, _host_path(transport))
    with _lock:
        _prepared[key] = env
    return dict(env)


def container_setup(transport: Transport) -> tuple[dict[str, str], tuple[Mount, ...]]:
    """The environment and mounts that make an engine container on this simulated host run the shims:
    the sim home (read-write: the simulated engines record the GPUs they hold there) and the agent
    (read-only), at the same paths; ``PATH`` is the shims first, then the usual system directories."""
    sim_home = posixpath.join(transport.workdir, SIM_DIR)
    agent_path = _agent_path(transport)
    mounts = (Mount(sim_home, sim_home, read_only=False), Mount(agent_path, agent_path))
    return shim_env(sim_home, agent_path, DEFAULT_PATH), mounts
