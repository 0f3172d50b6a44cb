"""The bench client's bounds on known inputs: the SSE parser's work and size, the default deadline."""

from __future__ import annotations

import pytest

from perflab.bench.client import max_text_chunks
from perflab.bench.options import PER_TOKEN_LIMIT_S, TTFT_ALLOWANCE_S, BenchOptions
from perflab.bench.sse import MAX_EVENT_BYTES, EventTooLarge, SSEParser


@pytest.mark.timeout(60)
def test_an_event_of_seven_mib_in_small_reads_is_parsed_once():
    # Rebuilding the buffer on every read copies ~100 GB here (minutes); reading it once takes well
    # under a second, so the test's 60 s limit tells the two apart.
    parser = SSEParser()
    body = b"data: " + b"x" * (7 * 1024 * 1024) + b"\n\n"
    payloads = []
    for start in range(0, len(body), 256):
        payloads += parser.feed(body[start : start + 256])
    assert payloads == [body[6:-2]]


@pytest.mark.parametrize("cut", range(1, 12))
def test_event_ends_split_across_reads_are_found(cut):
    body = b"data: a\r\n\r\ndata: b\n\ndata: c\n\r\n"
    parser = SSEParser()
    assert parser.feed(body[:cut]) + parser.feed(body[cut:]) == [b"a", b"b", b"c"]


def test_an_event_past_the_bound_is_refused_and_one_within_is_kept():
    parser = SSEParser(max_event_bytes=1000)
    assert parser.feed(b"data: " + b"y" * 990 + b"\n\n") == [b"y" * 990]
    parser.feed(b"data: " + b"z" * 900)
    with pytest.raises(EventTooLarge, match="exceeded"):
        parser.feed(b"z" * 200)
    assert MAX_EVENT_BYTES == 8 * 1024 * 1024


def test_default_deadline_follows_the_tokens_asked_for():
    options = BenchOptions(base_urls=["http://127.0.0.1:1"], model="m")
    assert options.request_deadline(128) == TTFT_ALLOWANCE_S + 128 * PER_TOKEN_LIMIT_S == 856.0
    assert "--timeout" not in options.to_argv()
    options.timeout = 30.0
    assert options.request_deadline(128) == 30.0
    assert options.to_argv()[options.to_argv().index("--timeout") + 1] == "30"


def test_text_chunk_bound_leaves_room_for_split_tokens():
    assert max_text_chunks(8) == 32 and max_text_chunks(1024) == 2064
