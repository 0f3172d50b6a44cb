"""``StreamingTransport``: an httpx transport made for many concurrent streaming responses.

httpx stays the API (``httpx.AsyncClient(transport=StreamingTransport())``); this transport replaces
httpcore's per-chunk machinery with a selector-driven socket per connection (see ``channel`` and
``http1``) and a keep-alive pool per origin. Response bodies are yielded as the de-framed buffers the
socket produced, and ``response.extensions[TIMING_EXTENSION]`` is a ``ResponseTiming`` telling when
the request was written and when the buffer just yielded arrived — by the kernel's receive
timestamp where there is one — so latency is measured at the socket rather than whenever the
consumer got scheduled. ``response.stream`` is a ``TimedBody``; besides ``aiter_raw`` it offers
``drain_into(sink)``, which hands every buffer to a callback straight from the socket callback — no
task wake-up per read, which is what lets one process follow 10⁵ chunks per second.

``preconnect(url, count)`` opens idle connections ahead of a burst, so the burst's requests do not
pay their TCP handshakes (and the server its accepts) while the first ones are being timed.
``read_sources`` counts reads per time source (``kernel``, ``poll``, ``read``).

Only plain HTTP/1.1 (and HTTPS through ``ssl``) is spoken; proxies are not used.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import AsyncIterator, Callable, Dict, List, Optional, Set, Tuple

import httpx

from perflab.bench import rxstamp
from perflab.bench.channel import ReadSources, open_channel, open_protocol_channel
from perflab.bench.http1 import ConnectionDropped, HTTP1Connection, ProtocolViolation

TIMING_EXTENSION = "perflab.timing"

Origin = Tuple[str, str, int]
PRECONNECT_PARALLEL = 64


def _origin(url: httpx.URL) -> Origin:
    return (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))


class ResponseTiming:
    """When the request went out and when the latest body buffer arrived (``perf_counter`` seconds)."""

    __slots__ = ("sent_at", "connect_s", "arrival")

    def __init__(self, sent_at: float, connect_s: Optional[float]) -> None:
        self.sent_at = sent_at
        self.connect_s = connect_s
        self.arrival = sent_at


def _translate(exc: BaseException, request: httpx.Request) -> BaseException:
    """Connection-level failures as httpx errors; anything else (a sink's own exception) unchanged."""
    if isinstance(exc, (ConnectionDropped, ProtocolViolation)):
        return httpx.RemoteProtocolError(str(exc), request=request)
    if isinstance(exc, OSError):
        return httpx.ReadError(str(exc) or type(exc).__name__, request=request)
    return exc


async def _wait_for_progress(conn: HTTP1Connection, timeout: Optional[float], request: httpx.Request) -> None:
    if not await conn.wait(timeout):
        raise httpx.ReadTimeout(f"no data from the server for {timeout} s", request=request)


class TimedBody(httpx.AsyncByteStream):
    """Yields body buffers as they were read, updating ``timing.arrival`` before each one."""

    def __init__(
        self,
        transport: "StreamingTransport",
        origin: Origin,
        conn: HTTP1Connection,
        timing: ResponseTiming,
        read_timeout: Optional[float],
        request: httpx.Request,
    ) -> None:
        self._transport = transport
        self._origin = origin
        self._conn = conn
        self._timing = timing
        self._read_timeout = read_timeout
        self._request = request
        self._released = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        pieces = conn.pieces
        timing = self._timing
        while True:
            if pieces:
                data, arrived = pieces.popleft()
                conn.consumed(len(data))
                timing.arrival = arrived
                yield data
            elif conn.error is not None:
                raise _translate(conn.error, self._request)
            elif conn.finished:
                return
            else:
                await _wait_for_progress(conn, self._read_timeout, self._request)

    async def drain_into(self, sink: Callable[[bytes, float], None]) -> None:
        """Pass every remaining buffer to ``sink(buffer, arrival_time)`` until the body ends.

        Raises the transport error that ended the body early, or the exception the sink raised.
        """
        conn = self._conn
        conn.set_sink(sink)
        while conn.error is None and not conn.finished:
            await _wait_for_progress(conn, self._read_timeout, self._request)
        if conn.error is not None:
            raise _translate(conn.error, self._request)

    async def aclose(self) -> None:
        if not self._released:
            self._released = True
            self._transport.release(self._origin, self._conn)


def render_request(request: httpx.Request, body: bytes) -> bytes:
    """Serialize an httpx request as HTTP/1.1 bytes (a streamed body is sent with Content-Length)."""
    parts: List[bytes] = [request.method.encode("ascii"), b" ", request.url.raw_path, b" HTTP/1.1\r\n"]
    has_length = False
    for name, value in request.headers.raw:
        lowered = name.lower()
        if lowered == b"transfer-encoding":
            continue
        if lowered == b"content-length":
            has_length = True
        parts += [name, b": ", value, b"\r\n"]
    if body and not has_length:
        parts += [b"Content-Length: ", str(len(body)).encode("ascii"), b"\r\n"]
    parts += [b"\r\n", body]
    return b"".join(parts)


class StreamingTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 keep-alive transport for httpx, tuned for thousands of concurrent SSE streams."""

    def __init__(self, ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self._ssl_context = ssl_context
        self._idle: Dict[Origin, List[HTTP1Connection]] = {}
        self._busy: Set[HTTP1Connection] = set()
        self._stamp_holder = rxstamp.hold_timestamping()
        self.read_sources: ReadSources = {}

    async def preconnect(self, url: httpx.URL, count: int, timeout: Optional[float] = None) -> int:
        """Open connections to ``url``'s origin until ``count`` are idle there; return how many are.

        Connections that cannot be opened are left to the requests, which then report the error.
        """
        origin = _origin(url)
        idle = self._idle.setdefault(origin, [])
        idle[:] = [conn for conn in idle if conn.reusable]
        missing = count - len(idle)
        if missing <= 0:
            return len(idle)
        gate = asyncio.Semaphore(PRECONNECT_PARALLEL)

        async def one() -> None:
            async with gate:
                try:
                    conn = await self._connect(origin, timeout, None)
                except (httpx.TransportError, OSError):
                    return
                idle.append(conn)

        await asyncio.gather(*[one() for _ in range(missing)])
        return len(idle)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {request.url.scheme!r}", request=request)
        origin = _origin(request.url)
        timeouts = request.extensions.get("timeout", {})
        payload = render_request(request, await request.aread())
        method = request.method.encode("ascii")
        conn, connect_s = await self._acquire(origin, timeouts.get("connect"), request)
        try:
            sent_at = await self._exchange(conn, method, payload, timeouts.get("read"), request)
        except httpx.RemoteProtocolError:
            if connect_s is not None:
                raise
            # The server had closed this idle keep-alive connection: retry once on a new one.
            conn, connect_s = await self._acquire(origin, timeouts.get("connect"), request, fresh=True)
            sent_at = await self._exchange(conn, method, payload, timeouts.get("read"), request)
        head = conn.head
        assert head is not None
        timing = ResponseTiming(sent_at, connect_s)
        stream = TimedBody(self, origin, conn, timing, timeouts.get("read"), request)
        return httpx.Response(
            head.status,
            headers=head.headers,
            stream=stream,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": head.reason, TIMING_EXTENSION: timing},
        )

    async def _exchange(
        self,
        conn: HTTP1Connection,
        method: bytes,
        payload: bytes,
        timeout: Optional[float],
        request: httpx.Request,
    ) -> float:
        """Send the request and wait for the response head; return when the request was written."""
        sent_at = conn.send(method, payload)
        try:
            while conn.head is None:
                if conn.error is not None:
                    raise _translate(conn.error, request)
                await _wait_for_progress(conn, timeout, request)
        except BaseException:
            self._discard(conn)
            raise
        return sent_at

    async def _acquire(
        self, origin: Origin, timeout: Optional[float], request: httpx.Request, fresh: bool = False
    ) -> Tuple[HTTP1Connection, Optional[float]]:
        idle = self._idle.get(origin)
        while idle and not fresh:
            conn = idle.pop()
            if conn.reusable:
                self._busy.add(conn)
                return conn, None
            conn.close()
        started = time.perf_counter()
        conn = await self._connect(origin, timeout, request)
        self._busy.add(conn)
        return conn, time.perf_counter() - started

    async def _connect(
        self, origin: Origin, timeout: Optional[float], request: Optional[httpx.Request]
    ) -> HTTP1Connection:
        scheme, host, port = origin
        if scheme == "https":
            if self._ssl_context is None:
                self._ssl_context = ssl.create_default_context()
            opening = open_protocol_channel(host, port, self._ssl_context, self.read_sources)
        else:
            opening = open_channel(host, port, self.read_sources)
        try:
            conn = await asyncio.wait_for(opening, timeout)
        except asyncio.TimeoutError:
            raise httpx.ConnectTimeout(
                f"connecting to {host}:{port} took over {timeout} s", request=request
            ) from None
        except OSError as exc:
            raise httpx.ConnectError(
                f"cannot connect to {host}:{port}: {exc.strerror or exc}", request=request
            ) from exc
        return conn

    def release(self, origin: Origin, conn: HTTP1Connection) -> None:
        """Return a connection after its response body was consumed or abandoned."""
        self._busy.discard(conn)
        if conn.reusable:
            self._idle.setdefault(origin, []).append(conn)
        else:
            conn.close()

    def _discard(self, conn: HTTP1Connection) -> None:
        self._busy.discard(conn)
        conn.close()

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()
        for conn in list(self._busy):
            conn.close()
        self._busy.clear()
        if self._stamp_holder is not None:
            self._stamp_holder.close()
            self._stamp_holder = None
