"""The Hosts page with AppTest against real hosts: a simulated local host, this machine (no GPU
tools), and a real sshd on loopback reached with a wrong key, with an unknown host key, and on a
closed port."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.fixtures.sshd import SshServer, free_port, keygen
from tests.ui.conftest import run_app, texts

HOSTS_PAGE = "pages/hosts.py"


def ssh_entry(sshd: SshServer, name: str, tmp_path: Path, **overrides: object) -> dict[str, object]:
    entry: dict[str, object] = {
        "name": name,
        "address": sshd.address,
        "port": sshd.port,
        "user": sshd.user,
        "auth": {"key_file": str(sshd.client_key), "agent": False},
        "known_hosts": str(sshd.known_hosts),
        "workdir": str(tmp_path / "work" / name),
        "connect_timeout_s": 3,
        "connect_attempts": 1,
    }
    entry.update(overrides)
    return entry


def write_hosts(path: Path, entries: list[dict[str, object]]) -> Path:
    path.write_text(yaml.safe_dump({"hosts": entries}, sort_keys=False))
    return path


def test_each_failure_gets_its_own_message(empty_db: str, app_env, sshd: SshServer, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    empty_known_hosts = tmp_path / "known_hosts_empty"
    empty_known_hosts.write_text("")
    hosts = write_hosts(
        tmp_path / "hosts.yaml",
        [
            {
                "name": "local-sim",
                "transport": "local",
                "workdir": str(tmp_path / "work" / "sim"),
                "simulate": {"accelerator": "H100", "count": 2},
            },
            {"name": "this-machine", "transport": "local", "workdir": str(tmp_path / "work" / "local")},
            ssh_entry(
                sshd,
                "wrong-key",
                tmp_path,
                auth={"key_file": str(keygen(tmp_path / "stranger")), "agent": False},
            ),
            ssh_entry(sshd, "new-key", tmp_path, known_hosts=str(empty_known_hosts)),
            ssh_entry(sshd, "closed-port", tmp_path, port=free_port()),
        ],
    )
    app_env(empty_db, hosts)
    app = run_app(HOSTS_PAGE)
    assert not app.exception
    assert [header.value for header in app.subheader] == [
        ":gray[:material/help:] local-sim (simulated)",
        ":gray[:material/help:] this-machine",
        ":gray[:material/help:] wrong-key",
        ":gray[:material/help:] new-key",
        ":gray[:material/help:] closed-port",
    ]
    assert len([text for text in texts(app.info) if text.startswith("Not probed yet")]) == 5

    app.button(key="hosts_probe_all").click().run(timeout=120)
    assert not app.exception
    assert [header.value for header in app.subheader] == [
        ":green[:material/check_circle:] local-sim (simulated)",
        ":green[:material/check_circle:] this-machine",
        ":red[:material/cancel:] wrong-key",
        ":red[:material/cancel:] new-key",
        ":red[:material/cancel:] closed-port",
    ]
    errors = texts(app.error)
    assert len(errors) == 3
    assert errors[0].startswith("Login refused:")
    assert errors[1].startswith("Unknown host key:") and "SHA256:" in errors[1]
    assert errors[2].startswith("Unreachable:")
    markdown = texts(app.markdown)
    assert any("**Accelerators:** 2× NVIDIA H100 80GB HBM3" in text and "vLLM" in text for text in markdown)
    assert any("**Accelerators:** CPU (" in text and "NUMA node" in text for text in markdown), (
        "a host without nvidia-smi or npu-smi is a CPU host"
    )
    frames = [frame.value for frame in app.dataframe]
    gpus = next(frame for frame in frames if "GPU" in frame.columns)
    assert list(gpus["GPU"]) == [0, 1] and set(gpus["Memory total (MiB)"]) == {81559}
    numa = next(frame for frame in frames if "NUMA node" in frame.columns)
    assert list(numa["NUMA node"])[0] == 0 and str(numa["Model"][0]).startswith("CPU")
    assert any("Simulated host: 2× H100" in text for text in texts(app.caption))


def test_reprobe_one_host_and_reload(empty_db: str, app_env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    hosts = write_hosts(
        tmp_path / "hosts.yaml",
        [
            {
                "name": "local-sim",
                "transport": "local",
                "workdir": str(tmp_path / "work"),
                "simulate": {"accelerator": "910B", "count": 4},
            }
        ],
    )
    app_env(empty_db, hosts)
    app = run_app(HOSTS_PAGE)
    assert app.button(key="hosts_probe_local-sim").label == "Probe"  # never probed: nothing to re-probe
    app.button(key="hosts_probe_local-sim").click().run(timeout=60)
    assert not app.exception
    assert app.button(key="hosts_probe_local-sim").label == "Re-probe"
    assert [header.value for header in app.subheader] == [
        ":green[:material/check_circle:] local-sim (simulated)"
    ]
    reloaded = run_app(HOSTS_PAGE)
    assert any("**Accelerators:** 4× 910B3" in text and "MindIE" in text for text in texts(reloaded.markdown))
    assert len(reloaded.dataframe[0].value) == 4
