"""How the bench times what it reads: kernel receive timestamps on real loopback sockets, the rule for
reads that carry several writes, the user-space fallback, the TLS path, pre-connecting, and the
timing facts a result reports."""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
import threading
import time
from types import SimpleNamespace

import httpx
import pytest

from perflab.bench import BenchOptions, run_benchmark, rxstamp
from perflab.bench.channel import READ_SIZE, open_channel
from perflab.bench.client import Outcome, StreamDecoder, build_body, stream_request
from perflab.bench.clock import new_event_loop
from perflab.bench.datasets import load_dataset
from perflab.bench.dispatch import prepare_requests
from perflab.bench.http1 import HIGH_WATER_BYTES
from perflab.bench.runner import connections_wanted, timing_source
from perflab.bench.transport import StreamingTransport
from tests.bench.loops import run
from tests.fixtures.streaming_server import Script, free_port

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
CLIENT_BUSY_S = 0.05


def frame(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class LoopbackExchange:
    """A listening socket and one bench connection to it, on a bench event loop."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.loop = new_event_loop()
        self.sources: dict[str, int] = {}
        port = self.listener.getsockname()[1]
        self.conn = self.loop.run_until_complete(open_channel("127.0.0.1", port, self.sources))
        self.server, _ = self.listener.accept()
        self.server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn.send(b"GET", b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\n")

    def write(self, data: bytes) -> tuple[float, float]:
        """Server-side write; returns perf_counter just before and just after it."""
        before = time.perf_counter()
        self.server.sendall(data)
        return before, time.perf_counter()

    def read_pieces(self, count: int) -> list[tuple[bytes, float]]:
        """Let the client loop run until ``count`` body pieces are queued; return them."""

        async def until_pieces() -> None:
            while len(self.conn.pieces) < count:
                await self.conn.wait(2.0)

        self.loop.run_until_complete(asyncio.wait_for(until_pieces(), 5))
        return list(self.conn.pieces)

    def close(self) -> None:
        self.conn.close()
        self.server.close()
        self.listener.close()
        self.loop.close()


@pytest.fixture
def exchange(kernel_timestamps):
    pair = LoopbackExchange()
    yield pair
    pair.close()


def test_a_read_is_stamped_when_the_data_arrived_not_when_the_busy_client_read_it(exchange):
    before, after = exchange.write(HEAD + frame(b"data: one\n\n"))
    time.sleep(CLIENT_BUSY_S)  # the client is busy elsewhere while the data waits in the socket
    read_at = time.perf_counter()
    [(payload, arrived)] = exchange.read_pieces(1)
    assert payload == b"data: one\n\n"
    assert before - 0.001 <= arrived <= after + 0.005
    assert read_at - arrived >= CLIENT_BUSY_S * 0.9
    assert exchange.sources == {"kernel": 1}


def test_a_preemption_between_the_clock_reads_does_not_shift_the_arrival(exchange, monkeypatch):
    # The kernel's stamp is on the wall clock; converting it reads both clocks. A process preempted
    # between those reads would add the preemption to the arrival, so the pair is read again.
    wall_reads: list[float] = []

    def preempted_after_reading() -> float:
        value = time.time()
        if not wall_reads:
            time.sleep(0.03)
        wall_reads.append(value)
        return value

    clocks = SimpleNamespace(perf_counter=time.perf_counter, time=preempted_after_reading)
    monkeypatch.setattr(rxstamp, "time", clocks)
    before, after = exchange.write(HEAD + frame(b"data: one\n\n"))
    [(_, arrived)] = exchange.read_pieces(1)
    assert len(wall_reads) >= 2
    assert before - 0.001 <= arrived <= after + 0.005


def test_a_read_holding_two_writes_carries_the_newer_writes_time(exchange):
    # TCP reports the timestamp of the newest segment a read copies from (and merges queued
    # segments under the newest time), so both events get the second write's arrival.
    first, _ = exchange.write(HEAD + frame(b"data: one\n\n"))
    time.sleep(0.02)
    second_before, second_after = exchange.write(frame(b"data: two\n\n"))
    time.sleep(0.02)
    [(payload, arrived)] = exchange.read_pieces(1)
    assert payload == b"data: one\n\ndata: two\n\n"
    assert second_before - 0.001 <= arrived <= second_after + 0.005
    assert arrived - first >= 0.015


def test_without_kernel_timestamps_reads_fall_back_to_the_poll_time(monkeypatch):
    monkeypatch.setattr(rxstamp, "enable", lambda sock: False)
    pair = LoopbackExchange()
    try:
        _, after = pair.write(HEAD + frame(b"data: one\n\n"))
        time.sleep(CLIENT_BUSY_S)
        [(_, arrived)] = pair.read_pieces(1)
        assert arrived - after >= CLIENT_BUSY_S * 0.9  # stamped when the loop polled, not on arrival
        assert pair.sources == {"poll": 1}
    finally:
        pair.close()


def test_reading_pauses_at_the_high_water_mark_and_resumes_as_pieces_are_consumed(exchange):
    body = b"x" * (4 * HIGH_WATER_BYTES)
    writer = threading.Thread(target=exchange.write, args=(HEAD + frame(body) + b"0\r\n\r\n",))
    writer.start()

    def buffered() -> int:
        return sum(len(piece) for piece, _ in exchange.conn.pieces)

    async def read_to_the_mark_and_on() -> None:
        deadline = time.monotonic() + 10
        while buffered() < HIGH_WATER_BYTES:
            assert time.monotonic() < deadline, buffered()
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)

    exchange.loop.run_until_complete(read_to_the_mark_and_on())
    # Unpaused, 0.3 s past the mark would have read all 16 MiB; paused, the rest waits in the kernel.
    assert HIGH_WATER_BYTES <= buffered() <= HIGH_WATER_BYTES + READ_SIZE
    received = 0

    async def consume() -> None:
        nonlocal received
        conn = exchange.conn
        while not conn.finished:
            while conn.pieces:
                piece, _ = conn.pieces.popleft()
                conn.consumed(len(piece))
                received += len(piece)
            if not conn.finished:
                await conn.wait(2.0)
        received += sum(len(piece) for piece, _ in conn.pieces)

    exchange.loop.run_until_complete(asyncio.wait_for(consume(), 10))
    writer.join(5)
    assert received == len(body) and exchange.conn.error is None


def test_a_request_larger_than_the_socket_buffers_goes_out_whole(scripted_server):
    server = scripted_server(Script())
    prompt = "word " * 800_000
    body = build_body("chat", "scripted-model", prompt, 2, True, 0.0)

    async def send_big() -> Outcome:
        transport = StreamingTransport()
        outcome = Outcome()
        try:
            request = httpx.Request("POST", server.base_url + "/v1/chat/completions", content=body)
            await stream_request(transport, request, True, outcome)
        finally:
            await transport.aclose()
        return outcome

    outcome = run(send_big())
    assert outcome.success, outcome.error
    assert server.served[0].body["messages"][0]["content"] == prompt


def sse(*texts: str) -> bytes:
    return b"".join(
        b'data: {"choices":[{"index":0,"delta":{"content":"%s"}}]}\n\n' % text.encode() for text in texts
    )


def test_token_chunks_sharing_a_read_are_counted():
    outcome = Outcome()
    decoder = StreamDecoder(outcome, chat=True, keep_text=False)
    decoder(sse("a"), 1.0)
    decoder(sse("b", "c", "d"), 2.0)
    decoder(sse("e") + b"data: [DONE]\n\n", 3.0)
    assert outcome.chunk_times == [1.0, 2.0, 2.0, 2.0, 3.0]
    assert outcome.coalesced == 2


def wait_for_connections(server, count: int) -> int:
    deadline = time.monotonic() + 5
    while len(server.connections) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return len(server.connections)


def test_preconnect_opens_the_pool_and_the_requests_reuse_it(scripted_server):
    server = scripted_server(Script(ttft_s=0.01, itl_s=0.002))
    url = httpx.URL(server.base_url + "/v1/chat/completions")
    body = build_body("chat", "scripted-model", "hello", 3, True, 0.0)

    async def preconnect_then_send():
        transport = StreamingTransport()
        try:
            opened = await transport.preconnect(url, 6)
            connected = await asyncio.to_thread(wait_for_connections, server, 6)
            outcomes = [Outcome() for _ in range(6)]
            await asyncio.gather(
                *[
                    stream_request(transport, httpx.Request("POST", url, content=body), True, outcome)
                    for outcome in outcomes
                ]
            )
            again = await transport.preconnect(url, 6)
        finally:
            await transport.aclose()
        return opened, connected, again, outcomes

    opened, connected, again, outcomes = run(preconnect_then_send())
    assert (opened, connected, again) == (6, 6, 6)
    assert all(outcome.success and outcome.connect_s is None for outcome in outcomes)
    assert len(server.connections) <= 6 and server.completion_count == 6


def test_preconnect_to_a_closed_port_opens_nothing():
    async def attempt():
        transport = StreamingTransport()
        try:
            return await transport.preconnect(httpx.URL(f"http://127.0.0.1:{free_port()}/"), 3, timeout=2)
        finally:
            await transport.aclose()

    assert run(attempt()) == 0


def test_connections_wanted_follow_the_concurrency_limit_per_server():
    options = BenchOptions(base_urls=["http://a:1", "http://b:2"], model="m", num_prompts=5, input_len=4)
    options.validate()
    prepared = prepare_requests(options, load_dataset(options.dataset_spec(), None).samples)
    targets = [item.base_url for item in prepared]
    assert connections_wanted(options, targets) == {"http://a:1": 3, "http://b:2": 2}
    options.max_concurrency = 2
    assert connections_wanted(options, targets) == {"http://a:1": 2, "http://b:2": 2}


def test_timing_source_names_every_source_used():
    assert timing_source({"kernel": 10}) == "kernel"
    assert timing_source({"kernel": 10, "poll": 1}) == "kernel+poll"
    assert timing_source({"read": 3, "kernel": 0}) == "read"
    assert timing_source({}) == "none"


def test_result_reports_kernel_timing_and_the_preconnected_pool(kernel_timestamps, scripted_server):
    # With no delays the server writes each whole response at once: its three token chunks share a read.
    server = scripted_server(Script())
    result = run_benchmark(
        BenchOptions(
            base_urls=[server.base_url],
            model="scripted-model",
            num_prompts=6,
            max_concurrency=3,
            input_len=8,
            output_len=3,
            progress="none",
        )
    )
    assert (result["completed"], result["failed"]) == (6, 0)
    assert result["timing_source"] == "kernel"
    assert result["preconnected"] == 3
    assert result["coalesced_chunks"] == 6 * 2
    assert all(record["connect_ms"] is None for record in result["requests"])


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    completed = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost"]
        + ["-addext", "subjectAltName=DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        capture_output=True,
    )
    if completed.returncode != 0:
        pytest.skip(f"openssl cannot make a certificate: {completed.stderr.decode()[-200:]}")
    return cert, key


def test_https_streams_through_the_loops_tls_transport(tls_files):
    cert, key = tls_files
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    client_context = ssl.create_default_context(cafile=str(cert))
    events = sse("x", "y", "z") + b"data: [DONE]\n\n"

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        writer.write(HEAD + frame(events) + b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    async def exchange_over_tls():
        server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_context)
        port = server.sockets[0].getsockname()[1]
        transport = StreamingTransport(ssl_context=client_context)
        outcome = Outcome()
        try:
            request = httpx.Request("POST", f"https://localhost:{port}/v1/chat/completions", content=b"{}")
            await stream_request(transport, request, True, outcome)
        finally:
            await transport.aclose()
            server.close()
            await server.wait_closed()
        return outcome, transport.read_sources

    outcome, sources = run(exchange_over_tls())
    assert outcome.success, outcome.error
    assert len(outcome.chunk_times) == 3
    assert set(sources) == {"poll"}
