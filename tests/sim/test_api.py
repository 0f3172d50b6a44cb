"""The simulated server's OpenAI API against a real process: bodies, counts, errors, streams, connections."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time

from tests.fixtures.polling import wait_until
from tests.sim.sse_client import chat_payload, request


def _call(url: str, path: str, payload=None, method: str = "POST", headers=None):
    result = asyncio.run(request(url, path, payload, method, headers))
    body = json.loads(result.body) if result.body else None
    return result.status, body


def test_models_health_version(sim_server):
    url = sim_server(
        fixed_ttft_ms=1, fixed_itl_ms=1, served_model_name=["alias-a", "alias-b"], max_model_len=4096
    )
    status, models = _call(url, "/v1/models", method="GET")
    assert status == 200
    assert [entry["id"] for entry in models["data"]] == ["alias-a", "alias-b"]
    assert models["data"][0]["max_model_len"] == 4096
    assert _call(url, "/health", method="GET")[0] == 200
    assert _call(url, "/version", method="GET")[1] == {"version": "0.11.0"}
    assert _call(url, "/nope", method="GET")[0] == 404


def test_tokenize_detokenize_and_usage_agree(sim_server):
    url = sim_server(fixed_ttft_ms=1, fixed_itl_ms=1)
    prompt = "Hello, world! Simulated engines count words and punctuation."
    status, tokenized = _call(url, "/tokenize", {"model": "sim-model", "prompt": prompt})
    assert status == 200 and tokenized["count"] == len(tokenized["tokens"]) == 11
    status, detokenized = _call(url, "/detokenize", {"model": "sim-model", "tokens": tokenized["tokens"]})
    assert status == 200
    assert _call(url, "/tokenize", {"prompt": detokenized["prompt"]})[1]["tokens"] == tokenized["tokens"]
    _, completion = _call(url, "/v1/completions", {"model": "sim-model", "prompt": prompt, "max_tokens": 3})
    assert completion["usage"]["prompt_tokens"] == 11
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": prompt}]
    _, chat_count = _call(url, "/tokenize", {"model": "sim-model", "messages": messages})
    _, chat = _call(
        url, "/v1/chat/completions", {"model": "sim-model", "messages": messages, "max_tokens": 3}
    )
    assert chat["usage"]["prompt_tokens"] == chat_count["count"] == 14
    assert chat["choices"][0]["message"]["role"] == "assistant"
    assert len(chat["choices"][0]["message"]["content"].split()) == chat["usage"]["completion_tokens"] == 3


def test_errors_have_vllm_status_and_message(sim_server):
    url = sim_server(fixed_ttft_ms=1, fixed_itl_ms=1, max_model_len=32)
    status, body = _call(url, "/v1/chat/completions", chat_payload("other-model", "hi", 4))
    assert status == 404 and body["error"]["message"] == "The model `other-model` does not exist."
    result = asyncio.run(request(url, "/v1/completions", None))
    assert result.status == 400
    status, body = _call(
        url, "/v1/completions", {"model": "sim-model", "prompt": "word " * 40, "max_tokens": 1}
    )
    assert status == 400
    assert body["error"]["message"] == (
        "This model's maximum context length is 32 tokens. However, your request "
        "has 40 input tokens. Please reduce the length of the input messages."
    )
    status, body = _call(
        url, "/v1/completions", {"model": "sim-model", "prompt": "word " * 10, "max_tokens": 30}
    )
    assert (
        status == 400
        and "'max_tokens' or 'max_completion_tokens' is too large: 30" in body["error"]["message"]
    )
    status, body = _call(url, "/v1/completions", {"model": "sim-model", "prompt": "", "max_tokens": 3})
    assert status == 400 and "cannot be empty" in body["error"]["message"]
    status, body = _call(url, "/v1/chat/completions", {"model": "sim-model", "messages": "hi"})
    assert status == 400 and body["error"]["type"] == "BadRequestError"


def test_api_key_guards_v1_routes_only(sim_server):
    url = sim_server(fixed_ttft_ms=1, fixed_itl_ms=1, api_key="s3cret")
    assert _call(url, "/v1/models", method="GET") == (401, {"error": "Unauthorized"})
    assert _call(url, "/health", method="GET")[0] == 200
    status, _ = _call(url, "/v1/models", method="GET", headers={"authorization": "Bearer s3cret"})
    assert status == 200


def test_sglang_flavour_error_format_and_metrics_names(sim_server):
    url = sim_server(fixed_ttft_ms=1, fixed_itl_ms=1, engine="sglang")
    status, body = _call(url, "/v1/chat/completions", chat_payload("missing", "hi", 2))
    assert status == 404 and body["object"] == "error" and body["code"] == 404
    result = asyncio.run(request(url, "/metrics", method="GET"))
    text = result.body.decode()
    assert result.headers["content-type"].startswith("text/plain; version=0.0.4")
    for name in (
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:token_usage",
        "sglang:time_to_first_token_seconds_bucket",
    ):
        assert name in text


def test_reasoning_parser_streams_reasoning_first(sim_server):
    url = sim_server(fixed_ttft_ms=1, fixed_itl_ms=1, reasoning_parser="qwen3")
    result = asyncio.run(request(url, "/v1/chat/completions", chat_payload("sim-model", "think first", 8)))
    deltas = [
        event["choices"][0]["delta"]
        for _, event in result.events
        if isinstance(event, dict) and event.get("choices")
    ]
    keys = ["reasoning_content" if "reasoning_content" in delta else "content" for delta in deltas]
    assert keys == ["reasoning_content"] * 2 + ["content"] * 6
    assert deltas[0]["role"] == "assistant"
    assert result.usage["completion_tokens"] == 8


def test_eos_length_is_deterministic_without_ignore_eos(sim_server):
    url = sim_server(fixed_ttft_ms=0, fixed_itl_ms=0)
    payload = {"model": "sim-model", "prompt": "the same prompt every time", "max_tokens": 2000}
    lengths = {_call(url, "/v1/completions", payload)[1]["usage"]["completion_tokens"] for _ in range(3)}
    assert len(lengths) == 1 and 32 <= lengths.pop() < 512
    _, stopped = _call(url, "/v1/completions", payload)
    assert stopped["choices"][0]["finish_reason"] == "stop"
    _, capped = _call(url, "/v1/completions", dict(payload, max_tokens=5))
    assert capped["usage"]["completion_tokens"] == 5 and capped["choices"][0]["finish_reason"] == "length"
    _, exact = _call(url, "/v1/completions", dict(payload, ignore_eos=True, max_tokens=700))
    assert exact["usage"]["completion_tokens"] == 700


def _metric(url: str, name: str) -> float:
    text = asyncio.run(request(url, "/metrics", method="GET")).body.decode()
    return sum(float(value) for value in re.findall(rf"^{re.escape(name)}{{[^}}]*}} (\S+)$", text, re.M))


def test_client_disconnect_aborts_the_sequence(sim_server):
    url = sim_server(fixed_ttft_ms=5, fixed_itl_ms=50)
    port = int(url.rsplit(":", 1)[1])
    body = json.dumps(chat_payload("sim-model", "long answer please", 1000)).encode()
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(body), body)
        )
        client.settimeout(5)
        received = b""
        while b"chat.completion.chunk" not in received:  # the response head comes first, then tokens
            chunk = client.recv(65536)
            assert chunk, received
            received += chunk
        assert _metric(url, "vllm:num_requests_running") == 1
    wait_until(
        lambda: _metric(url, "vllm:num_requests_running") == 0,
        5,
        interval_s=0.05,
        failure="the aborted request is still running",
    )
    assert 'finished_reason="abort"' in asyncio.run(request(url, "/metrics", method="GET")).body.decode()
    assert _metric(url, "vllm:generation_tokens_total") < 100


def test_keep_alive_answers_pipelined_requests_in_order(sim_server):
    url = sim_server(fixed_ttft_ms=1, fixed_itl_ms=1)
    port = int(url.rsplit(":", 1)[1])
    one = json.dumps({"model": "sim-model", "prompt": "a", "max_tokens": 2, "ignore_eos": True}).encode()
    two = json.dumps({"model": "sim-model", "prompt": "a b", "max_tokens": 3, "ignore_eos": True}).encode()
    head = b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.sendall(head % len(one) + one + head % len(two) + two)
        received = b""
        deadline = time.monotonic() + 5
        while received.count(b'"completion_tokens"') < 2 and time.monotonic() < deadline:
            received += client.recv(65536)
    bodies = [json.loads(part) for part in re.findall(rb"\r\n\r\n(\{.*?\})(?=HTTP/1.1|$)", received, re.S)]
    assert [body["usage"]["completion_tokens"] for body in bodies] == [2, 3]
