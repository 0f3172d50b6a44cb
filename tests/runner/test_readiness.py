"""Readiness trusts a health answer only while the replica's own process runs: another process may
have bound the port the engine failed to bind."""

from __future__ import annotations

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
from tests.fixtures.sim_server import SimServerFactory


def test_a_dead_engine_is_not_ready_because_something_else_answers_on_its_port(
    tmp_path: Path, sim_server: SimServerFactory
) -> None:
    foreign_port = int(sim_server(model="Qwen/Qwen3-8B").rsplit(":", 1)[1])  # a server that is not the engine
    adapter = get_adapter("vllm")
    host = HostConfig(name="here", transport="local", workdir=str(tmp_path / "w"))
    log_line = "OSError: [Errno 98] Address already in use"
    with open_transport(host) as transport, Endpoints(transport, adapter) as endpoints:
        process = rp.start_detached(
            transport, ["sh", "-c", f"echo '{log_line}'; exit 1"], run_key="run-ready", name="engine-0"
        )
        replica = Replica(ReplicaPlan(0, (0,), foreign_port), process)
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
