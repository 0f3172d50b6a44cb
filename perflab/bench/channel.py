"""Driving an ``HTTP1Connection`` from the event loop, with each read stamped by when it arrived.

Plain TCP (``open_channel``): a ``SocketChannel`` reads the non-blocking socket with ``recvmsg`` in an
``add_reader`` callback and passes each buffer to the connection's ``received(data, arrived)``. There
is no asyncio transport in between, so a read costs one selector callback and one system call, and
every read can carry the kernel's receive timestamp (``rxstamp``). Reads are at most 64 KiB: asking
for more makes every read allocate a buffer that big, which the allocator maps and unmaps each
time, at a cost several times that of the read itself. Writes go straight to the socket and are
buffered, with an ``add_writer`` callback, only when the socket is full.

TLS (``open_protocol_channel``): ``StreamProtocol`` is an asyncio ``Protocol`` on the loop's TLS
transport; its reads are stamped in user space (``clock.arrival_clock``).

Both count, in a shared ``ReadSources``, how many reads each time source stamped, so a run can say
how its latencies were timed. The channel exposes the part of ``asyncio.Transport`` the HTTP
connection uses: ``write``, ``close``, ``is_closing``, ``pause_reading``, ``resume_reading``.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Any, Callable, Dict, List, Optional

from perflab.bench import rxstamp
from perflab.bench.clock import arrival_clock
from perflab.bench.http1 import HTTP1Connection

READ_SIZE = 64 * 1024

ReadSources = Dict[str, int]


class SocketChannel:
    """One connected plain TCP socket feeding one ``HTTP1Connection``."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        conn: HTTP1Connection,
        sources: ReadSources,
    ) -> None:
        self._loop = loop
        self._sock = sock
        self._fd = sock.fileno()
        self._conn = conn
        self._sources = sources
        self._fallback_clock, self._fallback_source = arrival_clock(loop)
        self._stamped = rxstamp.enable(sock)
        self._out = bytearray()
        self._writing = False
        self._closed = False
        self._reading = True
        conn.connection_made(self)
        loop.add_reader(self._fd, self._on_readable)

    def write(self, data: bytes) -> None:
        if not self._closed:
            self._out += data
            if not self._writing:
                self._flush()

    def is_closing(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close at once: a benchmark never needs to flush a request it is abandoning."""
        self._lose(None, notify=False)

    def pause_reading(self) -> None:
        if self._reading and not self._closed:
            self._reading = False
            self._loop.remove_reader(self._fd)

    def resume_reading(self) -> None:
        if not self._reading and not self._closed:
            self._reading = True
            self._loop.add_reader(self._fd, self._on_readable)

    def _on_readable(self) -> None:
        try:
            if self._stamped:
                data, ancillary, _, _ = self._sock.recvmsg(READ_SIZE, rxstamp.ANCILLARY_SIZE)
            else:
                data, ancillary = self._sock.recv(READ_SIZE), []
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lose(exc)
            return
        if not data:
            self._lose(None)
            return
        arrived = rxstamp.arrival(ancillary) if ancillary else None
        if arrived is None:
            arrived = self._fallback_clock()
            self._sources[self._fallback_source] = self._sources.get(self._fallback_source, 0) + 1
        else:
            self._sources[rxstamp.SOURCE_KERNEL] = self._sources.get(rxstamp.SOURCE_KERNEL, 0) + 1
        self._conn.received(data, arrived)

    def _flush(self) -> None:
        """Send what the socket takes; wait for it to become writable while anything is left."""
        try:
            del self._out[: self._sock.send(self._out)]
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            self._lose(exc)
            return
        if bool(self._out) != self._writing:
            self._writing = not self._writing
            if self._writing:
                self._loop.add_writer(self._fd, self._flush)
            else:
                self._loop.remove_writer(self._fd)

    def _lose(self, exc: Optional[Exception], notify: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        if self._reading:
            self._loop.remove_reader(self._fd)
        if self._writing:
            self._loop.remove_writer(self._fd)
        self._out.clear()
        self._sock.close()
        if notify:
            self._conn.connection_lost(exc)


class StreamProtocol(asyncio.Protocol):
    """An asyncio ``Protocol`` feeding one ``HTTP1Connection`` (used where TLS is spoken)."""

    def __init__(self, conn: HTTP1Connection, clock: Callable[[], float], source: str, sources: ReadSources):
        self.conn = conn
        self._clock = clock
        self._source = source
        self._sources = sources

    def connection_made(self, transport: Any) -> None:
        self.conn.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self._sources[self._source] = self._sources.get(self._source, 0) + 1
        self.conn.received(data, self._clock())

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.conn.connection_lost(exc)


async def open_channel(host: str, port: int, sources: ReadSources) -> HTTP1Connection:
    """A connection to ``host:port`` over plain TCP (each resolved address tried in turn).

    Raises the last ``OSError`` when no address accepts the connection.
    """
    loop = asyncio.get_running_loop()
    try:  # an IP address needs no resolver thread
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    except socket.gaierror:
        addresses = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    errors: List[OSError] = []
    for family, kind, proto, _, address in addresses:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await loop.sock_connect(sock, address)
        except OSError as exc:
            sock.close()
            errors.append(exc)
            continue
        except BaseException:
            sock.close()
            raise
        conn = HTTP1Connection()
        SocketChannel(loop, sock, conn, sources)
        return conn
    raise errors[-1] if errors else OSError(f"{host} has no address")


async def open_protocol_channel(
    host: str, port: int, context: ssl.SSLContext, sources: ReadSources
) -> HTTP1Connection:
    """A TLS connection to ``host:port`` through the loop's own transport."""
    loop = asyncio.get_running_loop()
    clock, source = arrival_clock(loop)
    conn = HTTP1Connection()
    await loop.create_connection(
        lambda: StreamProtocol(conn, clock, source, sources), host, port, ssl=context, server_hostname=host
    )
    return conn
