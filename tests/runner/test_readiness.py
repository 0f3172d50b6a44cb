"""Readiness trusts a health answer only while the replica's own process runs: another process may
have bound the port the engine failed to bind."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from perflab.engines import ReplicaPlan, get_adapter
from perflab.inventory import HostConfig
from perflab.remote import process as rp
from perflab.runner.endpoints import Endpoints
from perflab.runner.errors import RunFailed
from perflab.runner.launch import Replica
from perflab.runner.logs import LogFollower
from perflab.runner.readiness import wait_until_ready
from perflab.transport import open_transport


class _Healthy(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server hook name
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def foreign_server() -> Iterator[int]:
    """A server that is not the engine, answering 200 to every GET on a loopback port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Healthy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def test_a_dead_engine_is_not_ready_because_something_else_answers_on_its_port(
    tmp_path: Path, foreign_server: int
) -> None:
    adapter = get_adapter("vllm")
    host = HostConfig(name="here", transport="local", workdir=str(tmp_path / "w"))
    log_line = "OSError: [Errno 98] Address already in use"
    with open_transport(host) as transport, Endpoints(transport, adapter) as endpoints:
        process = rp.start_detached(
            transport, ["sh", "-c", f"echo '{log_line}'; exit 1"], run_key="run-ready", name="engine-0"
        )
        replica = Replica(ReplicaPlan(0, (0,), foreign_server), process)
        assert endpoints.healthy(replica), "the foreign server answers on the replica's port"
        while rp.process_state(transport, process).running:
            pass
        with pytest.raises(RunFailed) as failed:
            wait_until_ready(
                transport,
                adapter,
                [replica],
                endpoints=endpoints,
                logs={replica.name: LogFollower(transport, process)},
                deadline_s=30.0,
                poll_s=0.1,
                interrupt=lambda: None,
                on_progress=lambda ready, line: None,
            )
    assert failed.value.failure_class == "port_in_use"
