"""Fixtures of the hosts tests: the same contract runs against the local and the SSH transport."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from perflab.inventory import HostConfig
from perflab.remote import process as rp
from perflab.transport import Transport, open_transport
from tests.fixtures.sshd import SshServer


class HostFactory(Protocol):
    """Builds a host config of the parametrized transport kind; keyword arguments override fields."""

    def __call__(self, name: str = ..., **overrides: Any) -> HostConfig: ...


def local_host(tmp_path: Path, name: str = "local-test", **overrides: Any) -> HostConfig:
    fields: dict[str, Any] = {"name": name, "transport": "local", "workdir": str(tmp_path / "work" / name)}
    fields.update(overrides)
    return HostConfig(**fields)


@pytest.fixture(params=["local", "ssh"])
def make_host(request: pytest.FixtureRequest, tmp_path: Path) -> HostFactory:
    """Host configs for the local transport, then for the test sshd; each in a fresh workdir."""
    if request.param == "ssh":
        server: SshServer = request.getfixturevalue("sshd")

        def make_ssh(name: str = "sshd-test", **overrides: Any) -> HostConfig:
            overrides.setdefault("workdir", str(tmp_path / "work" / name))
            return server.host_config(name, **overrides)

        return make_ssh

    def make_local(name: str = "local-test", **overrides: Any) -> HostConfig:
        return local_host(tmp_path, name, **overrides)

    return make_local


@pytest.fixture
def transport(make_host: HostFactory) -> Iterator[Transport]:
    """A transport to a fresh workdir; processes a failing test left running there are stopped after it."""
    with open_transport(make_host()) as opened:
        yield opened
        rp.cleanup_leftovers(opened, rp.find_leftovers(opened), grace_s=1)


@pytest.fixture
def http_server() -> Iterator[int]:
    """The port of an HTTP server on loopback answering every GET with "hello from <path>"."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = f"hello from {self.path}".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()
