"""The streaming client and its transport against a real scripted HTTP server on loopback."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from perflab.bench.channel import SocketChannel
from perflab.bench.client import Outcome, StreamAborted, StreamDecoder, build_body, stream_request
from perflab.bench.transport import TIMING_EXTENSION, StreamingTransport
from tests.bench.loops import run
from tests.fixtures.streaming_server import Script, free_port


async def send_all(base_url, bodies, endpoint="chat", headers=None, transport=None):
    own = transport is None
    transport = transport or StreamingTransport()
    path = "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"
    outcomes = [Outcome() for _ in bodies]
    try:
        await asyncio.gather(
            *[
                stream_request(
                    transport,
                    httpx.Request("POST", base_url + path, content=body, headers=headers or {}),
                    endpoint == "chat",
                    outcome,
                    keep_text=True,
                )
                for body, outcome in zip(bodies, outcomes, strict=True)
            ]
        )
    finally:
        if own:
            await transport.aclose()
    return outcomes


def chat(tokens=5, prompt="hello there"):
    return build_body("chat", "scripted-model", prompt, tokens, True, 0.0)


def test_chat_stream_counts_text_chunks_and_reads_usage(scripted_server):
    server = scripted_server(Script(ttft_s=0.03, itl_s=0.01))
    [outcome] = run(send_all(server.base_url, [chat(tokens=6)]))
    assert outcome.success, outcome.error
    assert len(outcome.chunk_times) == 6  # the role-only first chunk carries no text and is not a token
    assert outcome.completion_tokens == 6 and outcome.prompt_tokens == 2
    assert "".join(outcome.text_parts) == " tok" * 6
    sent = server.served[0]
    assert sent.body["max_tokens"] == 6 and sent.body["ignore_eos"] is True
    assert sent.body["stream"] is True and sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["messages"] == [{"role": "user", "content": "hello there"}]


def test_measured_timings_match_what_the_server_did(kernel_timestamps, scripted_server):
    server = scripted_server(Script(ttft_s=0.05, itl_s=0.02))
    [outcome] = run(send_all(server.base_url, [chat(tokens=8)]))
    served = server.served[0]
    writes, stamps = served.chunk_times, outcome.chunk_times
    assert len(stamps) == len(writes) == 8
    # the server's thread notes that its last write returned after the client may have read it
    deadline = time.monotonic() + 10
    while len(served.written_by) < len(writes) and time.monotonic() < deadline:
        time.sleep(0.01)
    # Same clock on both sides. A read is stamped with the arrival of its newest bytes: a chunk carries
    # the arrival of the last chunk read with it (itself, unless the client was too busy to read in
    # time). On loopback that arrival is stamped while the server's write runs, however late either
    # side's process ran.
    newest = [max(index for index, other in enumerate(stamps) if other == stamp) for stamp in stamps]
    spans = [
        (writes[last], served.written_by[last], stamp) for stamp, last in zip(stamps, newest, strict=True)
    ]
    assert all(began - 0.001 <= stamp <= returned + 0.001 for began, returned, stamp in spans), spans
    assert writes[0] - served.received_at >= 0.05
    # The request left the client before the server read it, so the client's TTFT spans the server's.
    assert outcome.sent_at <= served.received_at
    assert stamps[0] - outcome.sent_at >= writes[newest[0]] - served.received_at - 0.001


def test_a_client_preempted_after_its_write_never_measures_less_than_the_server_took(
    kernel_timestamps, scripted_server, monkeypatch
):
    # The request is out on the wire as soon as it is written; a client that then loses the CPU for
    # 50 ms must still count the request's latencies from the write.
    server = scripted_server(Script(ttft_s=0.02, itl_s=0.01))
    write = SocketChannel.write

    def write_then_lose_the_cpu(channel: SocketChannel, data: bytes) -> None:
        write(channel, data)
        time.sleep(0.05)

    monkeypatch.setattr(SocketChannel, "write", write_then_lose_the_cpu)
    [outcome] = run(send_all(server.base_url, [chat(tokens=3)]))
    served = server.served[0]
    assert outcome.success and outcome.sent_at <= served.received_at
    assert outcome.chunk_times[0] - outcome.sent_at >= served.chunk_times[0] - served.received_at >= 0.02


def test_reasoning_chunks_count_for_ttft_and_itl(scripted_server):
    server = scripted_server(Script(ttft_s=0.02, itl_s=0.05, reasoning_tokens=3))
    [outcome] = run(send_all(server.base_url, [chat(tokens=5)]))
    assert outcome.success
    assert len(outcome.chunk_times) == 5
    # The first token is a reasoning chunk, written 20 ms after the request; content starts 150 ms later.
    served = server.served[0]
    assert outcome.chunk_times[0] - outcome.started_at >= 0.02
    assert outcome.chunk_times[0] >= served.chunk_times[0] and len(served.chunk_times) == 5


def test_completions_endpoint_and_multi_token_chunks(scripted_server):
    server = scripted_server(Script(tokens_per_chunk=3))
    body = build_body("completions", "scripted-model", "one two three", 7, True, None)
    [outcome] = run(send_all(server.base_url, [body], endpoint="completions"))
    assert outcome.success
    assert len(outcome.chunk_times) == 3  # 3 + 3 + 1 tokens
    assert outcome.chunk_chars == [12, 12, 4]
    assert outcome.completion_tokens == 7
    assert server.served[0].body["prompt"] == "one two three"
    assert "temperature" not in server.served[0].body


def test_keep_alive_reuses_connections_and_sends_the_api_key(scripted_server):
    server = scripted_server(Script())

    async def twice():
        transport = StreamingTransport()
        try:
            first = await send_all(
                server.base_url, [chat(), chat()], headers={"Authorization": "Bearer k"}, transport=transport
            )
            second = await send_all(server.base_url, [chat(), chat()], transport=transport)
        finally:
            await transport.aclose()
        return first + second

    outcomes = run(twice())
    assert all(outcome.success for outcome in outcomes)
    assert [outcome.connect_s is None for outcome in outcomes] == [False, False, True, True]
    assert server.served[0].headers["authorization"] == "Bearer k"


def test_http_error_is_a_failure_with_the_servers_message(scripted_server):
    server = scripted_server(Script(status=500))
    [outcome] = run(send_all(server.base_url, [chat()]))
    assert not outcome.success
    assert outcome.reason == "http_500"
    assert "scripted failure" in outcome.error


def test_a_hostile_error_message_is_kept_as_text_a_database_stores(scripted_server):
    server = scripted_server(Script(status=500, error_message="bad \u0000 byte and a lone \ud800 half"))
    [outcome] = run(send_all(server.base_url, [chat()]))
    assert outcome.reason == "http_500"
    assert "\0" not in outcome.error and outcome.error.encode("utf-8")
    assert outcome.error.endswith(": bad \ufffd byte and a lone \ufffd half")


def test_stream_cut_mid_way_is_interrupted(scripted_server):
    server = scripted_server(Script(itl_s=0.002, cut_after=3))
    [outcome] = run(send_all(server.base_url, [chat(tokens=10)]))
    assert not outcome.success
    assert outcome.reason == "stream_interrupted"
    assert len(outcome.chunk_times) == 3


def test_eof_framed_stream_without_done_is_interrupted(scripted_server):
    server = scripted_server(Script(framing="eof", done=False))
    [outcome] = run(send_all(server.base_url, [chat()]))
    assert outcome.reason == "stream_interrupted"
    server_ok = scripted_server(Script(framing="eof"))
    [complete] = run(send_all(server_ok.base_url, [chat()]))
    assert complete.success and len(complete.chunk_times) == 5


def test_missing_usage_leaves_completion_tokens_unknown(scripted_server):
    server = scripted_server(Script(usage=False))
    [outcome] = run(send_all(server.base_url, [chat(tokens=4)]))
    assert outcome.success and outcome.completion_tokens is None and len(outcome.chunk_times) == 4


def test_unreachable_server_is_a_connect_error():
    [outcome] = run(send_all(f"http://127.0.0.1:{free_port()}", [chat()]))
    assert outcome.reason == "connect_error"
    assert outcome.sent_at is None


def test_generic_httpx_transport_path_gives_the_same_outcome(scripted_server):
    server = scripted_server(Script(ttft_s=0.01, itl_s=0.002))

    async def with_default_transport():
        transport = httpx.AsyncHTTPTransport()
        async with transport:
            return await send_all(server.base_url, [chat(tokens=4)], transport=transport)

    [outcome] = run(with_default_transport())
    assert outcome.success and len(outcome.chunk_times) == 4 and outcome.completion_tokens == 4


def test_transport_works_under_httpx_async_client(scripted_server):
    server = scripted_server(Script(ttft_s=0.01, itl_s=0.002))

    async def through_client():
        async with httpx.AsyncClient(transport=StreamingTransport(), base_url=server.base_url) as client:
            models = await client.get("/v1/models")
            async with client.stream("POST", "/v1/chat/completions", content=chat(tokens=3)) as response:
                timing = response.extensions[TIMING_EXTENSION]
                body = b"".join([chunk async for chunk in response.aiter_raw()])
            return models.json(), body, timing

    models, body, timing = run(through_client())
    assert models["data"][0]["id"] == "scripted-model"
    events = [line[6:] for line in body.split(b"\n\n") if line.startswith(b"data: ")]
    assert events[-1] == b"[DONE]"
    assert json.loads(events[-2])["usage"]["completion_tokens"] == 3
    assert timing.arrival >= timing.sent_at


def sse(*events):
    return b"".join(
        b"data: " + (e if isinstance(e, bytes) else json.dumps(e).encode()) + b"\n\n" for e in events
    )


def test_decoder_counts_reasoning_and_content_and_ignores_role_and_finish_chunks():
    outcome = Outcome()
    decoder = StreamDecoder(outcome, chat=True, keep_text=True)
    decoder(sse({"choices": [{"delta": {"role": "assistant", "content": ""}}]}), 1.0)
    decoder(
        sse({"choices": [{"delta": {"reasoning": "ab"}}]}, {"choices": [{"delta": {"content": None}}]}), 2.0
    )
    decoder(sse({"choices": [{"delta": {"reasoning_content": "x", "content": "yz"}}]}), 3.0)
    decoder(sse({"choices": [{"delta": {}, "finish_reason": "length"}]}), 4.0)
    decoder(sse({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}, b"[DONE]"), 5.0)
    assert outcome.chunk_times == [2.0, 3.0]
    assert outcome.chunk_chars == [2, 3]
    assert outcome.text_parts == ["ab", "xyz"]
    assert (outcome.prompt_tokens, outcome.completion_tokens) == (7, 3)
    assert decoder.done and outcome.success


@pytest.mark.parametrize(
    "payload, reason",
    [
        (b"{not json", "invalid_response"),
        (b'"a string"', "invalid_response"),
        (json.dumps({"error": {"message": "engine died"}}).encode(), "server_error"),
        (json.dumps({"object": "error", "message": "bad request"}).encode(), "server_error"),
    ],
)
def test_decoder_stops_on_bad_or_error_events(payload, reason):
    outcome = Outcome()
    decoder = StreamDecoder(outcome, chat=True, keep_text=False)
    with pytest.raises(StreamAborted):
        decoder(sse({"choices": [{"delta": {"content": "a"}}]}, payload), 1.0)
    assert outcome.reason == reason and outcome.chunk_times == [1.0]


def test_connection_closed_by_the_server_while_idle_is_replaced(scripted_server):
    server = scripted_server(Script())

    async def across_server_close():
        transport = StreamingTransport()
        try:
            [first] = await send_all(server.base_url, [chat()], transport=transport)
            server.drop_connections()
            await asyncio.sleep(0.2)
            [second] = await send_all(server.base_url, [chat()], transport=transport)
        finally:
            await transport.aclose()
        return first, second

    first, second = run(across_server_close())
    assert first.success and second.success
    assert second.connect_s is not None  # a new connection, not the closed one


def test_decoder_counts_tool_call_chunks_and_empty_tokens_as_vllm_033_does():
    # vLLM 0.33.0 _choice_has_streamed_output: tool_calls, function_call and an empty content without a
    # role are generated output; the opening role chunk is not.
    outcome = Outcome()
    decoder = StreamDecoder(outcome, chat=True, keep_text=False)
    decoder(sse({"choices": [{"delta": {"role": "assistant", "content": ""}}]}), 1.0)
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "get", "arguments": ""}}
    decoder(sse({"choices": [{"delta": {"tool_calls": [call]}}]}), 2.0)
    more = {"index": 0, "function": {"arguments": '{"a"'}}
    decoder(sse({"choices": [{"delta": {"tool_calls": [more]}}]}), 3.0)
    decoder(sse({"choices": [{"delta": {"function_call": {"arguments": ": 1}"}}}]}), 4.0)
    decoder(sse({"choices": [{"delta": {"content": ""}}]}), 5.0)
    decoder(sse({"choices": [{"delta": {"content": None, "tool_calls": []}}]}), 6.0)
    assert outcome.chunk_times == [2.0, 3.0, 4.0, 5.0]
    assert outcome.chunk_chars == [3, 4, 4, 0]


def test_decoder_reads_the_servers_per_request_metrics_in_seconds():
    outcome = Outcome()
    decoder = StreamDecoder(outcome, chat=False, keep_text=False)
    usage = {"prompt_tokens": 3, "completion_tokens": 1}
    metrics = {"queue_time_ms": 12.5, "time_to_first_token_ms": 40, "mean_itl_ms": 2.0}
    decoder(sse({"choices": [{"text": "a"}]}, {"choices": [], "usage": usage, "metrics": metrics}), 1.0)
    assert (outcome.server_queue_s, outcome.server_ttft_s) == (0.0125, 0.04)
    other = Outcome()
    StreamDecoder(other, chat=False, keep_text=False)(
        sse({"usage": usage, "metrics": {"queue_time_ms": True, "time_to_first_token_ms": "9"}}),
        1.0,
    )
    assert (other.server_queue_s, other.server_ttft_s) == (None, None)


def test_a_stream_of_only_tool_calls_succeeds(scripted_server):
    server = scripted_server(Script(tool_calls=True, token_text='{"q"'))
    [outcome] = run(send_all(server.base_url, [chat(tokens=4)]))
    assert outcome.success, outcome.error
    assert len(outcome.chunk_times) == 4 and outcome.completion_tokens == 4


@pytest.mark.parametrize("bad", [[5.0, 4.0], [-1.0, 2.0], [1.0], "1,2", [1.0, float("inf")], [True, 2]])
def test_a_simulators_energy_counter_is_two_numbers_that_do_not_go_back(bad):
    """The last chunk's ``perflab_sim_energy_mj`` (at the request's arrival, at its end) is kept; one that
    is not two finite numbers, not negative and not going back, fails the request."""
    clock = {"perflab_sim_t": 0.2, "perflab_sim_arrival": 0.0}
    kept = Outcome()
    StreamDecoder(kept, chat=True, keep_text=False)(
        sse({"choices": [{"delta": {"content": "a"}}], **clock, "perflab_sim_energy_mj": [1.5, 2]}), 1.0
    )
    assert kept.success and kept.sim_energy_mj == (1.5, 2.0)
    refused = Outcome()
    with pytest.raises(StreamAborted):
        StreamDecoder(refused, chat=True, keep_text=False)(
            sse({"choices": [{"delta": {"content": "a"}}], **clock, "perflab_sim_energy_mj": bad}), 1.0
        )
    assert refused.reason == "invalid_response" and refused.sim_energy_mj is None
