"""Non-blocking TCP on the event loop's selector, with kernel receive timestamps.

The simulated latencies are measured from when a request *arrived*. When the machine is busy, the
server process may run milliseconds after the bytes landed, so a timestamp taken in user space would
shift every TTFT by scheduling noise. With ``SO_TIMESTAMP`` the kernel stamps each received packet;
:class:`Connection` reads with ``recvmsg`` and reports that time (converted to the loop clock) along
with the data. Connections are driven directly with ``add_reader``/``add_writer`` (no asyncio
transport or task per connection), which also makes accepting a burst of connections cheap.
Writes go straight to the socket and are buffered only when the socket is full. Reads ask for at
most 64 KiB: a larger request makes every read allocate, and the allocator map and unmap, a buffer
that big.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import time
from typing import Callable, Optional, Protocol, Set

SO_TIMESTAMP = getattr(socket, "SO_TIMESTAMP", 29 if sys.platform.startswith("linux") else 0)
_TIMEVAL = struct.Struct("@ll")
_ANCILLARY_SIZE = socket.CMSG_SPACE(_TIMEVAL.size)
READ_SIZE = 64 * 1024


class StreamHandler(Protocol):
    """What a connection drives."""

    def connection_made(self, connection: "Connection") -> None: ...

    def data_received(self, data: bytes, arrival: Optional[float]) -> None: ...

    def connection_lost(self) -> None: ...


class Connection:
    """One accepted TCP connection."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        handler: StreamHandler,
        registry: Set["Connection"],
    ) -> None:
        self._loop = loop
        self._sock = sock
        self._fd = sock.fileno()
        self._handler = handler
        self._registry = registry
        self._out = bytearray()
        self._closing = False
        self._closed = False
        self._timestamps = False
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if SO_TIMESTAMP:
            try:
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMP, 1)
                self._timestamps = True
            except OSError:
                self._timestamps = False
        try:
            peer = sock.getpeername()
            self.peer = f"{peer[0]}:{peer[1]}"
        except OSError:
            self.peer = ""
        registry.add(self)
        loop.add_reader(self._fd, self._on_readable)
        handler.connection_made(self)

    def is_closing(self) -> bool:
        return self._closing or self._closed

    def write(self, data: bytes) -> None:
        if self.is_closing():
            return
        if self._out:
            self._out += data
            return
        try:
            sent = self._sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self._finish()
            return
        if sent < len(data):
            self._out += data[sent:]
            self._loop.add_writer(self._fd, self._on_writable)

    def close(self) -> None:
        """Close once buffered output is sent."""
        if self._closed:
            return
        self._closing = True
        if not self._out:
            self._finish()

    def abort(self) -> None:
        self._finish()

    def _on_writable(self) -> None:
        try:
            sent = self._sock.send(self._out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._finish()
            return
        del self._out[:sent]
        if not self._out:
            self._loop.remove_writer(self._fd)
            if self._closing:
                self._finish()

    def _on_readable(self) -> None:
        try:
            if self._timestamps:
                data, ancillary, _, _ = self._sock.recvmsg(READ_SIZE, _ANCILLARY_SIZE)
            else:
                data, ancillary = self._sock.recv(READ_SIZE), []
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._finish()
            return
        if not data:
            self._finish()
            return
        self._handler.data_received(data, self._arrival(ancillary))

    def _arrival(self, ancillary: list) -> Optional[float]:
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMP and len(payload) >= _TIMEVAL.size:
                seconds, micros = _TIMEVAL.unpack(payload[: _TIMEVAL.size])
                age = time.time() - (seconds + micros / 1e6)
                return self._loop.time() - max(0.0, age)
        return None

    def _finish(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._registry.discard(self)
        self._loop.remove_reader(self._fd)
        self._loop.remove_writer(self._fd)
        self._sock.close()
        self._handler.connection_lost()


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening, non-blocking TCP socket on ``host:port`` (``port`` 0 picks a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(4096)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


class Listener:
    """Accepts connections on a listening socket and hands each to a new handler."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        handler_factory: Callable[[], StreamHandler],
    ) -> None:
        self._loop = loop
        self._sock = sock
        self._factory = handler_factory
        self.connections: Set[Connection] = set()
        loop.add_reader(sock.fileno(), self._on_acceptable)

    @property
    def port(self) -> int:
        return self._sock.getsockname()[1]

    def _on_acceptable(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            Connection(self._loop, conn, self._factory(), self.connections)

    def close(self) -> None:
        """Stop accepting and drop every connection."""
        self._loop.remove_reader(self._sock.fileno())
        self._sock.close()
        for connection in list(self.connections):
            connection.abort()
