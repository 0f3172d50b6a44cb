"""The sampler's scrape of an engine's metrics, against a real HTTP server with known answers.

An engine busy serving on a loaded host may render its metrics slowly: a scrape that answers after
longer than a health poll may take still gives the round its engine sample. An endpoint that answers
with an error or not at all loses that reading only, and its first loss is logged with the reason.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from perflab.engines import get_adapter
from perflab.engines.replicas import ReplicaPlan
from perflab.inventory import HostConfig
from perflab.remote.process import RemoteProcess
from perflab.runner.endpoints import HEALTH_TIMEOUT_S, Endpoints
from perflab.runner.launch import Replica
from perflab.runner.sampling import Sampler
from perflab.transport import open_transport
from perflab.transport.base import Transport
from tests.fixtures.polling import wait_until

GAUGES = (
    'vllm:num_requests_running{engine="0",model_name="m"} 3.0\n'
    'vllm:num_requests_waiting{engine="0",model_name="m"} 1.0\n'
    'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5\n'
)
SLOW_S = HEALTH_TIMEOUT_S + 1.5


class _Engine(BaseHTTPRequestHandler):
    """``/metrics`` after ``server.delay_s`` with ``server.status`` (the gauges when 200)."""

    def do_GET(self) -> None:
        self.server.scrapes += 1  # type: ignore[attr-defined]
        time.sleep(self.server.delay_s)  # type: ignore[attr-defined]
        status = self.server.status  # type: ignore[attr-defined]
        body = (GAUGES if status == 200 else "busy\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def engine_server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Engine)
    server.delay_s = 0.0  # type: ignore[attr-defined]
    server.status = 200  # type: ignore[attr-defined]
    server.scrapes = 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Transport]:
    with open_transport(HostConfig(name="here", transport="local", workdir=str(tmp_path / "w"))) as opened:
        yield opened


class _BrokenStore:
    """A run's store whose writes fail with an error the sampler does not expect."""

    run_id = 7

    def add_samples(self, samples: object) -> None:
        raise RuntimeError("the store broke")


def _sampler(transport: Transport, endpoints: Endpoints, port: int) -> Sampler:
    replica = Replica(
        plan=ReplicaPlan(index=0, gpu_ids=(0,), port=port),
        process=RemoteProcess(
            host_name="here", run_key="k", name="engine-0", run_dir="/nonexistent", pid=1, start_time="0"
        ),
    )
    return Sampler(
        transport=transport,
        adapter=get_adapter("vllm"),
        endpoints=endpoints,
        replicas=[replica],
        gpu_ids=[0],
        vendor="cpu",
        store=_BrokenStore(),  # type: ignore[arg-type]  # take() stores nothing; a round fails storing
        interval_s=0.2,
    )


def _engine_samples(sampler: Sampler) -> list[dict[str, object]]:
    return [sample for sample in sampler.take() if sample["source"] == "engine"]


def test_a_slow_scrape_of_a_busy_engine_still_samples_its_gauges(
    engine_server: ThreadingHTTPServer, local: Transport
) -> None:
    engine_server.delay_s = SLOW_S  # type: ignore[attr-defined]
    with Endpoints(local, get_adapter("vllm")) as endpoints:
        (sample,) = _engine_samples(_sampler(local, endpoints, engine_server.server_port))
    assert sample["values"] == {"replica": 0, "running": 3.0, "waiting": 1.0, "kv_cache_usage": 0.5}


def test_an_endpoint_answering_an_error_loses_its_reading_and_says_why_once(
    engine_server: ThreadingHTTPServer, local: Transport, caplog: pytest.LogCaptureFixture
) -> None:
    engine_server.status = 503  # type: ignore[attr-defined]
    with Endpoints(local, get_adapter("vllm")) as endpoints, caplog.at_level(logging.WARNING):
        sampler = _sampler(local, endpoints, engine_server.server_port)
        assert _engine_samples(sampler) == [] and _engine_samples(sampler) == []
        engine_server.status = 200  # type: ignore[attr-defined]
        (sample,) = _engine_samples(sampler)
    assert sample["values"]["running"] == 3.0  # type: ignore[index]
    warnings = [record.getMessage() for record in caplog.records if "engine metrics" in record.getMessage()]
    assert warnings == [
        "run 7: reading replica 0's engine metrics failed (HTTP 503); the sampler tries again each round"
    ]


def test_a_round_failing_unexpectedly_is_logged_once_and_sampling_goes_on(
    engine_server: ThreadingHTTPServer, local: Transport, caplog: pytest.LogCaptureFixture
) -> None:
    endpoints = Endpoints(local, get_adapter("vllm"))
    with endpoints, caplog.at_level(logging.WARNING), _sampler(local, endpoints, engine_server.server_port):
        wait_until(
            lambda: engine_server.scrapes >= 3,  # type: ignore[attr-defined]
            60,
            interval_s=0.05,
            failure="the sampler scraped fewer than three times",
        )
    failures = [record for record in caplog.records if "a sampling round failed" in record.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info is not None
