"""A host's ``auth.key_file`` or secret file that is missing or unreadable on this machine: named by
``hosts list`` (table and JSON, exit status 1) and on the Hosts page, from the config alone, without
connecting anywhere."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from perflab.cli import main
from perflab.host_files import host_file_problems
from perflab.inventory import HostConfig
from perflab.views.hosts import host_view
from tests.fixtures.sshd import keygen
from tests.ui.conftest import run_app, texts


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A listening loopback socket that no one should connect to."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.setblocking(False)
        yield server


def write_hosts(path: Path, port: int, key_files: dict[str, str]) -> Path:
    """hosts.yaml: a local host first, then one SSH host per key file (all at ``port``)."""
    entries: list[dict[str, object]] = [{"name": "here", "transport": "local"}]
    entries += [
        {"name": name, "address": "127.0.0.1", "port": port, "auth": {"key_file": key_file, "agent": False}}
        for name, key_file in key_files.items()
    ]
    path.write_text(yaml.safe_dump({"hosts": entries}, sort_keys=False))
    return path


def hosts_list(capsys: pytest.CaptureFixture[str], path: Path, *args: str) -> tuple[int, str, str]:
    code = main(["hosts", "--file", str(path), "list", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_not_contacted(listener: socket.socket) -> None:
    with pytest.raises(BlockingIOError):
        listener.accept()


def test_present_key_files_list_cleanly(
    tmp_path: Path, listener: socket.socket, capsys: pytest.CaptureFixture[str]
) -> None:
    key = keygen(tmp_path / "id_ed25519")
    path = write_hosts(tmp_path / "hosts.yaml", listener.getsockname()[1], {"gpu-a": str(key)})

    code, out, err = hosts_list(capsys, path)
    assert (code, err) == (0, "")
    assert [line.split()[0] for line in out.splitlines()] == ["NAME", "here", "gpu-a"]

    code, out, err = hosts_list(capsys, path, "--json")
    assert (code, err) == (0, "")
    assert [(host["name"], host["problems"]) for host in json.loads(out)] == [("here", []), ("gpu-a", [])]
    assert_not_contacted(listener)


def test_missing_key_files_are_named_with_line_host_and_field(
    tmp_path: Path, listener: socket.socket, capsys: pytest.CaptureFixture[str]
) -> None:
    good = keygen(tmp_path / "good")
    folder = tmp_path / "keys"
    folder.mkdir()
    missing = tmp_path / "absent"
    port = listener.getsockname()[1]
    path = write_hosts(
        tmp_path / "hosts.yaml", port, {"gpu-a": str(missing), "gpu-b": str(good), "gpu-c": str(folder)}
    )
    expected = [
        f"hosts.yaml:8: host 'gpu-a' field 'auth.key_file': {missing} does not exist",
        f"hosts.yaml:20: host 'gpu-c' field 'auth.key_file': {folder} is not a file",
    ]

    code, out, err = hosts_list(capsys, path)
    assert code == 1, "a host that cannot log in is a problem of the listing"
    assert [line.split()[0] for line in out.splitlines()] == ["NAME", "here", "gpu-a", "gpu-b", "gpu-c"]
    assert err.splitlines() == expected

    code, out, err = hosts_list(capsys, path, "--json")
    assert code == 1 and err.splitlines() == expected
    assert {host["name"]: host["problems"] for host in json.loads(out)} == {
        "here": [],
        "gpu-a": expected[:1],
        "gpu-b": [],
        "gpu-c": expected[1:],
    }
    assert_not_contacted(listener)
    missing.write_text(good.read_text())
    folder.rmdir()
    folder.write_text(good.read_text())
    code, _, err = hosts_list(capsys, path)
    assert (code, err) == (0, ""), "fixed files are no longer reported"


def test_a_key_file_under_home_is_named_by_its_full_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    host = HostConfig(name="gpu-a", address="10.0.0.5", auth={"key_file": "~/.ssh/gpu-a"})  # type: ignore[arg-type]

    [problem] = host_file_problems(host)

    assert str(problem) == f"host 'gpu-a' field 'auth.key_file': {tmp_path}/.ssh/gpu-a does not exist"
    (tmp_path / ".ssh").mkdir()
    keygen(tmp_path / ".ssh" / "gpu-a")
    assert host_file_problems(host) == []


def test_missing_secret_files_are_named_for_every_transport(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = tmp_path / "hf_token"
    token.write_text("hf_0123456789\n")
    missing = tmp_path / "absent_token"
    entries = [
        {"name": "here", "transport": "local", "secrets": {"HF_TOKEN": {"file": str(missing)}}},
        {"name": "gpu-a", "address": "127.0.0.1", "secrets": {"HF_TOKEN": {"file": str(token)},
                                                              "API_KEY": {"env": "PERFLAB_TEST_KEY"}}},
    ]  # fmt: skip
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump({"hosts": entries}, sort_keys=False))

    code, out, err = hosts_list(capsys, path)

    assert code == 1
    assert err == f"hosts.yaml:6: host 'here' field 'secrets.HF_TOKEN.file': {missing} does not exist\n"
    assert "hf_0123456789" not in out + err
    missing.write_text("hf_0123456789\n")
    assert hosts_list(capsys, path)[0] == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file whatever its permissions")
def test_an_unreadable_key_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = keygen(tmp_path / "locked")
    key.chmod(0)
    path = write_hosts(tmp_path / "hosts.yaml", 22, {"gpu-a": str(key)})

    code, _, err = hosts_list(capsys, path)

    assert code == 1
    assert (
        err == f"hosts.yaml:8: host 'gpu-a' field 'auth.key_file': {key} cannot be read: Permission denied\n"
    )


def test_the_hosts_page_shows_the_same_problem(
    tmp_path: Path, suite_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "absent"
    path = write_hosts(tmp_path / "hosts.yaml", 22, {"gpu-a": str(missing)})
    monkeypatch.setenv("PERFLAB_DATABASE_URL", suite_database_url)
    monkeypatch.setenv("PERFLAB_HOSTS", str(path))
    monkeypatch.setenv("PERFLAB_APP_WORKER", "0")
    problem = f"host 'gpu-a' field 'auth.key_file': {missing} does not exist"

    app = run_app("pages/hosts.py")

    assert not app.exception
    assert texts(app.main.warning) == [problem]
    config = HostConfig(name="gpu-a", address="127.0.0.1", auth={"key_file": str(missing)})  # type: ignore[arg-type]
    assert host_view(config, None).file_problems == [problem]
