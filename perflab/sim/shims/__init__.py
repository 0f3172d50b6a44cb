"""The files that turn a host into a simulated one, and the environment that activates them.

:func:`shim_files` returns every file the host side uploads under the sim home (relative path →
(content, mode)):

- ``host.json``: the normalized ``simulate:`` spec (accelerator, count, versions, time scale);
- ``bin/nvidia-smi`` or ``bin/npu-smi`` and the engine CLIs of the host's engines: ``bin/vllm``,
  ``bin/trtllm-serve``, ``bin/mindieservice_daemon`` — POSIX shell scripts that ``exec`` the agent
  (``python agent.pyz sim shim TOOL "$@"``; for a source checkout directory,
  ``python -m perflab sim shim TOOL "$@"`` with the checkout on ``PYTHONPATH``), every path quoted;
- ``py/sglang/__init__.py`` and ``py/sglang/launch_server.py`` so ``python3 -m sglang.launch_server``
  re-executes into the simulator (same pid, so detached starts track it);
- ``py/<dist>-<version>.dist-info/METADATA`` plus a package ``__init__.py`` with ``__version__`` for
  vllm, sglang, tensorrt_llm and vllm_ascend, so ``importlib.metadata.version()`` and
  ``import X; X.__version__`` report the simulated versions;
- for MindIE: ``mindie/conf/config.json`` (the default configuration) and ``mindie/version.info``.

:func:`shim_env` gives ``PATH`` (the sim ``bin`` first), ``PYTHONPATH``, ``PERFLAB_SIM_HOME`` and
``MIES_INSTALL_PATH``.
"""

from __future__ import annotations

import json
import os
import shlex
from typing import Dict, List, Tuple

from perflab.sim.hostspec import HOME_ENV, normalize_spec

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
EXECUTABLE = 0o755
READABLE = 0o644
# engine (as in versions) → (distribution name, CLI shim tools)
ENGINE_FILES: Dict[str, Tuple[str, Tuple[str, ...]]] = {
    "vllm": ("vllm", ("vllm",)),
    "sglang": ("sglang", ()),
    "tensorrt_llm": ("tensorrt_llm", ("trtllm-serve",)),
    "vllm_ascend": ("vllm_ascend", ()),
    "mindie": ("", ("mindieservice_daemon",)),
}


def _is_checkout(agent_path: str) -> bool:
    """True when ``agent_path`` is a perflab source directory rather than the agent zipapp."""
    return os.path.isdir(agent_path) and not agent_path.endswith(".pyz")


def _agent_command(python: str, agent_path: str) -> List[str]:
    """Argv prefix that runs the simulator CLI (``... sim shim TOOL``)."""
    return [python, "-m", "perflab"] if _is_checkout(agent_path) else [python, agent_path]


def _shell_shim(python: str, agent_path: str, sim_home: str, tool: str) -> str:
    command = shlex.join(_agent_command(python, agent_path) + ["sim", "shim", tool])
    lines = [
        "#!/bin/sh",
        f"# perflab simulated {tool}: answers from the simulator, not a real device or engine",
        f"{HOME_ENV}={shlex.quote(sim_home)}",
        f"export {HOME_ENV}",
    ]
    if _is_checkout(agent_path):
        lines.append(f"PYTHONPATH={shlex.quote(agent_path)}${{PYTHONPATH:+:$PYTHONPATH}}")
        lines.append("export PYTHONPATH")
    lines.append(f'exec {command} "$@"')
    return "\n".join(lines) + "\n"


def _sglang_module(python: str, agent_path: str, sim_home: str) -> str:
    prefix = _agent_command(python, agent_path)[1:]
    lines = [
        '"""Simulated sglang.launch_server (perflab): re-executes as the simulator\'s SGLang shim."""',
        "import os",
        "import sys",
        "",
        f"os.environ[{HOME_ENV!r}] = {sim_home!r}",
    ]
    if _is_checkout(agent_path):
        lines.append(
            f"os.environ['PYTHONPATH'] = os.pathsep.join(filter(None, [{agent_path!r}, "
            "os.environ.get('PYTHONPATH')]))"
        )
    lines.append(
        f"os.execv(sys.executable, [sys.executable] + {prefix!r} + ['sim', 'shim', 'sglang'] + sys.argv[1:])"
    )
    return "\n".join(lines) + "\n"


def _dist_files(dist: str, version: str) -> Dict[str, Tuple[str, int]]:
    metadata = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\nSummary: perflab simulated {dist}\n"
    return {
        f"py/{dist}-{version}.dist-info/METADATA": (metadata, READABLE),
        f"py/{dist}-{version}.dist-info/RECORD": ("", READABLE),
        f"py/{dist}/__init__.py": (f'"""perflab simulated {dist}."""\n__version__ = {version!r}\n', READABLE),
    }


def default_mindie_config() -> dict:
    """MindIE Service's shipped config.json (the parts the simulator reads)."""
    return {
        "Version": "1.0.0",
        "ServerConfig": {
            "ipAddress": "127.0.0.1",
            "managementIpAddress": "127.0.0.2",
            "port": 1025,
            "managementPort": 1026,
            "metricsPort": 1027,
            "httpsEnabled": True,
            "maxLinkNum": 1000,
        },
        "BackendConfig": {
            "backendName": "mindieservice_llm_engine",
            "modelInstanceNumber": 1,
            "npuDeviceIds": [[0, 1, 2, 3]],
            "tokenizerProcessNumber": 8,
            "multiNodesInferEnabled": False,
            "ModelDeployConfig": {
                "maxSeqLen": 2560,
                "maxInputTokenLen": 2048,
                "truncation": False,
                "ModelConfig": [
                    {
                        "modelInstanceType": "Standard",
                        "modelName": "llama_65b",
                        "modelWeightPath": "/data/atb_testdata/weights/llama1-65b-safetensors",
                        "worldSize": 4,
                        "cpuMemSize": 5,
                        "npuMemSize": -1,
                        "backendType": "atb",
                        "trustRemoteCode": False,
                    }
                ],
            },
            "ScheduleConfig": {
                "templateType": "Standard",
                "templateName": "Standard_LLM",
                "cacheBlockSize": 128,
                "maxPrefillBatchSize": 50,
                "maxPrefillTokens": 8192,
                "prefillTimeMsPerReq": 150,
                "prefillPolicyType": 0,
                "decodeTimeMsPerReq": 50,
                "decodePolicyType": 0,
                "maxBatchSize": 200,
                "maxIterTimes": 512,
                "maxPreemptCount": 0,
                "supportSelectBatch": False,
                "maxQueueDelayMicroseconds": 5000,
            },
        },
    }


def shim_files(python: str, agent_path: str, sim_home: str, spec: dict) -> Dict[str, Tuple[str, int]]:
    """Relative path under ``sim_home`` → (content, mode) for a host simulating ``spec``.

    Raises ValueError naming the bad ``simulate:`` field.
    """
    normalized = normalize_spec(spec)
    versions: Dict[str, str] = normalized["versions"]  # type: ignore[assignment]
    npu = normalized["accelerator"] == "910B"
    files: Dict[str, Tuple[str, int]] = {"host.json": (json.dumps(normalized, indent=2) + "\n", READABLE)}
    tools = ["npu-smi" if npu else "nvidia-smi"]
    for engine, version in versions.items():
        dist, engine_tools = ENGINE_FILES[engine]
        tools.extend(engine_tools)
        if dist:
            files.update(_dist_files(dist, version))
        if engine == "mindie":
            files["mindie/conf/config.json"] = (json.dumps(default_mindie_config(), indent=4) + "\n", 0o640)
            files["mindie/version.info"] = (f"Ascend-mindie : {version}\nVersion : {version}\n", READABLE)
    for tool in dict.fromkeys(tools):
        files[f"bin/{tool}"] = (_shell_shim(python, agent_path, sim_home, tool), EXECUTABLE)
    if "sglang" in versions:
        files["py/sglang/launch_server.py"] = (_sglang_module(python, agent_path, sim_home), READABLE)
    return files


def shim_env(sim_home: str, agent_path: str, base_path: str = DEFAULT_PATH) -> Dict[str, str]:
    """Environment of commands on the simulated host (``base_path`` is the host's own PATH)."""
    python_path = [os.path.join(sim_home, "py")]
    if _is_checkout(agent_path):
        python_path.append(agent_path)
    return {
        "PATH": os.path.join(sim_home, "bin") + ":" + base_path,
        "PYTHONPATH": ":".join(python_path),
        HOME_ENV: sim_home,
        "MIES_INSTALL_PATH": os.path.join(sim_home, "mindie"),
    }
