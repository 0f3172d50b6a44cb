"""HTTP access from the app to each replica's health and metrics endpoints, through the transport.

Each replica port gets a forward (:meth:`Transport.forward`: the same port on the app's own machine, an
SSH ``direct-tcpip`` tunnel otherwise) that stays open for the whole run; one httpx client serves all.
A health poll gives up after :data:`HEALTH_TIMEOUT_S` (the next poll asks again); a metrics scrape,
read by the sampler's own thread from an engine that may be busy serving on a loaded host, waits up to
:data:`METRICS_TIMEOUT_S` (vLLM 0.32's exposition is about 50 kB, rendered by its API server between
the streams it serves).
"""

from __future__ import annotations

import threading
from contextlib import ExitStack
from types import TracebackType

import httpx

from perflab.engines import EngineAdapter
from perflab.runner.launch import Replica
from perflab.transport.base import Transport
from perflab.transport.errors import TransportError

HEALTH_TIMEOUT_S = 3.0
METRICS_TIMEOUT_S = 15.0


class NoAnswer(Exception):
    """A replica's endpoint gave no usable answer; the message says why."""


class Endpoints:
    """Context manager over the forwards and the HTTP client of a run's replicas."""

    def __init__(self, transport: Transport, adapter: EngineAdapter) -> None:
        self.transport = transport
        self.adapter = adapter
        self._stack = ExitStack()
        self._local_ports: dict[int, int] = {}
        self._lock = threading.Lock()
        self._client = httpx.Client(trust_env=False)

    def __enter__(self) -> Endpoints:
        self._stack.callback(self._client.close)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stack.close()

    def _url(self, replica: Replica, path: str) -> str:
        with self._lock:
            local = self._local_ports.get(replica.port)
            if local is None:
                local = self._stack.enter_context(self.transport.forward(replica.port))
                self._local_ports[replica.port] = local
        return f"http://127.0.0.1:{local}{path}"

    def _get(self, replica: Replica, path: str, timeout: float) -> httpx.Response:
        """The replica's answer to ``GET path``; :class:`NoAnswer`, saying why, when none came."""
        try:
            return self._client.get(self._url(replica, path), timeout=timeout)
        except httpx.TimeoutException:
            raise NoAnswer(f"no answer within {timeout:g} s") from None
        except (httpx.HTTPError, TransportError, OSError) as exc:
            raise NoAnswer(str(exc) or type(exc).__name__) from None

    def healthy(self, replica: Replica) -> bool:
        """Whether the replica's health endpoint answers 200 now."""
        try:
            return self._get(replica, self.adapter.health_path, HEALTH_TIMEOUT_S).status_code == 200
        except NoAnswer:
            return False

    def metrics_text(self, replica: Replica) -> str | None:
        """The replica's Prometheus exposition text; None when its engine exposes no metrics. Raises
        :class:`NoAnswer`, saying why, when the endpoint does not answer with it."""
        if self.adapter.metrics is None:
            return None
        response = self._get(replica, self.adapter.metrics.path, METRICS_TIMEOUT_S)
        if response.status_code != 200:
            raise NoAnswer(f"HTTP {response.status_code}")
        return response.text
