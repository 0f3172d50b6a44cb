"""Readiness trusts a health answer only from the replica's own live process: another process may have
bound the port after perflab chose it, and the engine then fails to bind it."""

from __future__ import annotations

import sys
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
from perflab.transport.base import Transport
from tests.fixtures.real_vllm import free_port, healthy
from tests.fixtures.sim_server import SimServerFactory

ADAPTER = get_adapter("vllm")


@pytest.fixture
def transport(tmp_path: Path) -> Iterator[Transport]:
    with open_transport(HostConfig(name="here", transport="local", workdir=str(tmp_path / "w"))) as opened:
        yield opened


def _wait(transport: Transport, replica: Replica, deadline_s: float) -> None:
    with Endpoints(transport, ADAPTER) as endpoints:
        wait_until_ready(
            transport,
            ADAPTER,
            [replica],
            endpoints=endpoints,
            logs={replica.name: LogFollower(transport, replica.process)},
            deadline_s=deadline_s,
            poll_s=0.1,
            interrupt=lambda: None,
            on_progress=lambda ready, line: None,
        )


def _foreign_port(sim_server: SimServerFactory) -> int:
    """The port of a server that is not the engine, answering 200 on /health."""
    url = sim_server(model="Qwen/Qwen3-8B")
    assert healthy(url)
    return int(url.rsplit(":", 1)[1])


def test_a_dead_engine_is_not_ready_because_something_else_answers_on_its_port(
    transport: Transport, sim_server: SimServerFactory
) -> None:
    port = _foreign_port(sim_server)
    line = "OSError: [Errno 98] Address already in use"
    process = rp.start_detached(
        transport, ["sh", "-c", f"echo '{line}'; exit 1"], run_key="r1", name="engine-0"
    )
    while rp.process_state(transport, process).running:
        pass
    with pytest.raises(RunFailed) as failed:
        _wait(transport, Replica(ReplicaPlan(0, (0,), port), process), deadline_s=30.0)
    assert failed.value.failure_class == "port_in_use"


def test_a_live_engine_is_not_ready_while_another_process_answers_on_its_port(
    transport: Transport, sim_server: SimServerFactory
) -> None:
    port = _foreign_port(sim_server)
    process = rp.start_detached(transport, ["sleep", "60"], run_key="r2", name="engine-0")
    try:
        with pytest.raises(RunFailed) as failed:
            _wait(transport, Replica(ReplicaPlan(0, (0,), port), process), deadline_s=3.0)
        assert failed.value.failure_class == "timeout"
    finally:
        rp.stop(transport, process, grace_s=1.0)


def test_an_engine_answering_on_its_own_port_is_ready(transport: Transport, tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "health").write_text("ok")
    port = free_port()
    argv = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    process = rp.start_detached(transport, argv, run_key="r3", name="engine-0", cwd=str(site))
    try:
        _wait(transport, Replica(ReplicaPlan(0, (0,), port), process), deadline_s=60.0)
    finally:
        rp.stop(transport, process, grace_s=1.0)
