"""A small HTTP/1.1 server on the asyncio loop, built for thousands of concurrent SSE streams.

One :class:`HttpProtocol` per connection (:class:`~perflab.sim.sockets.Connection`) parses requests
(``Content-Length`` bodies, keep-alive, pipelined requests answered in order) and hands each to the
application as an :class:`HttpRequest` plus a :class:`Responder`. The application answers at once
(``send``) or later, streaming chunks straight to the socket (``start_stream`` / ``write_chunk`` /
``end_stream``); no coroutine or timer exists per request. ``HttpRequest.arrival`` is the loop time
at which the request's first bytes reached the machine (the kernel's receive timestamp where
available), the reference point for simulated latencies.
"""

from __future__ import annotations

import asyncio
import http
import socket
import traceback
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from perflab.sim.sockets import Connection, Listener, bind_socket

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 256 * 1024 * 1024


class HttpRequest:
    """One parsed request."""

    __slots__ = ("method", "path", "query", "headers", "body", "arrival", "keep_alive", "peer")

    def __init__(
        self,
        method: str,
        target: str,
        headers: Dict[str, str],
        body: bytes,
        arrival: float,
        keep_alive: bool,
        peer: str,
    ) -> None:
        self.method = method
        self.path, _, self.query = target.partition("?")
        self.headers = headers
        self.body = body
        self.arrival = arrival
        self.keep_alive = keep_alive
        self.peer = peer


class Responder:
    """Writes one response; ``on_disconnect`` runs if the client goes away mid-stream."""

    __slots__ = (
        "_protocol",
        "_transport",
        "_server_header",
        "status",
        "streaming",
        "done",
        "on_disconnect",
    )

    def __init__(self, protocol: "HttpProtocol", transport: Connection, server_header: bytes) -> None:
        self._protocol = protocol
        self._transport = transport
        self._server_header = server_header
        self.status = 0
        self.streaming = False
        self.done = False
        self.on_disconnect: Optional[Callable[[], None]] = None

    @property
    def connected(self) -> bool:
        return not self._transport.is_closing()

    def _head(self, status: int, headers: Iterable[Tuple[str, str]]) -> bytes:
        self.status = status
        phrase = http.HTTPStatus(status).phrase
        lines = [f"HTTP/1.1 {status} {phrase}".encode("latin-1"), self._server_header]
        lines.extend(f"{name}: {value}".encode("latin-1") for name, value in headers)
        return b"\r\n".join(lines) + b"\r\n\r\n"

    def send(
        self,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        headers: Iterable[Tuple[str, str]] = (),
    ) -> None:
        """Send a complete response."""
        all_headers = [("content-type", content_type), ("content-length", str(len(body)))]
        all_headers.extend(headers)
        if not self._protocol.current_keep_alive:
            all_headers.append(("connection", "close"))
        if self.connected:
            self._transport.write(self._head(status, all_headers) + body)
        self._finish()

    def start_stream(self, content_type: str = "text/event-stream; charset=utf-8") -> None:
        """Begin a chunked response: its head goes out now, before the first token, as uvicorn sends
        the head of a streaming response as soon as the application starts it."""
        self.streaming = True
        headers = [("content-type", content_type), ("transfer-encoding", "chunked")]
        if not self._protocol.current_keep_alive:
            headers.append(("connection", "close"))
        head = self._head(200, headers)
        if self.connected:
            self._transport.write(head)

    def write_chunk(self, data: bytes) -> None:
        if data:
            self.write_frame(b"%x\r\n%s\r\n" % (len(data), data))

    def write_frame(self, frame: bytes) -> None:
        """Write one chunk already framed for chunked transfer encoding (dropped once the client left)."""
        self._transport.write(frame)

    def end_stream(self, last: bytes = b"") -> None:
        """Write an optional last chunk and the terminating zero-length chunk."""
        if self.connected:
            if last:
                self._transport.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(last), last))
            else:
                self._transport.write(b"0\r\n\r\n")
        self._finish()

    def _finish(self) -> None:
        if not self.done:
            self.done = True
            self._protocol.response_finished(self)


Handler = Callable[[HttpRequest, Responder], None]


class ArrivalClock:
    """Deferred request handling, and arrival times where the kernel gives none.

    Reads only timestamp and buffer; handling runs in one callback at the start of the next loop
    iteration, so reading a burst of requests is never held up by handling the first ones. That
    callback notes the loop time first (when the selector returned); reads of the same iteration
    without a kernel timestamp are stamped with it.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._pending: List["HttpProtocol"] = []
        self._iteration_time: Optional[float] = None

    def now(self) -> float:
        return self._iteration_time if self._iteration_time is not None else self._loop.time()

    def defer(self, protocol: "HttpProtocol") -> None:
        if not self._pending:
            self._loop.call_soon(self._run)
        self._pending.append(protocol)

    def _run(self) -> None:
        self._iteration_time = self._loop.time()
        pending, self._pending = self._pending, []
        for protocol in pending:
            protocol.process_buffer()
        self._loop.call_soon(self._expire)

    def _expire(self) -> None:
        self._iteration_time = None


class HttpProtocol:
    """One client connection."""

    def __init__(
        self, handler: Handler, loop: asyncio.AbstractEventLoop, server_header: bytes, clock: ArrivalClock
    ) -> None:
        self._handler = handler
        self._clock = clock
        self._loop = loop
        self._server_header = server_header
        self._transport: Optional[Connection] = None
        self._buffer = bytearray()
        self._buffer_since = 0.0
        self._pending: List[HttpRequest] = []
        self._active: Optional[Responder] = None
        self._peer = ""
        self._parse_scheduled = False
        self._closed = False
        self.current_keep_alive = True

    def connection_made(self, connection: Connection) -> None:
        self._transport = connection
        self._peer = connection.peer

    def connection_lost(self) -> None:
        self._closed = True
        active, self._active = self._active, None
        self._pending.clear()
        if active is not None and not active.done and active.on_disconnect is not None:
            active.on_disconnect()

    def data_received(self, data: bytes, arrival: Optional[float]) -> None:
        if not self._buffer:
            self._buffer_since = arrival if arrival is not None else self._clock.now()
        self._buffer += data
        if not self._parse_scheduled:
            self._parse_scheduled = True
            self._clock.defer(self)

    def process_buffer(self) -> None:
        self._parse_scheduled = False
        if self._closed:
            return
        self._parse_available()
        self._dispatch_next()

    def _parse_available(self) -> None:
        while self._buffer:
            head_end = self._buffer.find(b"\r\n\r\n")
            if head_end < 0:
                if len(self._buffer) > MAX_HEADER_BYTES:
                    self._reject(431)
                return
            try:
                method, target, version, headers = _parse_head(bytes(self._buffer[:head_end]))
            except ValueError:
                self._reject(400)
                return
            if "chunked" in headers.get("transfer-encoding", "").lower():
                self._reject(411)
                return
            try:
                length = int(headers.get("content-length", "0") or "0")
            except ValueError:
                self._reject(400)
                return
            if length < 0 or length > MAX_BODY_BYTES:
                self._reject(413)
                return
            body_start = head_end + 4
            if len(self._buffer) < body_start + length:
                return
            body = bytes(self._buffer[body_start : body_start + length])
            del self._buffer[: body_start + length]
            connection = headers.get("connection", "").lower()
            keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
            self._pending.append(
                HttpRequest(method, target, headers, body, self._buffer_since, keep_alive, self._peer)
            )
            self._buffer_since = self._clock.now()

    def _dispatch_next(self) -> None:
        while self._active is None and self._pending and self._transport is not None:
            request = self._pending.pop(0)
            self.current_keep_alive = request.keep_alive
            responder = Responder(self, self._transport, self._server_header)
            self._active = responder
            try:
                self._handler(request, responder)
            except Exception:  # an application bug: log it and answer 500 rather than drop the client
                traceback.print_exc()
                if not responder.done and not responder.streaming:
                    responder.send(500, b'{"detail":"Internal Server Error"}')

    def response_finished(self, responder: Responder) -> None:
        if responder is not self._active:
            return
        self._active = None
        if self._transport is None or self._transport.is_closing():
            return
        if not self.current_keep_alive:
            self._transport.close()
            return
        if self._pending:
            self._loop.call_soon(self._dispatch_next)

    def _reject(self, status: int) -> None:
        if self._transport is not None and not self._transport.is_closing():
            body = b'{"detail":"%s"}' % http.HTTPStatus(status).phrase.encode()
            head = (
                f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
            ).encode("latin-1")
            self._transport.write(head + body)
            self._transport.close()
        self._buffer.clear()


def _parse_head(head: bytes) -> Tuple[str, str, str, Dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise ValueError("bad request line")
    headers: Dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise ValueError("bad header line")
        headers[name.strip().lower()] = value.strip()
    return parts[0].upper(), parts[1], parts[2], headers


class HttpServer:
    """A listening server and its open connections."""

    def __init__(self, listener: Listener) -> None:
        self._listener = listener

    @property
    def port(self) -> int:
        return self._listener.port

    async def close(self) -> None:
        """Stop listening and drop every open connection (streams end abruptly, like a killed server)."""
        self._listener.close()


async def start_http_server(
    handler: Handler,
    host: str,
    port: int,
    server_header: str = "uvicorn",
    sock: Optional[socket.socket] = None,
) -> HttpServer:
    """Listen on ``host:port`` (``port`` 0 picks a free one), or on an already bound ``sock``.

    Raises OSError (``[Errno 98] Address already in use``) if the port is taken.
    """
    loop = asyncio.get_running_loop()
    header = f"server: {server_header}".encode("latin-1")
    clock = ArrivalClock(loop)
    listener = Listener(
        loop,
        sock if sock is not None else bind_socket(host, port),
        lambda: HttpProtocol(handler, loop, header, clock),
    )
    return HttpServer(listener)
