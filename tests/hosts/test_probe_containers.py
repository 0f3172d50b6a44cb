"""The probe finds the host's container runtimes: real Podman over both transports, and a Docker
client without a daemon (its recorded output, Docker CLI 28.2.2) reported as unusable with its reason."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

from perflab.probe import containers, probe_host
from perflab.transport import open_transport
from tests.hosts.conftest import HostFactory

RECORDED = Path(__file__).resolve().parents[1] / "data" / "probe" / "docker" / "version-no-daemon.txt"


def test_parse_reads_usable_and_broken_runtimes() -> None:
    scan = containers.parse("podman ok 4.3.1\ndocker fail Cannot connect to the Docker daemon\n")
    assert scan.usable == {"podman": "4.3.1"}
    assert scan.broken == {"docker": "Cannot connect to the Docker daemon"}


def test_the_probe_finds_podman_and_a_docker_without_daemon(
    make_host: HostFactory, tmp_path: Path, podman_env: dict[str, str]
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(f"#!/bin/sh\ncat {shlex.quote(str(RECORDED))} >&2\nexit 1\n")
    docker.chmod(0o755)
    podman_dir = str(Path(shutil.which("podman") or "/usr/bin/podman").parent)
    host = make_host(env={**podman_env, "PATH": f"{bin_dir}:{podman_dir}:/usr/bin:/bin"})
    with open_transport(host) as transport:
        result = probe_host(transport)
    version = subprocess.run(["podman", "--version"], capture_output=True, text=True).stdout.split()[-1]
    assert result.container_runtimes == {"podman": version}
    assert result.container_runtime_errors == {"docker": RECORDED.read_text().strip()}
    assert (
        RECORDED.read_text()
        .strip()
        .startswith("Cannot connect to the Docker daemon at unix:///var/run/docker.sock.")
    )
