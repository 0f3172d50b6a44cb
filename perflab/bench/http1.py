"""HTTP/1.1 client connection: response head parsing and body de-framing.

One ``HTTP1Connection`` carries one request at a time. A driver (``channel``) feeds it what the socket
produced with ``received(data, arrived)``, ``arrived`` being when those bytes reached the machine.
It parses the status line and headers, then removes the body framing (chunked, Content-Length or
read-until-close) and hands each payload piece on with its arrival time: either queued in ``pieces``
for a consumer task that wakes up later, or — in sink mode — passed at once to a callback, which
spares a task wake-up per socket read when thousands of streams are open.
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any, Callable, Deque, List, Optional, Tuple

MAX_HEAD_BYTES = 64 * 1024
HIGH_WATER_BYTES = 4 * 1024 * 1024

FRAMING_LENGTH = "length"
FRAMING_CHUNKED = "chunked"
FRAMING_EOF = "eof"

_STATE_IDLE = 0
_STATE_HEAD = 1
_STATE_BODY = 2
_STATE_DONE = 3


class ProtocolViolation(Exception):
    """The server sent bytes that are not valid HTTP/1.1."""


class ConnectionDropped(Exception):
    """The connection closed before the response was complete."""


def _expire(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(False)


class ResponseHead:
    """Status line and headers of one response."""

    __slots__ = ("status", "reason", "headers", "keep_alive", "framing", "content_length")

    def __init__(
        self,
        status: int,
        reason: bytes,
        headers: List[Tuple[bytes, bytes]],
        keep_alive: bool,
        framing: str,
        content_length: int,
    ) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.keep_alive = keep_alive
        self.framing = framing
        self.content_length = content_length


def parse_head(raw: bytes, request_method: bytes) -> ResponseHead:
    """Parse a response head (without the blank line that ends it)."""
    lines = raw.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise ProtocolViolation(f"invalid status line {lines[0][:80]!r}")
    status = int(parts[1])
    reason = parts[2] if len(parts) > 2 else b""
    keep_alive = parts[0] == b"HTTP/1.1"
    headers: List[Tuple[bytes, bytes]] = []
    chunked = False
    content_length = -1
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            raise ProtocolViolation(f"invalid header line {line[:80]!r}")
        name = name.strip()
        value = value.strip()
        headers.append((name, value))
        lowered = name.lower()
        if lowered == b"transfer-encoding":
            chunked = value.lower().split(b",")[-1].strip() == b"chunked"
        elif lowered == b"content-length":
            if not value.isdigit():
                raise ProtocolViolation(f"invalid Content-Length {value[:40]!r}")
            content_length = int(value)
        elif lowered == b"connection":
            tokens = {token.strip() for token in value.lower().split(b",")}
            if b"close" in tokens:
                keep_alive = False
            elif b"keep-alive" in tokens:
                keep_alive = True
    if request_method == b"HEAD" or status in (204, 304) or 100 <= status < 200:
        framing, content_length = FRAMING_LENGTH, 0
    elif chunked:
        framing = FRAMING_CHUNKED
    elif content_length >= 0:
        framing = FRAMING_LENGTH
    else:
        framing = FRAMING_EOF
        keep_alive = False
    return ResponseHead(status, reason, headers, keep_alive, framing, content_length)


class ChunkedDecoder:
    """Incremental decoder of ``Transfer-Encoding: chunked`` bodies.

    The common case — whole chunks, each ``size CRLF data CRLF`` — costs one ``find``, one ``int`` and
    one slice per chunk; chunks split across reads are carried over in ``_chunk_left``/``_pending``.
    """

    __slots__ = ("_pending", "_chunk_left", "_in_trailer", "finished")

    def __init__(self) -> None:
        self._pending = b""
        self._chunk_left = 0
        self._in_trailer = False
        self.finished = False

    def feed(self, data: bytes) -> Tuple[bytes, bytes]:
        """Decode ``data``; return ``(payload, leftover)`` where leftover follows the final chunk."""
        buf = self._pending + data if self._pending else data
        size = len(buf)
        pos = 0
        out: List[bytes] = []
        if self._chunk_left:
            # ``_chunk_left`` counts the rest of a chunk's data plus its trailing CRLF.
            take = min(size, self._chunk_left)
            data_end = min(take, self._chunk_left - 2)
            if data_end > 0:
                out.append(buf[:data_end])
            self._chunk_left -= take
            pos = take
        while not self._chunk_left and pos < size:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                if size - pos > 1024:
                    raise ProtocolViolation("chunk size line too long")
                break
            if self._in_trailer:
                if eol == pos:
                    self.finished = True
                    self._pending = b""
                    return b"".join(out), buf[eol + 2 :]
                pos = eol + 2
                continue
            chunk_size = _chunk_size(buf[pos:eol])
            start = eol + 2
            if not chunk_size:
                self._in_trailer = True
                pos = start
                continue
            end = start + chunk_size
            if end + 2 <= size:
                if buf[end : end + 2] != b"\r\n":
                    raise ProtocolViolation("chunk data not followed by CRLF")
                out.append(buf[start:end])
                pos = end + 2
            else:
                if start < size:
                    out.append(buf[start : min(end, size)])
                self._chunk_left = end + 2 - size
                pos = size
        self._pending = buf[pos:]
        return b"".join(out) if len(out) != 1 else out[0], b""


def _chunk_size(line: bytes) -> int:
    try:
        size = int(line, 16)
    except ValueError:
        text = line.split(b";", 1)[0].strip()
        try:
            size = int(text, 16)
        except ValueError:
            raise ProtocolViolation(f"invalid chunk size {text[:20]!r}") from None
    if size < 0:
        raise ProtocolViolation(f"negative chunk size {line[:20]!r}")
    return size


class HTTP1Connection:
    """One keep-alive HTTP/1.1 connection; the owner sends a request and drains ``pieces``.

    ``transport`` is the driver's channel (``write``, ``close``, ``is_closing``, ``pause_reading``,
    ``resume_reading``).
    """

    def __init__(self) -> None:
        self.transport: Any = None
        self.pieces: Deque[Tuple[bytes, float]] = collections.deque()
        self.head: Optional[ResponseHead] = None
        self.error: Optional[BaseException] = None
        self.closed = False
        self._state = _STATE_IDLE
        self._method = b"GET"
        self._head_buffer = b""
        self._length_left = 0
        self._decoder: Optional[ChunkedDecoder] = None
        self._waiter: Optional[asyncio.Future] = None
        self._buffered = 0
        self._paused = False
        self._sink: Optional[Callable[[bytes, float], None]] = None

    # driver callbacks ---------------------------------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def received(self, data: bytes, arrived: float) -> None:
        """Bytes read from the socket, which reached the machine at ``arrived`` (perf_counter s)."""
        try:
            if self._state == _STATE_BODY:
                self._feed_body(data, arrived)
            elif self._state == _STATE_HEAD:
                self._feed_head(data, arrived)
            else:
                raise ProtocolViolation("data received while no request was pending")
        except Exception as exc:  # a protocol violation, or an error raised by the sink
            self._fail(exc)
            self.close()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.closed = True
        if self._state == _STATE_BODY and self.head is not None and self.head.framing == FRAMING_EOF:
            self._state = _STATE_DONE
        elif self._state in (_STATE_HEAD, _STATE_BODY):
            where = "response headers" if self._state == _STATE_HEAD else "complete message body"
            detail = f" ({exc})" if exc else ""
            self._fail(ConnectionDropped(f"peer closed connection without sending {where}{detail}"))
        self._wake()

    # owner API --------------------------------------------------------------------------------

    @property
    def reusable(self) -> bool:
        """Whether the connection can carry a request: unused yet, or its last response ended keep-alive."""
        if self.closed or self.error is not None or self.transport is None or self.transport.is_closing():
            return False
        if self._state == _STATE_IDLE:
            return True
        return self._state == _STATE_DONE and self.head is not None and self.head.keep_alive

    @property
    def finished(self) -> bool:
        return self._state == _STATE_DONE

    def send(self, method: bytes, payload: bytes) -> float:
        """Write a complete request; return the ``perf_counter()`` just before the write: the request's
        latencies count from there, so a client preempted around its write never makes them shorter
        than they were (on loopback the server may read the request before the write returns)."""
        assert self.transport is not None
        self.pieces.clear()
        self.head = None
        self.error = None
        self._head_buffer = b""
        self._decoder = None
        self._buffered = 0
        self._sink = None
        self._method = method
        self._state = _STATE_HEAD
        if self._paused:
            self._paused = False
            self.transport.resume_reading()
        sent_at = time.perf_counter()
        if self.closed or self.transport.is_closing():
            self._fail(ConnectionDropped("the connection closed before the request was sent"))
        else:
            self.transport.write(payload)
        return sent_at

    async def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait for new pieces, the response head, the end of the body or an error.

        Returns False when ``timeout`` seconds passed first.
        """
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        self._waiter = waiter
        timer = loop.call_later(timeout, _expire, waiter) if timeout is not None else None
        try:
            return bool(await waiter)
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def consumed(self, size: int) -> None:
        """The owner took ``size`` bytes off ``pieces``; resume reading below the high-water mark."""
        self._buffered -= size
        if self._paused and self._buffered < HIGH_WATER_BYTES // 2 and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()

    def set_sink(self, sink: Callable[[bytes, float], None]) -> None:
        """Deliver body pieces to ``sink(payload, arrived)`` from now on, starting with queued ones.

        In sink mode ``wait`` only returns at the end of the body or on an error. An exception raised
        by the sink ends the response: it becomes ``error`` and the connection is closed.
        """
        while self.pieces:
            data, arrived = self.pieces.popleft()
            self.consumed(len(data))
            sink(data, arrived)
        self._sink = sink

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
        self.closed = True

    # internals ----------------------------------------------------------------------------------

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(True)

    def _fail(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = exc
        self._wake()

    def _feed_head(self, data: bytes, arrived: float) -> None:
        buf = self._head_buffer + data
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD_BYTES:
                    raise ProtocolViolation("response head larger than 64 KiB")
                self._head_buffer = buf
                return
            head = parse_head(buf[:end], self._method)
            buf = buf[end + 4 :]
            if 100 <= head.status < 200:
                continue
            break
        self._head_buffer = b""
        self.head = head
        self._state = _STATE_BODY
        if head.framing == FRAMING_CHUNKED:
            self._decoder = ChunkedDecoder()
        elif head.framing == FRAMING_LENGTH:
            self._length_left = head.content_length
            if not self._length_left:
                self._state = _STATE_DONE
        self._wake()
        if buf and self._state == _STATE_BODY:
            self._feed_body(buf, arrived)

    def _feed_body(self, data: bytes, arrived: float) -> None:
        framing = self.head.framing  # type: ignore[union-attr]
        if framing == FRAMING_CHUNKED:
            payload, leftover = self._decoder.feed(data)  # type: ignore[union-attr]
            if self._decoder.finished:  # type: ignore[union-attr]
                self._state = _STATE_DONE
                if leftover:
                    self.head.keep_alive = False  # type: ignore[union-attr]
        elif framing == FRAMING_LENGTH:
            payload = data[: self._length_left]
            self._length_left -= len(payload)
            if not self._length_left:
                self._state = _STATE_DONE
        else:
            payload = data
        if not payload:
            pass
        elif self._sink is not None:
            self._sink(payload, arrived)
        else:
            self.pieces.append((payload, arrived))
            self._buffered += len(payload)
            if not self._paused and self._buffered > HIGH_WATER_BYTES and self.transport is not None:
                self._paused = True
                self.transport.pause_reading()
            self._wake()
        if self._state == _STATE_DONE:
            self._wake()
