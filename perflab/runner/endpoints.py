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


class MetricsUnread(Exception):
    """A replica's metrics endpoint gave no exposition text; the message says why."""


class Endpoints:
    """Context manager over the forwards and the HTTP client of a run's replicas."""

    def __init__(self, transport: Transport, adapter: EngineAdapter) -> None:
        self.transport = transport
        self.adapter = adapter
        self._stack = ExitStack()
        self._local_ports: dict[int, int] = {}
        self._lock = threading.Lock()
        self._client = httpx.Client(timeout=HEALTH_TIMEOUT_S, trust_env=False)

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

    def healthy(self, replica: Replica) -> bool:
        """Whether the replica's health endpoint answers 200 now."""
        try:
            response = self._client.get(self._url(replica, self.adapter.health_path))
        except (httpx.HTTPError, TransportError, OSError):
            return False
        return response.status_code == 200

    def metrics_text(self, replica: Replica) -> str | None:
        """The replica's Prometheus exposition text; None when its engine exposes no metrics. Raises
        :class:`MetricsUnread`, saying why, when the endpoint does not answer with it."""
        if self.adapter.metrics is None:
            return None
        try:
            response = self._client.get(
                self._url(replica, self.adapter.metrics.path), timeout=METRICS_TIMEOUT_S
            )
        except httpx.TimeoutException:
            raise MetricsUnread(f"no answer within {METRICS_TIMEOUT_S:g} s") from None
        except (httpx.HTTPError, TransportError, OSError) as exc:
            raise MetricsUnread(str(exc) or type(exc).__name__) from None
        if response.status_code != 200:
            raise MetricsUnread(f"HTTP {response.status_code}")
        return response.text
