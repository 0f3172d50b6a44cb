"""One streaming request to an OpenAI-compatible server, recorded as an ``Outcome``.

The request asks for ``max_tokens`` with ``ignore_eos`` (so output lengths are exact) and
``stream_options.include_usage`` (so the server reports the token counts). Every SSE event is decoded;
a chunk whose first choice carries generated output is a token chunk, timed by when its bytes arrived
(``channel``). For chat that follows vLLM 0.33.0's ``_choice_has_streamed_output``
(``vllm/benchmarks/lib/endpoint_request_func.py``): ``delta.content``, ``delta.reasoning`` (and
SGLang's ``delta.reasoning_content``), ``delta.tool_calls`` or ``delta.function_call``, or an empty
``content`` without a ``role`` (a token that decodes to nothing); for completions, ``text``. A stream
of only tool calls therefore has a first token. The per-request timings some servers put on the
final usage chunk (vLLM 0.33 ``--enable-per-request-metrics``: ``metrics.queue_time_ms`` and
``metrics.time_to_first_token_ms``) are kept as the server's queue time and TTFT, in seconds. Token
chunks that came in one read with a later token chunk of the same response share that read's time,
which may be later than their own; they are counted in ``Outcome.coalesced``. Failures never raise:
they end the outcome with a short reason (``http_500``, ``stream_interrupted``, ``timeout``,
``connect_error``, …) and a message.
"""

from __future__ import annotations

import json
import time
from json.decoder import JSONDecoder
from typing import Any, Dict, List, Optional

import httpx

from perflab.bench.sse import SSEParser
from perflab.bench.transport import TIMING_EXTENSION, TimedBody

# The C scanner behind json.loads, called directly: half the cost per event of json.loads(bytes).
_scan_json = JSONDecoder().scan_once


def build_body(
    endpoint: str,
    model: str,
    prompt: str,
    max_tokens: int,
    ignore_eos: bool,
    temperature: Optional[float],
    extra: Optional[Dict[str, Any]] = None,
) -> bytes:
    """The JSON request body for one prompt; ``extra`` (sampling parameters, ``--extra-body``) is
    merged in last, as ``vllm bench serve`` does."""
    body: Dict[str, Any] = {"model": model}
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    body["max_tokens"] = max_tokens
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    if ignore_eos:
        body["ignore_eos"] = True
    if temperature is not None:
        body["temperature"] = temperature
    if extra:
        body.update(extra)
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


class Outcome:
    """Raw facts about one request, in ``time.perf_counter()`` seconds."""

    __slots__ = (
        "started_at",
        "sent_at",
        "ended_at",
        "connect_s",
        "chunk_times",
        "chunk_chars",
        "text_parts",
        "completion_tokens",
        "prompt_tokens",
        "server_queue_s",
        "server_ttft_s",
        "coalesced",
        "error",
        "reason",
    )

    def __init__(self) -> None:
        self.started_at = 0.0
        self.sent_at: Optional[float] = None
        self.ended_at = 0.0
        self.connect_s: Optional[float] = None
        self.chunk_times: List[float] = []
        self.chunk_chars: List[int] = []
        self.text_parts: List[str] = []
        self.completion_tokens: Optional[int] = None
        self.prompt_tokens: Optional[int] = None
        self.server_queue_s: Optional[float] = None
        self.server_ttft_s: Optional[float] = None
        self.coalesced = 0
        self.error: Optional[str] = None
        self.reason: Optional[str] = None

    @property
    def success(self) -> bool:
        return self.error is None

    def fail(self, reason: str, message: str) -> None:
        if self.error is None:
            self.reason = reason
            self.error = message
        self.ended_at = time.perf_counter()


def _error_message(body: bytes) -> str:
    """The ``message`` of an OpenAI-style error body, else the start of the body."""
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        error = parsed.get("error", parsed)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"][:300]
        if isinstance(error, str):
            return error[:300]
    return body[:300].decode("utf-8", "replace").strip()


def _read_usage(outcome: Outcome, usage: Any) -> None:
    if isinstance(usage, dict):
        completion = usage.get("completion_tokens")
        prompt = usage.get("prompt_tokens")
        if isinstance(completion, int):
            outcome.completion_tokens = completion
        if isinstance(prompt, int):
            outcome.prompt_tokens = prompt


def _milliseconds_as_seconds(value: Any) -> Optional[float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value / 1000.0
    return None


def _read_server_metrics(outcome: Outcome, metrics: Any) -> None:
    """The server's own queue time and TTFT (vLLM 0.33 names, milliseconds on the wire)."""
    if isinstance(metrics, dict):
        outcome.server_queue_s = _milliseconds_as_seconds(metrics.get("queue_time_ms"))
        outcome.server_ttft_s = _milliseconds_as_seconds(metrics.get("time_to_first_token_ms"))


def _tool_call_text(delta: Dict[str, Any]) -> str:
    """The name and argument text a tool-call delta streams (what the token chunk stands for)."""
    calls = delta.get("tool_calls") or []
    legacy = delta.get("function_call")
    functions = [call.get("function") or {} for call in calls] + ([legacy] if legacy else [])
    return "".join((function.get("name") or "") + (function.get("arguments") or "") for function in functions)


def _chat_output(delta: Dict[str, Any]) -> Optional[str]:
    """The text a chat delta streams, ``""`` for a token without text, None for no output at all."""
    text = delta.get("content") or ""
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    if reasoning:
        text = reasoning + text
    if text:
        return text
    if delta.get("tool_calls") or delta.get("function_call"):
        return _tool_call_text(delta)
    if delta.get("content") == "" and "role" not in delta:
        return ""
    return None


class StreamAborted(Exception):
    """The stream carried an error or undecodable data; the outcome already says why."""


class StreamDecoder:
    """Turns body buffers into token-chunk timestamps, text lengths and usage on an ``Outcome``."""

    __slots__ = ("_outcome", "_chat", "_keep_text", "_feed", "done")

    def __init__(self, outcome: Outcome, chat: bool, keep_text: bool) -> None:
        self._outcome = outcome
        self._chat = chat
        self._keep_text = keep_text
        self._feed = SSEParser().feed
        self.done = False

    def __call__(self, buffer: bytes, arrived: float) -> None:
        outcome = self._outcome
        times = outcome.chunk_times
        chars = outcome.chunk_chars
        scan = _scan_json
        before = len(times)
        for payload in self._feed(buffer):
            if payload == b"[DONE]":
                self.done = True
                continue
            try:
                event = scan(payload.decode("utf-8"), 0)[0]
                choices = event.get("choices")
                if choices:
                    choice = choices[0]
                    if self._chat:
                        text = _chat_output(choice.get("delta") or {})
                    else:
                        text = choice.get("text") or None
                    if text is not None:
                        times.append(arrived)
                        chars.append(len(text))
                        if self._keep_text and text:
                            outcome.text_parts.append(text)
                elif "error" in event or event.get("object") == "error":
                    outcome.fail("server_error", f"error event in stream: {_error_message(payload)}")
                    raise StreamAborted()
                usage = event.get("usage")
                if usage:
                    _read_usage(outcome, usage)
                if "metrics" in event:
                    _read_server_metrics(outcome, event["metrics"])
            except (StopIteration, ValueError, AttributeError, TypeError, IndexError, KeyError):
                outcome.fail("invalid_response", f"unexpected SSE data: {payload[:120]!r}")
                raise StreamAborted() from None
        if len(times) > before + 1:
            outcome.coalesced += len(times) - before - 1


async def _consume_stream(response: httpx.Response, outcome: Outcome, chat: bool, keep_text: bool) -> None:
    decoder = StreamDecoder(outcome, chat, keep_text)
    body = response.stream
    if isinstance(body, TimedBody):
        await body.drain_into(decoder)
    else:
        async for buffer in response.aiter_raw():
            decoder(buffer, time.perf_counter())
    outcome.ended_at = time.perf_counter()
    if not outcome.chunk_times:
        outcome.fail("empty_response", "the stream ended without any generated output")
    elif (
        not decoder.done
        and "transfer-encoding" not in response.headers
        and "content-length" not in response.headers
    ):
        outcome.fail("stream_interrupted", "the connection closed before [DONE]")


async def stream_request(
    transport: httpx.AsyncBaseTransport,
    request: httpx.Request,
    chat: bool,
    outcome: Outcome,
    keep_text: bool = False,
) -> None:
    """Send one request and fill ``outcome`` in place (so a timeout keeps what had arrived).

    The request goes straight to the transport: ``httpx.AsyncClient``'s per-request cookie, auth and
    redirect handling costs more CPU than the transport itself and a benchmark needs none of it.
    """
    started = outcome.started_at = time.perf_counter()
    try:
        response = await transport.handle_async_request(request)
        try:
            timing = response.extensions.get(TIMING_EXTENSION)
            outcome.sent_at = timing.sent_at if timing is not None else started
            outcome.connect_s = timing.connect_s if timing is not None else None
            if response.status_code != 200:
                message = _error_message(await response.aread())
                outcome.fail(f"http_{response.status_code}", f"HTTP {response.status_code}: {message}")
                return
            await _consume_stream(response, outcome, chat, keep_text)
        finally:
            await response.aclose()
    except StreamAborted:
        pass
    except httpx.TimeoutException as exc:
        outcome.fail("timeout", f"timed out: {exc}")
    except (httpx.ConnectError, httpx.UnsupportedProtocol) as exc:
        outcome.fail("connect_error", str(exc))
    except httpx.RemoteProtocolError as exc:
        outcome.fail("stream_interrupted" if outcome.sent_at is not None else "connection_closed", str(exc))
    except httpx.HTTPError as exc:
        outcome.fail("transport_error", f"{type(exc).__name__}: {exc}")
    except OSError as exc:
        outcome.fail("transport_error", f"{type(exc).__name__}: {exc}")
