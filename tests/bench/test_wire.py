"""HTTP/1.1 response parsing, chunked de-framing and SSE splitting, fed byte by byte and whole."""

from __future__ import annotations

import json

import pytest

from perflab.bench.http1 import (
    FRAMING_CHUNKED,
    FRAMING_EOF,
    FRAMING_LENGTH,
    ChunkedDecoder,
    ProtocolViolation,
    parse_head,
)
from perflab.bench.sse import SSEParser


def chunked(*pieces: bytes, trailer: bytes = b"") -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n" + trailer + b"\r\n"


def decode_in_steps(data: bytes, step: int):
    decoder = ChunkedDecoder()
    out, leftover = [], b""
    for start in range(0, len(data), step):
        payload, leftover = decoder.feed(data[start : start + step])
        out.append(payload)
        if decoder.finished:
            break
    return b"".join(out), decoder.finished, leftover


@pytest.mark.parametrize("step", [1, 2, 3, 7, 1000])
def test_chunked_body_survives_any_split(step):
    body = chunked(b"data: one\n\n", b"data: two\n\n" * 3, b"x" * 300, trailer=b"X-Trailer: yes\r\n")
    payload, finished, leftover = decode_in_steps(body + b"HTTP/1.1 next", step)
    assert payload == b"data: one\n\n" + b"data: two\n\n" * 3 + b"x" * 300
    assert finished
    if step == 1000:
        assert leftover == b"HTTP/1.1 next"


def test_chunk_extensions_and_uppercase_hex():
    decoder = ChunkedDecoder()
    payload, _ = decoder.feed(b"A;name=value\r\n0123456789\r\n0\r\n\r\n")
    assert payload == b"0123456789" and decoder.finished


@pytest.mark.parametrize("bad", [b"zz\r\nabc\r\n", b"3\r\nabcXY", b"-3\r\nabc\r\n"])
def test_malformed_chunks_are_protocol_violations(bad):
    with pytest.raises(ProtocolViolation):
        ChunkedDecoder().feed(bad)


def test_response_head_framing():
    head = parse_head(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked", b"POST"
    )
    assert (head.status, head.framing, head.keep_alive) == (200, FRAMING_CHUNKED, True)
    assert (b"Content-Type", b"text/event-stream") in head.headers
    head = parse_head(
        b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 12\r\nConnection: close", b"POST"
    )
    assert (head.status, head.reason, head.framing, head.content_length, head.keep_alive) == (
        500,
        b"Internal Server Error",
        FRAMING_LENGTH,
        12,
        False,
    )
    head = parse_head(b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream", b"POST")
    assert (head.framing, head.keep_alive) == (FRAMING_EOF, False)
    assert parse_head(b"HTTP/1.1 204 No Content", b"POST").content_length == 0


@pytest.mark.parametrize(
    "bad",
    [
        b"SPDY/3 200 OK",
        b"HTTP/1.1 abc OK",
        b"HTTP/1.1 200 OK\r\nno colon here",
        b"HTTP/1.1 200 OK\r\nContent-Length: many",
    ],
)
def test_bad_heads_are_rejected(bad):
    with pytest.raises(ProtocolViolation):
        parse_head(bad, b"GET")


def test_sse_events_split_anywhere_and_crlf():
    events = [json.dumps({"n": i}).encode() for i in range(5)]
    stream = b"".join(b"data: " + event + b"\r\n\r\n" for event in events) + b"data: [DONE]\r\n\r\n"
    for step in (1, 2, 5, 13, len(stream)):
        parser = SSEParser()
        payloads = []
        for start in range(0, len(stream), step):
            payloads += parser.feed(stream[start : start + step])
        assert payloads == events + [b"[DONE]"]
        assert parser.pending == b""


def test_sse_comments_fields_and_multiline_data():
    parser = SSEParser()
    stream = b': keep-alive\n\nevent: message\nid: 7\ndata: {"a":\ndata: 1}\n\ndata:no-space\n\nretry: 10\n\n'
    assert parser.feed(stream) == [b'{"a":\n1}', b"no-space"]


def test_sse_incomplete_event_waits():
    parser = SSEParser()
    assert parser.feed(b'data: {"partial": tr') == []
    assert parser.feed(b"ue}\n") == []
    assert parser.feed(b"\n") == [b'{"partial": true}']
