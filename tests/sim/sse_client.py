"""A minimal asyncio HTTP/1.1 client for the simulator tests: streams SSE and timestamps each event.

Independent of the product's load generator on purpose: the simulator's timing is checked with a
client that does nothing but read the socket and note ``time.perf_counter()`` per ``data:`` event.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit


class StreamResult:
    """Events of one streamed response with their arrival times (seconds since the request was sent)."""

    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status = status
        self.headers = headers
        self.events: list[tuple[float, object]] = []
        self.body = b""

    @property
    def token_times(self) -> list[float]:
        """Arrival times of the events that carry a choice (what TTFT/ITL are measured on)."""
        return [t for t, event in self.events if isinstance(event, dict) and event.get("choices")]

    @property
    def ttft(self) -> float:
        return self.token_times[0]

    @property
    def itls(self) -> list[float]:
        times = self.token_times
        return [later - earlier for earlier, later in zip(times, times[1:], strict=False)]

    @property
    def e2el(self) -> float:
        return self.token_times[-1]

    @property
    def usage(self) -> dict | None:
        for _, event in self.events:
            if isinstance(event, dict) and event.get("usage"):
                return event["usage"]
        return None


class _RecordingProtocol(asyncio.Protocol):
    """Appends ``(perf_counter, bytes)`` per read and nothing else; parsing happens afterwards."""

    def __init__(self) -> None:
        self.reads: list[tuple[float, bytes]] = []
        self.start = 0.0
        self.transport: asyncio.Transport | None = None
        self._done: asyncio.Future | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self, data: bytes) -> asyncio.Future:
        """Write one request; the future completes when its whole response has arrived."""
        self.reads = []
        self._done = asyncio.get_running_loop().create_future()
        self.start = time.perf_counter()
        self.transport.write(data)  # type: ignore[union-attr]
        return self._done

    def data_received(self, data: bytes) -> None:
        self.reads.append((time.perf_counter(), data))
        if data.endswith(b"0\r\n\r\n") or self._complete_plain_body():
            self._finish()

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish()

    def _finish(self) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    def _complete_plain_body(self) -> bool:
        data = b"".join(chunk for _, chunk in self.reads)
        head_end = data.find(b"\r\n\r\n")
        if head_end < 0 or b"transfer-encoding: chunked" in data[:head_end].lower():
            return False
        for line in data[:head_end].decode("latin-1").split("\r\n"):
            if line.lower().startswith("content-length:"):
                return len(data) - head_end - 4 >= int(line.split(":", 1)[1])
        return False


def _parse(reads: list[tuple[float, bytes]], start: float) -> StreamResult:
    data = b"".join(chunk for _, chunk in reads)
    head_end = data.index(b"\r\n\r\n")
    lines = data[:head_end].decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    result = StreamResult(int(lines[0].split(" ")[1]), headers)
    body_start = head_end + 4
    if headers.get("transfer-encoding") != "chunked":
        result.body = data[body_start:]
        return result
    # Offsets at which each read ended, to date every event by the read that completed it.
    ends = []
    total = 0
    for when, chunk in reads:
        total += len(chunk)
        ends.append((total, when))
    position = body_start
    pending = b""
    read_index = 0
    while True:
        line_end = data.index(b"\r\n", position)
        size = int(data[position:line_end], 16)
        if size == 0:
            break
        chunk_end = line_end + 2 + size
        pending += data[line_end + 2 : chunk_end]
        while ends[read_index][0] < chunk_end:
            read_index += 1
        when = ends[read_index][1] - start
        while b"\n\n" in pending:
            event, pending = pending.split(b"\n\n", 1)
            text = event.decode()[len("data: ") :]
            result.events.append((when, "[DONE]" if text == "[DONE]" else json.loads(text)))
        position = chunk_end + 2
    return result


def _encode(
    url: str,
    path: str,
    payload: dict | None,
    method: str,
    headers: dict[str, str] | None,
    keep_alive: bool = False,
) -> bytes:
    parts = urlsplit(url)
    body = json.dumps(payload).encode() if payload is not None else b""
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    connection = "keep-alive" if keep_alive else "close"
    head = (
        f"{method} {path} HTTP/1.1\r\nhost: {parts.netloc}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n{extra}connection: {connection}\r\n\r\n"
    ).encode()
    return head + body


async def request(
    url: str,
    path: str,
    payload: dict | None = None,
    method: str = "POST",
    headers: dict[str, str] | None = None,
) -> StreamResult:
    """Send one request; time every SSE event, or read the whole body."""
    return (await burst(url, path, [payload], method, headers))[0]


async def burst(
    url: str,
    path: str,
    payloads: list[dict | None],
    method: str = "POST",
    headers: dict[str, str] | None = None,
) -> list[StreamResult]:
    """Send one request per payload at once, each on its own warm connection, and read all responses.

    Like a pooled load generator after its warm-up, every connection first answers a ``GET /health``
    (keep-alive); then all requests go out in one pass, each timed from just before its own write.
    """
    loop = asyncio.get_running_loop()
    parts = urlsplit(url)
    connections = await asyncio.gather(
        *(loop.create_connection(_RecordingProtocol, parts.hostname, parts.port) for _ in payloads)
    )
    protocols = [protocol for _, protocol in connections]
    warm_up = _encode(url, "/health", None, "GET", headers, keep_alive=True)
    await asyncio.gather(*(protocol.send(warm_up) for protocol in protocols))
    try:
        await asyncio.gather(
            *[
                protocol.send(_encode(url, path, payload, method, headers))
                for protocol, payload in zip(protocols, payloads, strict=True)
            ]
        )
        return [_parse(protocol.reads, protocol.start) for protocol in protocols]
    finally:
        for transport, _ in connections:
            transport.close()


def chat_payload(model: str, content: str, max_tokens: int, **extra: object) -> dict:
    payload = {
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "stream": True,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }
    payload.update(extra)
    return payload


def stream_chat(port: int, model: str, prompt: str, max_tokens: int) -> dict:
    """One streamed chat completion from ``127.0.0.1:port`` (blocking): its content and its usage."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        data=json.dumps(chat_payload(model, prompt, max_tokens)).encode(),
        headers={"content-type": "application/json"},
    )
    chunks = []
    with urllib.request.urlopen(request, timeout=60) as response:
        for raw in response:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:]))
    content = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c.get("choices"))
    usage = next(c["usage"] for c in chunks if c.get("usage"))
    return {"content": content, "usage": usage}


def post_status(port: int, path: str, body: dict) -> int:
    """The HTTP status of ``POST 127.0.0.1:port/path`` with the JSON ``body`` (blocking)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
