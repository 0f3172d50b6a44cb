"""The OpenAI-compatible HTTP API of a simulated engine.

Routes: ``GET /health``, ``GET /v1/models``, ``GET /version``, ``POST /v1/chat/completions``,
``POST /v1/completions`` (streaming or not), ``POST /tokenize``, ``POST /detokenize`` and the
engine's metrics endpoint (``GET /metrics``; TensorRT-LLM: JSON ``/metrics`` and Prometheus
``/prometheus/metrics``), plus a few engine-specific probes (SGLang ``/get_model_info``, MindIE
``/v2/health/ready``). With an API key, ``/v1/*`` answers 401 without ``Authorization: Bearer KEY``.
Prefix-cache resets are served as the engines serve them: vLLM's ``POST /reset_prefix_cache`` only with
``VLLM_SERVER_DEV_MODE=1`` in the server's environment (``vllm_dev_mode``), SGLang's ``/flush_cache``
always; both refuse while requests run.

Output lengths: ``max_tokens`` with ``ignore_eos`` gives exactly ``max_tokens`` tokens; without
``ignore_eos`` the sequence ends early at a deterministic "EOS" length of 32..511 tokens taken from
a CRC32 of the prompt (``finish_reason`` ``stop``), never beyond ``max_tokens``.
"""

from __future__ import annotations

import asyncio
import http
import json
import time
import urllib.parse
import uuid
import zlib
from typing import Callable, Dict, List, Mapping, Optional, Tuple, Union

from perflab.sim.disagg import Handoff, Worker
from perflab.sim.engine import Engine
from perflab.sim.httpserver import HttpRequest, Responder
from perflab.sim.metrics import render_prometheus, trtllm_iteration_stats
from perflab.sim.protocol import (
    ApiError,
    check_context,
    check_model,
    message_text,
    parse_generation,
    parse_json_object,
)
from perflab.sim.sequence import Sequence
from perflab.sim.streaming import CollectSink, ResponseFormat, StreamSink
from perflab.sim.timelines import HEADER, ClockMark, parse_mark

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# SGLang 0.5.23's answer to a flush that was done, and how often a waiting flush looks again.
FLUSHED = (
    "Cache flushed.\nPlease check backend logs for more details. "
    "(When there are running or waiting requests, the operation will not be performed.)\n"
)
FLUSH_POLL_S = 0.01
EOS_MIN_TOKENS = 32
EOS_SPAN_TOKENS = 480


class ApiConfig:
    """How the API presents the served model."""

    def __init__(
        self,
        served_names: List[str],
        model_root: str,
        max_model_len: int,
        flavour: str = "vllm",
        version: str = "0.11.0",
        api_key: str = "",
        reasoning: bool = False,
        metrics_enabled: bool = True,
        need_prompt_ids: bool = False,
        max_batch_size: int = 0,
        dev_mode: bool = False,
    ) -> None:
        self.served_names = served_names
        self.model_root = model_root
        self.max_model_len = max_model_len
        self.flavour = flavour
        self.version = version
        self.api_key = api_key
        self.reasoning = reasoning
        self.metrics_enabled = metrics_enabled
        self.need_prompt_ids = need_prompt_ids
        self.max_batch_size = max_batch_size
        self.dev_mode = dev_mode


def vllm_dev_mode(environ: Mapping[str, str]) -> bool:
    """``VLLM_SERVER_DEV_MODE`` as vLLM reads it (``bool(int(value))``; anything else is off here)."""
    value = environ.get("VLLM_SERVER_DEV_MODE", "0").strip()
    return value.lstrip("-").isdigit() and int(value) != 0


def eos_length(text: str, token_ids: Optional[List[int]]) -> int:
    """The deterministic length at which a request without ``ignore_eos`` stops."""
    key = text.encode("utf-8") if token_ids is None else json.dumps(token_ids).encode()
    return EOS_MIN_TOKENS + zlib.crc32(key) % EOS_SPAN_TOKENS


Route = Callable[[HttpRequest, Responder], None]


class OpenAIApp:
    """Request handler bound to one engine."""

    def __init__(
        self,
        config: ApiConfig,
        engine: Engine,
        tokenizer,
        clock: Callable[[], float],
        access_log: Optional[Callable[[str], None]] = None,
    ) -> None:
        self.config = config
        self.engine = engine
        self.tokenizer = tokenizer
        self._clock = clock
        self._access_log = access_log
        # the worker's side of prefill/decode disaggregation (SGLang --disaggregation-mode, vLLM
        # --kv-transfer-config), if any
        self.kv: Optional[Worker] = None
        self._created = int(time.time())
        self._routes: Dict[str, Tuple[Tuple[str, ...], Route]] = {
            "/health": (("GET",), self._health),
            "/v1/models": (("GET",), self._models),
            "/version": (("GET",), self._version),
            "/v1/chat/completions": (("POST",), self._chat),
            "/v1/completions": (("POST",), self._completions),
            "/tokenize": (("POST",), self._tokenize),
            "/detokenize": (("POST",), self._detokenize),
        }
        if config.flavour == "trtllm":
            self._routes["/metrics"] = (("GET",), self._trtllm_stats)
            self._routes["/prometheus/metrics"] = (("GET",), self._prometheus)
        else:
            self._routes["/metrics"] = (("GET",), self._prometheus)
        if config.flavour == "sglang":
            self._routes["/get_model_info"] = (("GET",), self._sglang_model_info)
            self._routes["/model_info"] = (("GET",), self._sglang_model_info)
            self._routes["/server_info"] = (("GET",), self._sglang_server_info)
            self._routes["/get_server_info"] = (("GET",), self._sglang_server_info)
            self._routes["/health_generate"] = (("GET",), self._health)
            self._routes["/flush_cache"] = (("GET", "POST"), self._flush_cache)
        if config.flavour in ("vllm", "vllm-ascend") and config.dev_mode:
            self._routes["/reset_prefix_cache"] = (("POST",), self._reset_prefix_cache)
        if config.flavour == "mindie":
            self._routes["/v2/health/live"] = (("GET",), self._health)
            self._routes["/v2/health/ready"] = (("GET",), self._health)

    def handle(self, request: HttpRequest, responder: Responder) -> None:
        route = self._routes.get(request.path)
        try:
            if route is None:
                responder.send(404, b'{"detail":"Not Found"}')
            elif request.method not in route[0]:
                responder.send(405, b'{"detail":"Method Not Allowed"}')
            elif self.config.api_key and request.path.startswith("/v1") and not self._authorized(request):
                responder.send(401, b'{"error":"Unauthorized"}')
            else:
                route[1](request, responder)
        except ApiError as error:
            responder.send(error.status, self._error_body(error))
        if self._access_log is not None:
            status = responder.status or 200
            phrase = http.HTTPStatus(status).phrase
            self._access_log(f'{request.peer} - "{request.method} {request.path} HTTP/1.1" {status} {phrase}')

    def _authorized(self, request: HttpRequest) -> bool:
        return request.headers.get("authorization", "") == f"Bearer {self.config.api_key}"

    def _error_body(self, error: ApiError) -> bytes:
        if self.config.flavour in ("sglang", "trtllm"):
            body = {
                "object": "error",
                "message": error.message,
                "type": error.error_type,
                "param": error.param,
                "code": error.status,
            }
        else:
            body = {
                "error": {
                    "message": error.message,
                    "type": error.error_type,
                    "param": error.param,
                    "code": error.status,
                }
            }
        return json.dumps(body).encode()

    @staticmethod
    def _json(responder: Responder, payload: object, status: int = 200) -> None:
        responder.send(status, json.dumps(payload).encode())

    def _health(self, request: HttpRequest, responder: Responder) -> None:
        responder.send(200, b"")

    def _version(self, request: HttpRequest, responder: Responder) -> None:
        self._json(responder, {"version": self.config.version})

    def _models(self, request: HttpRequest, responder: Responder) -> None:
        owner = {"mindie": "MindIE Server", "sglang": "sglang", "trtllm": "tensorrt_llm"}.get(
            self.config.flavour, "vllm"
        )
        data = [
            {
                "id": name,
                "object": "model",
                "created": self._created,
                "owned_by": owner,
                "root": self.config.model_root,
                "parent": None,
                "max_model_len": self.config.max_model_len,
            }
            for name in self.config.served_names
        ]
        self._json(responder, {"object": "list", "data": data})

    def _sglang_model_info(self, request: HttpRequest, responder: Responder) -> None:
        self._json(
            responder,
            {
                "model_path": self.config.model_root,
                "tokenizer_path": self.config.model_root,
                "is_generation": True,
            },
        )

    def _sglang_server_info(self, request: HttpRequest, responder: Responder) -> None:
        mode = self.kv.mode if self.kv is not None else "null"
        self._json(
            responder,
            {
                "model_path": self.config.model_root,
                "disaggregation_mode": mode,
                "version": self.config.version,
            },
        )

    def _prometheus(self, request: HttpRequest, responder: Responder) -> None:
        if not self.config.metrics_enabled:
            responder.send(404, b'{"detail":"Not Found"}')
            return
        text = render_prometheus(
            self.config.flavour,
            self.config.served_names[0],
            self.engine.metrics,
            self.engine.gauges(),
            self._clock(),
        )
        responder.send(200, text.encode(), PROMETHEUS_CONTENT_TYPE)

    def _trtllm_stats(self, request: HttpRequest, responder: Responder) -> None:
        self._json(
            responder,
            trtllm_iteration_stats(self.engine.metrics, self.engine.gauges(), self.config.max_batch_size),
        )

    def _reset_prefix_cache(self, request: HttpRequest, responder: Responder) -> None:
        """vLLM's dev-mode ``POST /reset_prefix_cache``: ``{"success": false}`` while requests hold
        blocks (``reset_running_requests`` is not simulated)."""
        self._json(responder, {"success": self.engine.reset_prefix_cache()})

    def _flush_cache(self, request: HttpRequest, responder: Responder) -> None:
        """SGLang's ``/flush_cache?timeout=S``: waits up to S seconds for the engine to be idle, then
        flushes (200) or gives up (400), with SGLang's texts."""
        try:
            timeout = float(urllib.parse.parse_qs(request.query).get("timeout", ["0"])[0])
        except ValueError:
            raise ApiError(422, "timeout: Input should be a valid number", param="timeout") from None
        if not timeout >= 0:
            raise ApiError(422, "timeout: Input should be greater than or equal to 0", param="timeout")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout

        def attempt() -> None:
            if self.engine.reset_prefix_cache():
                responder.send(200, FLUSHED.encode(), "text/plain; charset=utf-8")
            elif loop.time() >= deadline:
                responder.send(400, b"Flush cache failed.\n", "text/plain; charset=utf-8")
            else:
                loop.call_later(FLUSH_POLL_S, attempt)

        attempt()

    def _tokenize(self, request: HttpRequest, responder: Responder) -> None:
        data = parse_json_object(request.body)
        check_model(data.get("model"), self.config.served_names)
        if "messages" in data:
            text = message_text(data["messages"])
        elif isinstance(data.get("prompt"), str):
            text = data["prompt"]
        else:
            raise ApiError(400, "prompt: Field required (a string), or messages", param="prompt")
        tokens = self.tokenizer.encode(text)
        self._json(
            responder,
            {
                "count": len(tokens),
                "max_model_len": self.config.max_model_len,
                "tokens": tokens,
                "token_strs": None,
            },
        )

    def _detokenize(self, request: HttpRequest, responder: Responder) -> None:
        data = parse_json_object(request.body)
        check_model(data.get("model"), self.config.served_names)
        tokens = data.get("tokens")
        if not isinstance(tokens, list) or not all(
            isinstance(t, int) and not isinstance(t, bool) for t in tokens
        ):
            raise ApiError(400, "tokens: Input should be a valid list of integers", param="tokens")
        self._json(responder, {"prompt": self.tokenizer.decode(tokens)})

    def _chat(self, request: HttpRequest, responder: Responder) -> None:
        self._generate("chat", request, responder)

    def _completions(self, request: HttpRequest, responder: Responder) -> None:
        self._generate("completion", request, responder)

    def _generate(self, kind: str, request: HttpRequest, responder: Responder) -> None:
        mark = self._clock_mark(request)
        try:
            seq, sink, handoff = self._prepare(kind, request, responder)
        except ApiError:
            if mark is not None:
                self.engine.refuse(mark)
            raise
        seq.on_tokens = sink.on_tokens
        if handoff is not None and handoff.role == "decode":
            self._decode(seq, sink, handoff, responder)
            return
        if handoff is not None and self.kv is not None and self.kv.prefill is not None:
            self.kv.prefill.accept(seq, handoff.key, sink.on_tokens)
        try:
            self.engine.submit(seq, mark)
        except ValueError as exc:  # the mark's item was already sent
            raise ApiError(400, str(exc)) from None
        responder.on_disconnect = lambda: self.engine.abort(seq)
        sink.start()

    def _clock_mark(self, request: HttpRequest) -> Optional[ClockMark]:
        """The client's timeline mark, where a model-mode engine keeps timelines (ignored otherwise)."""
        text = request.headers.get(HEADER)
        if text is None or self.engine.timelines is None:
            return None
        try:
            return parse_mark(text)
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None

    def _prepare(
        self, kind: str, request: HttpRequest, responder: Responder
    ) -> Tuple[Sequence, Union[StreamSink, CollectSink], Optional[Handoff]]:
        """The sequence of a generation request, the sink that answers it and its part in a
        disaggregated handoff (None for an ordinary request); ApiError if invalid."""
        data = parse_json_object(request.body)
        params = parse_generation(kind, data)
        model = check_model(params.model, self.config.served_names)
        token_ids = params.prompt_token_ids
        if token_ids is None and self.config.need_prompt_ids:
            token_ids = self.tokenizer.encode(params.prompt_text)
        prompt_len = len(token_ids) if token_ids is not None else self.tokenizer.count(params.prompt_text)
        if prompt_len == 0:
            raise ApiError(400, "The decoder prompt cannot be empty")
        max_tokens = check_context(prompt_len, params.max_tokens, self.config.max_model_len)
        target = (
            max_tokens if params.ignore_eos else min(max_tokens, eos_length(params.prompt_text, token_ids))
        )
        target = max(target, min(params.min_tokens, max_tokens))
        request_id = ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex
        seq = Sequence(
            request_id,
            request.arrival,
            prompt_len,
            target,
            "length" if target >= max_tokens else "stop",
            zlib.crc32(request_id.encode()),
            token_ids,
        )
        seq.parsed_reasoning = self.config.reasoning and kind == "chat"
        reasoning_tokens = target // 4 if seq.parsed_reasoning and target >= 2 else 0
        fmt = ResponseFormat(kind, request_id, int(time.time()), model, reasoning_tokens)
        handoff = self.kv.handoff(data, request_id) if self.kv is not None else None
        answer = self.kv.responder(responder, handoff, seq) if self.kv and handoff else responder
        sink = StreamSink(responder, fmt, params.include_usage) if params.stream else CollectSink(answer, fmt)
        return seq, sink, handoff

    def _decode(self, seq: Sequence, sink, handoff: Handoff, responder: Responder) -> None:  # noqa: ANN001
        """A decode worker's request: it arrives once the prefill's KV cache is here."""

        def fail(message: str) -> None:
            responder.send(500, self._error_body(ApiError(500, message, "InternalServerError")))

        responder.on_disconnect = lambda: self.engine.abort(seq)
        assert self.kv is not None and self.kv.decode is not None
        self.kv.decode.accept(seq, handoff, sink.start, self.engine.submit_prefilled, fail)
