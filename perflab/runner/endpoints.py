"""HTTP access from the app to each replica's health and metrics endpoints, through the transport.

Each replica port gets a forward (:meth:`Transport.forward`: the same port on the app's own machine, an
SSH ``direct-tcpip`` tunnel otherwise) that stays open for the whole run; one httpx client serves all.
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

REQUEST_TIMEOUT_S = 3.0


class Endpoints:
    """Context manager over the forwards and the HTTP client of a run's replicas."""

    def __init__(self, transport: Transport, adapter: EngineAdapter) -> None:
        self.transport = transport
        self.adapter = adapter
        self._stack = ExitStack()
        self._local_ports: dict[int, int] = {}
        self._lock = threading.Lock()
        self._client = httpx.Client(timeout=REQUEST_TIMEOUT_S, trust_env=False)

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

    def _get(self, replica: Replica, path: str) -> httpx.Response | None:
        try:
            return self._client.get(self._url(replica, path))
        except (httpx.HTTPError, TransportError, OSError):
            return None

    def healthy(self, replica: Replica) -> bool:
        """Whether the replica's health endpoint answers 200 now."""
        response = self._get(replica, self.adapter.health_path)
        return response is not None and response.status_code == 200

    def metrics_text(self, replica: Replica) -> str | None:
        """The replica's Prometheus exposition text, or None (no metrics, or no answer)."""
        if self.adapter.metrics is None:
            return None
        response = self._get(replica, self.adapter.metrics.path)
        if response is None or response.status_code != 200:
            return None
        return response.text
