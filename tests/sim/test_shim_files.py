"""shim_files/shim_env: what the host side uploads, quoted safely, and what it activates."""

from __future__ import annotations

import subprocess
import sys

import pytest

from perflab.sim.shims import shim_env, shim_files


def test_nvidia_host_files_modes_and_quoting():
    files = shim_files(
        "/opt/py thon/bin/python3",
        "/opt/agent dir/perflab-agent.pyz",
        "/srv/sim home",
        {"accelerator": "H100", "count": 8},
    )
    assert {
        "host.json",
        "bin/nvidia-smi",
        "bin/vllm",
        "bin/trtllm-serve",
        "py/sglang/__init__.py",
        "py/sglang/launch_server.py",
        "py/vllm-0.11.0.dist-info/METADATA",
        "py/tensorrt_llm-1.0.0.dist-info/METADATA",
        "py/sglang-0.5.5.post1.dist-info/METADATA",
    } <= set(files)
    assert "bin/npu-smi" not in files and "bin/mindieservice_daemon" not in files
    script, mode = files["bin/vllm"]
    assert mode == 0o755 and script.startswith("#!/bin/sh\n")
    assert "PERFLAB_SIM_HOME='/srv/sim home'" in script
    assert "exec '/opt/py thon/bin/python3' '/opt/agent dir/perflab-agent.pyz' sim shim vllm \"$@\"" in script
    assert files["host.json"][1] == 0o644


def test_ascend_host_files_and_versions():
    files = shim_files(
        "python3",
        "/a/agent.pyz",
        "/sim",
        {"accelerator": "910B", "count": 8, "versions": {"mindie": "2.2.RC1"}},
    )
    assert {
        "bin/npu-smi",
        "bin/vllm",
        "bin/mindieservice_daemon",
        "mindie/conf/config.json",
        "py/vllm_ascend-0.11.0rc0.dist-info/METADATA",
        "mindie/version.info",
    } <= set(files)
    assert "2.2.RC1" in files["mindie/version.info"][0]
    assert "bin/nvidia-smi" not in files and "bin/trtllm-serve" not in files


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"accelerator": "B300"}, "simulate.accelerator"),
        ({"accelerator": "H100", "count": 0}, "simulate.count"),
        ({"accelerator": "H100", "time_scale": -1}, "simulate.time_scale"),
        ({"accelerator": "H100", "startup_scale": 0}, "simulate.startup_scale"),
        ({"accelerator": "H100", "gpus": 8}, "unknown field(s) gpus"),
        ({"accelerator": "H100", "versions": {"vllm": 11}}, "simulate.versions"),
    ],
)
def test_bad_specs_name_the_field(spec, field):
    with pytest.raises(ValueError, match=field.replace("(", r"\(").replace(")", r"\)")):
        shim_files("python3", "/a.pyz", "/sim", spec)


def test_versions_visible_to_importlib(sim_host):
    host = sim_host("H100", 1)
    probe = (
        "import importlib.metadata as m, vllm, sglang; "
        "print(m.version('vllm'), m.version('sglang'), m.version('tensorrt_llm'), vllm.__version__)"
    )
    result = subprocess.run([sys.executable, "-c", probe], env=host.env, capture_output=True, text=True)
    assert result.stdout.split() == ["0.11.0", "0.5.5.post1", "1.0.0", "0.11.0"]


def test_shim_env_puts_sim_bin_first():
    env = shim_env("/sim", "/a/agent.pyz", "/usr/bin:/bin")
    assert env == {
        "PATH": "/sim/bin:/usr/bin:/bin",
        "PYTHONPATH": "/sim/py",
        "PERFLAB_SIM_HOME": "/sim",
        "MIES_INSTALL_PATH": "/sim/mindie",
    }
