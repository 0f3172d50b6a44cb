"""hosts.yaml loading: every field, and errors that name the file, line, host and field."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from perflab.inventory import (
    HOSTS_FILE_ENV,
    HostConfig,
    InventoryError,
    default_inventory_path,
    load_inventory,
)

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hosts.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(InventoryError) as caught:
        load_inventory(write(tmp_path, text))
    return caught.value.problems


def test_shipped_hosts_file_has_one_simulated_local_host() -> None:
    inventory = load_inventory(REPO / "hosts.yaml")
    [host] = inventory.hosts
    assert host.transport == "local" and host.simulated
    assert host.simulate is not None and host.simulate.accelerator == "H100"


def test_every_field(tmp_path: Path) -> None:
    inventory = load_inventory(
        write(
            tmp_path,
            """
            hosts:
              - name: bastion
                address: bastion.example.org
                user: jump
              - name: gpu-a
                address: 10.0.0.5
                port: 2222
                user: ubuntu
                auth: {key_file: ~/.ssh/id_ed25519, agent: false, password_env: GPU_A_PASSWORD}
                jump: bastion
                known_hosts: ~/.perflab/known_hosts
                trust_on_first_use: true
                labels: [h100, team-a]
                workdir: /data/perflab
                python: /opt/venv/bin/python
                env: {HF_HOME: /data/hf, CUDA_DEVICE_ORDER: PCI_BUS_ID}
              - name: npu-sim
                transport: local
                simulate: {accelerator: 910B, count: 16, time_scale: 10}
            """,
        )
    )
    assert inventory.names() == ["bastion", "gpu-a", "npu-sim"]
    gpu = inventory.get("gpu-a")
    assert (gpu.address, gpu.port, gpu.user, gpu.python, gpu.workdir) == (
        "10.0.0.5", 2222, "ubuntu", "/opt/venv/bin/python", "/data/perflab",
    )  # fmt: skip
    assert gpu.auth.key_file == "~/.ssh/id_ed25519" and not gpu.auth.agent
    assert gpu.auth.password_env == "GPU_A_PASSWORD"
    assert gpu.trust_on_first_use and gpu.labels == ("h100", "team-a")
    assert gpu.env == {"HF_HOME": "/data/hf", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert gpu.jump_host == inventory.get("bastion")
    assert gpu.display_address == "ubuntu@10.0.0.5:2222 via bastion"
    assert not gpu.simulated and inventory.get("npu-sim").simulated
    defaults = inventory.get("bastion")
    assert (defaults.port, defaults.known_hosts, defaults.trust_on_first_use, defaults.auth.agent) == (
        22, "~/.ssh/known_hosts", False, True,
    )  # fmt: skip


def test_wrong_type_names_file_line_host_and_field(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """
        hosts:
          - name: gpu-a
            address: 10.0.0.5
            port: twenty-two
        """,
    )
    assert found == ["hosts.yaml:5: host 'gpu-a' field 'port': must be an integer"]


def test_every_problem_is_reported_in_line_order(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """
        hosts:
          - name: gpu-a
            address: 10.0.0.5
            auth:
              password: hunter2
          - name: gpu-b
            colour: red
            trust_on_first_use: maybe
          - name: local
            transport: local
            address: 10.0.0.9
          - name: gpu-c
            env: {1BAD: x}
          - name: gpu-a
            address: 10.0.0.6
          - name: sim
            transport: local
            simulate: {accelerator: H900}
        """,
    )
    assert found[0].startswith("hosts.yaml:6: host 'gpu-a' field 'auth.password': secrets are never stored")
    joined = "\n".join(found)
    assert "hosts.yaml:8: host 'gpu-b' field 'colour': is not a known field" in joined
    assert "hosts.yaml:9: host 'gpu-b' field 'trust_on_first_use': must be true or false" in joined
    assert "hosts.yaml:12: host 'local' field 'address': has no meaning with transport: local" in joined
    assert "host 'gpu-c' field 'env': '1BAD' is not a valid environment variable name" in joined
    assert "hosts.yaml:15: host 'gpu-a' is defined twice" in joined
    assert "hosts.yaml:19: host 'sim' field 'simulate'" in joined and "H900" in joined
    lines = [int(problem.split(":")[1]) for problem in found]
    assert lines == sorted(lines)
    assert "hunter2" not in joined, "a stored secret is never echoed"


def test_ssh_host_needs_an_address(tmp_path: Path) -> None:
    assert problems(tmp_path, "hosts:\n  - name: gpu-b\n    user: me\n") == [
        "hosts.yaml:2: host 'gpu-b' field 'address': is required for an SSH host"
    ]


def test_jump_hosts_must_exist_be_ssh_and_not_loop(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """
        hosts:
          - {name: a, address: a.example, jump: nowhere}
          - {name: b, address: b.example, jump: here}
          - {name: here, transport: local}
          - {name: c, address: c.example, jump: d}
          - {name: d, address: d.example, jump: c}
        """,
    )
    joined = "\n".join(found)
    assert "hosts.yaml:3: host 'a' field 'jump': no host named 'nowhere'" in joined
    assert "hosts.yaml:4: host 'b' field 'jump': 'here' is not an SSH host" in joined
    assert "jump hosts form a loop (c -> d -> c)" in joined


def test_chained_jump_hosts_resolve(tmp_path: Path) -> None:
    inventory = load_inventory(
        write(
            tmp_path,
            """
            hosts:
              - {name: edge, address: edge.example}
              - {name: inner, address: 10.1.0.1, jump: edge}
              - {name: gpu, address: 10.2.0.1, jump: inner}
            """,
        )
    )
    gpu = inventory.get("gpu")
    assert gpu.jump_host is not None and gpu.jump_host.jump_host == inventory.get("edge")


def test_broken_files(tmp_path: Path) -> None:
    assert problems(tmp_path, "hosts:\n  - name: a\n    address: [unclosed\n")[0].startswith(
        "hosts.yaml:4: not valid YAML"
    )
    assert "expected a mapping of 'hosts' (a list of hosts)" in problems(tmp_path, "- name: a\n")[0]
    assert "'hosts' must be a list" in problems(tmp_path, "hosts: {name: a}\n")[0]
    assert problems(tmp_path, "hosts:\n  - just-a-string\n") == [
        "hosts.yaml:2: host #1 must be a mapping of fields"
    ]
    with pytest.raises(InventoryError, match="file not found"):
        load_inventory(tmp_path / "absent.yaml")
    assert load_inventory(write(tmp_path, "")).hosts == ()


def test_unknown_host_lists_the_known_ones(tmp_path: Path) -> None:
    inventory = load_inventory(write(tmp_path, "hosts:\n  - {name: a, transport: local}\n"))
    with pytest.raises(InventoryError, match=r"no host named 'b' \(known hosts: a\)"):
        inventory.get("b")


def test_hosts_file_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOSTS_FILE_ENV, str(tmp_path / "team.yaml"))
    assert default_inventory_path() == tmp_path / "team.yaml"
    monkeypatch.delenv(HOSTS_FILE_ENV)
    # The same file whichever directory a command starts in.
    monkeypatch.chdir(tmp_path)
    assert default_inventory_path() == Path(__file__).resolve().parents[2] / "hosts.yaml"


def test_jump_must_be_resolved_before_use() -> None:
    host = HostConfig(name="gpu", address="10.0.0.1", jump="bastion")
    with pytest.raises(InventoryError, match="was not resolved"):
        _ = host.jump_host
    with pytest.raises(ValueError):
        host.with_jump_host(HostConfig(name="other", address="x"))


def test_container_runtime_is_docker_or_podman(tmp_path: Path) -> None:
    inventory = load_inventory(
        write(
            tmp_path,
            """
            hosts:
              - name: gpu-a
                address: 10.0.0.5
                container_runtime: docker
              - name: gpu-b
                address: 10.0.0.6
            """,
        )
    )
    assert inventory.get("gpu-a").container_runtime == "docker"
    assert inventory.get("gpu-b").container_runtime is None
    found = problems(
        tmp_path,
        """
        hosts:
          - name: gpu-a
            address: 10.0.0.5
            container_runtime: containerd
        """,
    )
    assert found == [
        "hosts.yaml:5: host 'gpu-a' field 'container_runtime': must be one of 'docker' or 'podman'"
    ]


def test_container_mounts_are_absolute_paths_read_only_unless_rw(tmp_path: Path) -> None:
    inventory = load_inventory(
        write(
            tmp_path,
            """
            hosts:
              - name: gpu-a
                address: 10.0.0.5
                container_mounts: [/data/models, "/root/.cache/vllm:/root/.cache/vllm:rw"]
            """,
        )
    )
    assert inventory.get("gpu-a").container_mounts == (
        "/data/models",
        "/root/.cache/vllm:/root/.cache/vllm:rw",
    )
    found = problems(
        tmp_path,
        """
        hosts:
          - name: gpu-a
            address: 10.0.0.5
            container_mounts: [/ok, "data:/data", "/a:/b:/c"]
        """,
    )
    assert found == [
        "hosts.yaml:5: host 'gpu-a' field 'container_mounts': mount path 'data' must be absolute and hold "
        "no ':', ',' or newline"
    ]
