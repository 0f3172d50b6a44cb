"""One streaming request to an OpenAI-compatible server, recorded as an ``Outcome``.

The request asks for ``max_tokens`` with ``ignore_eos`` (so output lengths are exact) and
``stream_options.include_usage`` (so the server reports the token counts, and the prompt tokens it
found in its prefix cache, ``usage.prompt_tokens_details.cached_tokens``, where it reports them: vLLM
with ``--enable-prompt-tokens-details``). Every SSE event is decoded;
a chunk whose first choice carries generated output is a token chunk, timed by when its bytes arrived
(``channel``). For chat that follows vLLM 0.33.0's ``_choice_has_streamed_output``
(``vllm/benchmarks/lib/endpoint_request_func.py``): ``delta.content``, ``delta.reasoning`` (and
SGLang's ``delta.reasoning_content``), ``delta.tool_calls`` or ``delta.function_call``, or an empty
``content`` without a ``role`` (a token that decodes to nothing); for completions, ``text``. A stream
of only tool calls therefore has a first token. The per-request timings some servers put on the
final usage chunk (vLLM 0.33 ``--enable-per-request-metrics``: ``metrics.queue_time_ms`` and
``metrics.time_to_first_token_ms``) are kept as the server's queue time and TTFT, in seconds; a
simulator's clock (``perflab_sim_t`` on each token chunk, ``perflab_sim_arrival`` and
``perflab_sim_late`` on the first, ``perflab_sim_energy_mj`` on the last: ``perflab.bench.simclock``) is
kept beside the arrival times. Token
chunks that came in one read with a later token chunk of the same response share that read's time,
which may be later than their own; they are counted in ``Outcome.coalesced``. Failures never raise:
they end the outcome with a short reason (``http_500``, ``stream_interrupted``, ``timeout``,
``connect_error``, …) and a message.

What a server sends is bounded where it enters: an error body is read up to ``ERROR_BODY_BYTES``,
one SSE event up to ``MAX_EVENT_BYTES`` (``sse``), JSON as deep as Python's parser allows, at most
``max_text_chunks(max_tokens)`` token chunks, and ``usage`` counts within ``[0, MAX_USAGE_TOKENS]``;
past a bound the request ends ``invalid_response`` (its message names the bound). A failure's message is
kept as text every database stores: a NUL character or a lone surrogate half in it (a hostile server's
error body) becomes U+FFFD.
"""

from __future__ import annotations

import json
import math
import time
from json.decoder import JSONDecoder
from typing import Any, Dict, List, Optional, Tuple, Union

import httpx

from perflab.bench.sse import EventTooLarge, SSEParser
from perflab.bench.transport import TIMING_EXTENSION, TimedBody

# The C scanner behind json.loads, called directly: half the cost per event of json.loads(bytes).
_scan_json = JSONDecoder().scan_once
# How much of an error body is read for its message; the rest is never read.
ERROR_BODY_BYTES = 64 * 1024
# The largest token count a usage field may report: above any model's context window (10 M tokens).
MAX_USAGE_TOKENS = 10_000_000


def max_text_chunks(max_tokens: int) -> int:
    """How many text chunks a response to ``max_tokens`` may carry: one token can come in at most
    one chunk, with slack for servers that split a token's text; more means the stream never ends."""
    return 2 * max_tokens + 16


def build_body(
    endpoint: str,
    model: str,
    prompt: Union[str, List[Dict[str, str]]],
    max_tokens: int,
    ignore_eos: bool,
    temperature: Optional[float],
    extra: Optional[Dict[str, Any]] = None,
) -> bytes:
    """The JSON request body for one prompt (a chat's messages as they are: a session's history);
    ``extra`` (sampling parameters, ``--extra-body``) is merged in last, as ``vllm bench serve`` does."""
    body: Dict[str, Any] = {"model": model}
    if not isinstance(prompt, str):
        body["messages"] = prompt
    elif endpoint == "chat":
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
        "cached_tokens",
        "server_queue_s",
        "server_ttft_s",
        "sim_times",
        "sim_arrival",
        "sim_late",
        "sim_energy_mj",
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
        self.cached_tokens: Optional[int] = None
        self.server_queue_s: Optional[float] = None
        self.server_ttft_s: Optional[float] = None
        self.sim_times: List[float] = []
        self.sim_arrival: Optional[float] = None
        self.sim_late = 0.0
        self.sim_energy_mj: Optional[Tuple[float, float]] = None
        self.coalesced = 0
        self.error: Optional[str] = None
        self.reason: Optional[str] = None

    @property
    def success(self) -> bool:
        return self.error is None

    def fail(self, reason: str, message: str) -> None:
        if self.error is None:
            self.reason = reason
            self.error = _storable_text(message)
        self.ended_at = time.perf_counter()


def _storable_text(text: str) -> str:
    """``text`` with each NUL character and lone surrogate half replaced by U+FFFD."""
    return "".join("\ufffd" if char == "\0" or "\ud800" <= char <= "\udfff" else char for char in text)


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


class UsageOutOfRange(ValueError):
    """A ``usage`` count no real response can have."""


def _usage_count(usage: Dict[str, Any], key: str) -> Optional[int]:
    """``usage[key]`` when it is a token count; raises ``UsageOutOfRange`` when it is an integer
    outside ``[0, MAX_USAGE_TOKENS]``."""
    value = usage.get(key)
    if not isinstance(value, int):
        return None
    if isinstance(value, bool) or not 0 <= value <= MAX_USAGE_TOKENS:
        shown = value if abs(value) < 10**12 else format(value, ".3e")
        raise UsageOutOfRange(f"usage {key} {shown} is outside [0, {MAX_USAGE_TOKENS}]")
    return value


def _read_usage(outcome: Outcome, usage: Any) -> None:
    if isinstance(usage, dict):
        completion = _usage_count(usage, "completion_tokens")
        prompt = _usage_count(usage, "prompt_tokens")
        if completion is not None:
            outcome.completion_tokens = completion
        if prompt is not None:
            outcome.prompt_tokens = prompt
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict):
            cached = _usage_count(details, "cached_tokens")
            if cached is not None:
                outcome.cached_tokens = cached


def _milliseconds_as_seconds(value: Any) -> Optional[float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value / 1000.0
    return None


def _read_server_metrics(outcome: Outcome, metrics: Any) -> None:
    """The server's own queue time and TTFT (vLLM 0.33 names, milliseconds on the wire)."""
    if isinstance(metrics, dict):
        outcome.server_queue_s = _milliseconds_as_seconds(metrics.get("queue_time_ms"))
        outcome.server_ttft_s = _milliseconds_as_seconds(metrics.get("time_to_first_token_ms"))


def _clock_seconds(event: Dict[str, Any], key: str) -> Optional[float]:
    """A simulator's clock field of an event (seconds), None when absent; ValueError when it is no
    finite number."""
    value = event.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{key} is not a finite number")
    return float(value)


def _read_clock(outcome: Outcome, event: Dict[str, Any]) -> None:
    """The simulated time of a token chunk, and on the first one the request's simulated send time."""
    made = _clock_seconds(event, "perflab_sim_t")
    if made is None:
        return
    outcome.sim_times.append(made)
    if len(outcome.sim_times) == 1:
        outcome.sim_arrival = _clock_seconds(event, "perflab_sim_arrival")
        outcome.sim_late = _clock_seconds(event, "perflab_sim_late") or 0.0
    energy = event.get("perflab_sim_energy_mj")
    if energy is not None:
        outcome.sim_energy_mj = _energy_counter(energy)


def _energy_counter(value: Any) -> Tuple[float, float]:
    """The simulator's energy counter at a request's arrival and at its end (mJ); ValueError unless two
    finite numbers, not negative, that do not go back."""
    numbers = value if isinstance(value, list) and len(value) == 2 else []
    if not all(isinstance(n, (int, float)) and not isinstance(n, bool) and math.isfinite(n) for n in numbers):
        raise ValueError("perflab_sim_energy_mj is not two finite numbers")
    if not 0 <= numbers[0] <= numbers[1]:
        raise ValueError("perflab_sim_energy_mj goes back or is negative")
    return float(numbers[0]), float(numbers[1])


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


async def _read_error_body(response: httpx.Response) -> bytes:
    """The first ``ERROR_BODY_BYTES`` of an error response's body (the rest is left unread)."""
    parts: List[bytes] = []
    size = 0
    async for buffer in response.aiter_raw():
        parts.append(buffer)
        size += len(buffer)
        if size >= ERROR_BODY_BYTES:
            break
    return b"".join(parts)[:ERROR_BODY_BYTES]


class StreamAborted(Exception):
    """The stream carried an error or undecodable data; the outcome already says why."""


class StreamDecoder:
    """Turns body buffers into token-chunk timestamps, text lengths and usage on an ``Outcome``."""

    __slots__ = ("_outcome", "_chat", "_keep_text", "_feed", "_max_chunks", "done")

    def __init__(
        self, outcome: Outcome, chat: bool, keep_text: bool, max_chunks: Optional[int] = None
    ) -> None:
        self._outcome = outcome
        self._chat = chat
        self._keep_text = keep_text
        self._feed = SSEParser().feed
        self._max_chunks = max_chunks
        self.done = False

    def __call__(self, buffer: bytes, arrived: float) -> None:
        outcome = self._outcome
        times = outcome.chunk_times
        chars = outcome.chunk_chars
        scan = _scan_json
        before = len(times)
        try:
            payloads = self._feed(buffer)
        except EventTooLarge as exc:
            outcome.fail("invalid_response", str(exc))
            raise StreamAborted() from None
        for payload in payloads:
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
                        _read_clock(outcome, event)
                elif "error" in event or event.get("object") == "error":
                    outcome.fail("server_error", f"error event in stream: {_error_message(payload)}")
                    raise StreamAborted()
                usage = event.get("usage")
                if usage:
                    _read_usage(outcome, usage)
                if "metrics" in event:
                    _read_server_metrics(outcome, event["metrics"])
            except RecursionError:
                outcome.fail("invalid_response", "SSE data nested deeper than the JSON parser's limit")
                raise StreamAborted() from None
            except UsageOutOfRange as exc:
                outcome.fail("invalid_response", str(exc))
                raise StreamAborted() from None
            except (StopIteration, ValueError, AttributeError, TypeError, IndexError, KeyError):
                outcome.fail("invalid_response", f"unexpected SSE data: {payload[:120]!r}")
                raise StreamAborted() from None
        if self._max_chunks is not None and len(times) > self._max_chunks:
            outcome.fail(
                "invalid_response", f"more than {self._max_chunks} text chunks for the tokens asked for"
            )
            raise StreamAborted()
        if len(times) > before + 1:
            outcome.coalesced += len(times) - before - 1


async def _consume_stream(
    response: httpx.Response, outcome: Outcome, chat: bool, keep_text: bool, max_chunks: Optional[int]
) -> None:
    decoder = StreamDecoder(outcome, chat, keep_text, max_chunks)
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
    max_chunks: Optional[int] = None,
) -> None:
    """Send one request and fill ``outcome`` in place (so a timeout keeps what had arrived); a
    stream with more than ``max_chunks`` text chunks ends ``invalid_response``.

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
                message = _error_message(await _read_error_body(response))
                outcome.fail(f"http_{response.status_code}", f"HTTP {response.status_code}: {message}")
                return
            await _consume_stream(response, outcome, chat, keep_text, max_chunks)
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
