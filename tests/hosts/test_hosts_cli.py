"""``python -m perflab hosts``: list and probe, as a table and as JSON, with clear errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures.sshd import SshServer, free_port

REPO = Path(__file__).resolve().parents[2]


def perflab_hosts(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "perflab", "hosts", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def hosts_file(tmp_path: Path, sshd: SshServer) -> Path:
    path = tmp_path / "hosts.yaml"
    path.write_text(
        f"""hosts:
  - name: sim
    transport: local
    workdir: {tmp_path / "sim-work"}
    labels: [demo, fast]
    simulate: {{accelerator: H200, count: 2, time_scale: 100}}
  - name: ssh-box
    address: 127.0.0.1
    port: {sshd.port}
    user: {sshd.user}
    auth: {{key_file: {sshd.client_key}, agent: false}}
    known_hosts: {sshd.known_hosts}
    workdir: {tmp_path / "ssh-work"}
  - name: down
    address: 127.0.0.1
    port: {free_port()}
    connect_attempts: 1
"""
    )
    return path


def test_list_as_table_and_json(tmp_path: Path, sshd: SshServer) -> None:
    path = hosts_file(tmp_path, sshd)
    table = perflab_hosts("--file", str(path), "list")
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split() == ["NAME", "TRANSPORT", "ADDRESS", "SIMULATED", "LABELS"]
    assert rows[0].split()[:4] == ["sim", "local", "local", "2×"] and "demo, fast" in rows[0]
    assert rows[1].split()[:3] == ["ssh-box", "ssh", f"{sshd.user}@127.0.0.1:{sshd.port}"]
    listed = json.loads(perflab_hosts("--file", str(path), "list", "--json").stdout)
    assert [(host["name"], host["simulated"]) for host in listed] == [
        ("sim", True),
        ("ssh-box", False),
        ("down", False),
    ]


def test_probe_shows_hosts_and_explains_failures(tmp_path: Path, sshd: SshServer) -> None:
    path = hosts_file(tmp_path, sshd)
    table = perflab_hosts("--file", str(path), "probe")
    assert table.returncode == 1, "one host is down"
    lines = table.stdout.splitlines()
    assert lines[0].split()[:3] == ["HOST", "STATUS", "ACCELERATORS"]
    sim_row = next(line for line in lines if line.startswith("sim (simulated)"))
    assert "2× NVIDIA H200" in sim_row and "vLLM" in sim_row
    assert any(line.startswith("down") and "unreachable" in line for line in lines)
    assert "Cannot reach host 'down'" in table.stdout
    assert "Traceback" not in table.stdout + table.stderr

    probed = json.loads(perflab_hosts("--file", str(path), "probe", "sim", "ssh-box", "--json").stdout)
    sim, ssh_box = probed
    assert sim["simulated"] and len(sim["probe"]["accelerators"]) == 2 and sim["error"] is None
    assert ssh_box["reachable"] and ssh_box["probe"]["system"]["cpu_cores"] == os.cpu_count()


def test_bad_hosts_file_and_unknown_name(tmp_path: Path, sshd: SshServer) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts:\n  - name: gpu-a\n    address: 10.0.0.5\n    port: twenty\n")
    result = perflab_hosts("--file", str(bad), "list")
    assert result.returncode == 2
    assert result.stderr.strip() == "bad.yaml:4: host 'gpu-a' field 'port': must be an integer"
    unknown = perflab_hosts("--file", str(hosts_file(tmp_path, sshd)), "probe", "nope")
    assert unknown.returncode == 2 and "no host named 'nope'" in unknown.stderr
