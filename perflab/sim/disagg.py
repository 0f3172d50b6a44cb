"""Simulated prefill/decode disaggregation: a prefill worker hands each prompt's KV cache to a decode worker.

Two protocols, as the real routers drive them:

- **SGLang** (``sglang-router`` 0.3.2): the router sends every request to one prefill and one decode
  worker at once, with ``bootstrap_host``, ``bootstrap_port`` (the prefill worker's
  ``--disaggregation-bootstrap-port``) and ``bootstrap_room`` (one number per request) added to the body,
  and streams the decode worker's answer. The role is the worker's ``--disaggregation-mode``.
- **vLLM** (``vllm-router`` 0.1.17, ``src/routers/http/vllm_pd_router.rs``; vLLM 0.32's NixlConnector
  and MooncakeConnector): the router first sends the request to a prefill worker, not streamed, with
  ``max_tokens`` 1 and ``kv_transfer_params`` ``{"do_remote_decode": true, …}`` (Mooncake: with a
  ``transfer_id``), waits for its answer, then sends the original request to a decode worker with
  ``kv_transfer_params`` ``{"do_remote_prefill": true, …}``: with NIXL those of the prefill's answer
  (``remote_engine_id``, ``remote_request_id``, ``remote_host`` and ``remote_port``, the prefill's side
  channel ``VLLM_NIXL_SIDE_CHANNEL_PORT``, ``remote_block_ids``, ``tp_size``, as NixlConnector's
  ``request_finished`` returns them), with Mooncake the ``transfer_id``, the prefill's
  ``remote_bootstrap_addr`` (``VLLM_MOONCAKE_BOOTSTRAP_PORT``) and the ``remote_engine_id`` the router
  read from that bootstrap server's ``GET /query`` when it started. The role is each request's
  (a NixlConnector ``kv_both`` worker serves both).

A **prefill** worker runs the prompt through its own scheduler as a one-token request (the prefill computes
the first token with the KV cache), answers with that token, and publishes the KV cache under the
request's key (SGLang's room, NIXL's request id, Mooncake's transfer id) on its bootstrap or side-channel
server (an HTTP server on that port; ``GET /route`` gives the prefill's parallelism as SGLang's does,
``GET /query`` its engine id as vLLM's Mooncake bootstrap server does) once the KV cache has crossed the
link: ``transfer seconds = KV bytes of the prompt / (link bandwidth × LINK_EFFICIENCY × prefill TP) +
TRANSFER_LATENCY_S`` (each prefill TP rank sends its shard over its own link; the link is the
accelerator's NVLink/HCCS figure of :mod:`perflab.sim.hardware`, 450 GB/s per direction on H100 and
H200), divided by the host's time scale. A **decode** worker asks the prefill's server for the key
(``GET /sim/kv?room=K``, perflab's own long poll: the engines move the KV themselves), waits for the
transfer to end, emits the first token it received and decodes the rest in its own scheduler (SGLang's
decode server with its radix cache off, as SGLang runs it). A server it cannot reach fails the request
after :data:`FETCH_ATTEMPTS` tries, logging what the engine logs (SGLang ``Could not fetch prefill
parallel info from HOST:PORT after N attempts``, vLLM ``NIXL transfer failure: handshake_failed`` or
``Failed to connect to bootstrap server``).

Every handoff is logged (``KV sent room=R …`` on the prefill, ``KV received room=R from HOST:PORT …`` on the
decode; vLLM's say ``request=`` or ``transfer=``), which is how a test tells that a request went
prefill → decode.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.parse
import uuid
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Tuple

from perflab.sim.deployment import Deployment
from perflab.sim.httpserver import HttpRequest, Responder, start_http_server
from perflab.sim.perfmodel import kv_bytes_per_token_per_gpu
from perflab.sim.sequence import Sequence

LINK_EFFICIENCY = 0.8
TRANSFER_LATENCY_S = 0.001
ROOM_WAIT_S = 30.0
FETCH_ATTEMPTS = 3
FETCH_RETRY_S = 0.5
# vLLM's KV cache block (tokens) on CUDA, which NixlConnector's remote_block_ids count
VLLM_BLOCK_TOKENS = 16
# SGLang 0.5.23's DISAGG_TRANSFER_BACKEND_CHOICES (sglang/srt/arg_groups/choices.py)
TRANSFER_BACKENDS = ["mooncake", "nixl", "ascend", "fake", "mori", "mooncake_tcp"]
# vLLM 0.32's connectors perflab launches disaggregated, and their transfer libraries
VLLM_CONNECTORS = {"NixlConnector": "nixl", "MooncakeConnector": "mooncake"}
# vLLM 0.32's KVRole (vllm/config/kv_transfer.py) and the sides each serves
VLLM_ROLES = {"kv_producer": "prefill", "kv_consumer": "decode", "kv_both": "both"}
# What each engine raises when the backend's library is missing: SGLang 0.5.23 (nixl/conn.py,
# mooncake_transfer_engine.py), vLLM 0.32 (nixl/base_worker.py, mooncake/mooncake_connector.py)
MISSING_BACKEND = {
    "sglang": {
        "nixl": "ImportError: Please install NIXL by following the instructions at "
        "https://github.com/ai-dynamo/nixl/blob/main/README.md to run SGLang with NixlTransferEngine.",
        "mooncake": "ImportError: Please install mooncake by following the instructions at "
        "https://github.com/kvcache-ai/Mooncake/blob/main/doc/en/build.md to run SGLang with "
        "MooncakeTransferEngine.",
    },
    "vllm": {
        "nixl": "RuntimeError: NIXL is not available",
        "mooncake": "RuntimeError: Mooncake is not available (Please install mooncake by following the "
        "instructions at https://github.com/kvcache-ai/Mooncake/blob/main/doc/en/build.md to run VLLM with "
        "MooncakeTransferEngine.)",
    },
}

Log = Callable[[str], None]


@dataclass(frozen=True)
class Protocol:
    """How one engine's workers name a handoff in their logs and say a prefill cannot be reached."""

    word: str
    unreachable: str  # formatted with host, port and attempts


SGLANG = Protocol(
    "room", "Could not fetch prefill parallel info from {host}:{port} after {attempts} attempts"
)
VLLM_NIXL = Protocol(
    "request",
    "NIXL transfer failure: handshake_failed | Context: {{'remote_host': '{host}', 'remote_port': {port}}}",
)
VLLM_MOONCAKE = Protocol(
    "transfer",
    "Failed to connect to bootstrap server http://{host}:{port} (ConnectError): "
    "All connection attempts failed",
)


@dataclass(frozen=True)
class Handoff:
    """One request's part in a handoff: its role, the key its KV cache goes under and, for a decode
    worker, the prefill's server (host, port)."""

    role: str
    key: str
    source: Optional[Tuple[str, int]] = None


def transfer_seconds(dep: Deployment, prompt_tokens: int) -> float:
    """Simulated seconds to move ``prompt_tokens`` tokens of KV cache from the prefill worker ``dep``."""
    per_rank = kv_bytes_per_token_per_gpu(dep) * dep.pp
    return prompt_tokens * per_rank / (dep.accel.link_gbs * 1e9 * LINK_EFFICIENCY) + TRANSFER_LATENCY_S


def bootstrap_of(data: Dict[str, object]) -> Optional[Tuple[str, int, int]]:
    """``(bootstrap_host, bootstrap_port, bootstrap_room)`` of a request sglang-router sent, or None."""
    host, port, room = data.get("bootstrap_host"), data.get("bootstrap_port"), data.get("bootstrap_room")
    if not isinstance(host, str) or isinstance(port, bool) or isinstance(room, bool):
        return None
    if not isinstance(port, int) or not isinstance(room, int):
        return None
    return host, port, room


def _address(host: object, port: object) -> Optional[Tuple[str, int]]:
    if not isinstance(host, str) or isinstance(port, bool):
        return None
    try:
        return host, int(port)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


def vllm_handoff(data: Dict[str, object], request_id: str, backend: str) -> Optional[Handoff]:
    """A request's part in vllm-router's handoff, from its ``kv_transfer_params`` (None: not one)."""
    params = data.get("kv_transfer_params")
    if not isinstance(params, dict):
        return None
    if params.get("do_remote_decode"):
        key = params.get("transfer_id") if backend == "mooncake" else request_id
        return Handoff("prefill", str(key)) if key else None
    if not params.get("do_remote_prefill"):
        return None
    if backend == "mooncake":
        parts = urllib.parse.urlsplit(str(params.get("remote_bootstrap_addr") or ""))
        source = _address(parts.hostname, parts.port)
        key = params.get("transfer_id")
    else:
        source = _address(params.get("remote_host"), params.get("remote_port"))
        key = params.get("remote_request_id")
    return Handoff("decode", str(key), source) if source is not None and key else None


class PrefillSide:
    """A prefill worker's bootstrap or side-channel server and the keys whose KV cache it sent."""

    def __init__(self, dep: Deployment, time_scale: float, log: Log, protocol: Protocol = SGLANG) -> None:
        self._dep = dep
        self._time_scale = time_scale
        self._log = log
        self._protocol = protocol
        self.engine_id = str(uuid.uuid4())
        self.address = ("127.0.0.1", 0)
        self._keys: Dict[str, Tuple[float, int]] = {}  # key → (loop time the KV is there, prompt tokens)
        self._waiters: Dict[str, asyncio.Future] = {}

    async def start(self, host: str, port: int) -> object:
        self.address = (host, port)
        return await start_http_server(self._handle, host, port)

    def accept(self, seq: Sequence, key: str, on_tokens: Callable[[Sequence, int, bool], None]) -> None:
        """Run ``seq`` as a prefill: one token, then its KV cache goes to the key's decode worker."""
        loop = asyncio.get_running_loop()
        seq.target_tokens = 1

        def finished(seq_: Sequence, count: int, done: bool) -> None:
            on_tokens(seq_, count, done)
            if not done:
                return
            seconds = transfer_seconds(self._dep, seq_.prompt_len) / self._time_scale
            self._keys[key] = (loop.time() + seconds, seq_.prompt_len)
            word = self._protocol.word
            self._log(f"KV sent {word}={key} tokens={seq_.prompt_len} transfer_ms={seconds * 1000:.3f}")
            waiter = self._waiters.pop(key, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

        seq.on_tokens = finished

    def nixl_params(self, request_id: str, prompt_len: int) -> Dict[str, object]:
        """What vLLM 0.32's NixlConnector returns from a prefill (``request_finished``), for the router to
        hand to the decode worker."""
        blocks = list(range(-(-prompt_len // VLLM_BLOCK_TOKENS)))
        host, port = self.address
        return {
            "do_remote_prefill": True,
            "do_remote_decode": False,
            "remote_block_ids": [blocks],
            "remote_engine_id": self.engine_id,
            "remote_request_id": request_id,
            "remote_host": host,
            "remote_port": port,
            "tp_size": self._dep.tp,
            "dcp_size": 1,
            "pp_size": self._dep.pp,
            "remote_num_tokens": prompt_len,
        }

    def _handle(self, request: HttpRequest, responder: Responder) -> None:
        if request.path == "/route":
            info = {"attn_tp_size": self._dep.tp, "attn_dp_size": 1, "pp_size": self._dep.pp, "page_size": 1}
            responder.send(200, json.dumps(info).encode())
        elif request.path == "/query":
            workers = {
                str(rank): {"0": f"{self.address[0]}:{self.address[1]}"} for rank in range(self._dep.tp)
            }
            responder.send(
                200, json.dumps({"0": {"engine_id": self.engine_id, "worker_addr": workers}}).encode()
            )
        elif request.path == "/sim/kv":
            key = urllib.parse.parse_qs(request.query).get("room", [""])[0]
            if not key:
                responder.send(400, b'{"error":"room is required"}')
                return
            asyncio.get_running_loop().create_task(self._answer(key, responder))
        else:
            responder.send(404, b'{"detail":"Not Found"}')

    async def _answer(self, key: str, responder: Responder) -> None:
        loop = asyncio.get_running_loop()
        if key not in self._keys:
            waiter = self._waiters.setdefault(key, loop.create_future())
            try:
                await asyncio.wait_for(asyncio.shield(waiter), ROOM_WAIT_S)
            except asyncio.TimeoutError:
                responder.send(404, json.dumps({"error": f"{key} was never prefilled"}).encode())
                return
        ready_at, tokens = self._keys.pop(key)
        body = {"room": key, "prompt_tokens": tokens, "ready_in_s": max(0.0, ready_at - loop.time())}
        responder.send(200, json.dumps(body).encode())


async def _get_json(host: str, port: int, path: str, timeout: float) -> Optional[dict]:
    """``GET http://host:port/path`` with the standard library; None when the server cannot be reached."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 5.0)
    except (OSError, asyncio.TimeoutError):
        return None
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), timeout)
    except (OSError, asyncio.TimeoutError):
        return None
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        return {}
    if b"transfer-encoding: chunked" in head.lower():
        size, _, rest = body.partition(b"\r\n")
        body = rest[: int(size, 16)]
    return json.loads(body.decode())


class DecodeSide:
    """A decode worker: waits for each request's KV cache, then decodes."""

    def __init__(self, log: Log, protocol: Protocol = SGLANG) -> None:
        self._log = log
        self._protocol = protocol

    def accept(
        self,
        seq: Sequence,
        handoff: Handoff,
        start: Callable[[], None],
        admit: Callable[[Sequence], None],
        fail: Callable[[str], None],
    ) -> None:
        """Fetch the key's KV cache, then ``start`` the response and ``admit`` the sequence to the
        engine (its first token goes out on arrival, the rest is decoded); ``fail`` the request when
        the prefill cannot be reached."""
        asyncio.get_running_loop().create_task(self._receive(seq, handoff, start, admit, fail))

    async def _receive(self, seq, handoff, start, admit, fail) -> None:  # noqa: ANN001
        assert handoff.source is not None
        host, port = handoff.source
        key = handoff.key
        answer: Optional[dict] = None
        count = 0
        query = urllib.parse.urlencode({"room": key})
        while answer is None and count < FETCH_ATTEMPTS:
            count += 1
            answer = await _get_json(host, port, f"/sim/kv?{query}", ROOM_WAIT_S + 5.0)
            if answer is None and count < FETCH_ATTEMPTS:
                await asyncio.sleep(FETCH_RETRY_S)
        word = self._protocol.word
        if not answer:
            if answer is None:
                self._log(self._protocol.unreachable.format(host=host, port=port, attempts=count))
            fail(f"KVTransferError({word}={key}): the prefill at {host}:{port} sent no KV cache")
            return
        await asyncio.sleep(float(answer.get("ready_in_s", 0.0)))
        if seq.aborted:
            return
        self._log(f"KV received {word}={key} from {host}:{port} tokens={answer.get('prompt_tokens')}")
        start()
        admit(seq)


class WithTransferParams:
    """A prefill's responder whose JSON answer carries ``kv_transfer_params``, as vLLM's completion and
    chat responses do (``null`` where the connector returns none: Mooncake)."""

    def __init__(self, responder: Responder, params: Optional[Dict[str, object]]) -> None:
        self._responder = responder
        self._params = params

    def send(self, status: int, body: bytes, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        if status == 200:
            answer = json.loads(body.decode())
            answer["kv_transfer_params"] = self._params
            body = json.dumps(answer, separators=(",", ":")).encode()
        self._responder.send(status, body, *args, **kwargs)


class Worker:
    """One simulated worker's side of disaggregation: how it reads a request's part in a handoff, its
    prefill side (with its bootstrap or side-channel server) and its decode side."""

    def __init__(
        self, engine: str, mode: str, backend: str, dep: Deployment, time_scale: float, log: Log
    ) -> None:
        self.engine, self.mode, self.backend = engine, mode, backend
        protocol = SGLANG if engine == "sglang" else VLLM_MOONCAKE if backend == "mooncake" else VLLM_NIXL
        serves = {"prefill": ("prefill",), "decode": ("decode",), "both": ("prefill", "decode")}[mode]
        self.prefill = PrefillSide(dep, time_scale, log, protocol) if "prefill" in serves else None
        self.decode = DecodeSide(log, protocol) if "decode" in serves else None

    async def start(self, host: str, port: int) -> None:
        """Start the prefill side's server (a decode-only worker has none) where the engine starts it:
        SGLang's bootstrap server on the API's host, vLLM's NIXL side channel on
        ``VLLM_NIXL_SIDE_CHANNEL_HOST`` (default localhost), its Mooncake bootstrap server on 0.0.0.0."""
        if self.prefill is None:
            return
        if self.engine != "sglang":
            nixl = os.environ.get("VLLM_NIXL_SIDE_CHANNEL_HOST", "localhost")
            host = nixl if self.backend == "nixl" else "0.0.0.0"
        await self.prefill.start(host, port)

    def handoff(self, data: Dict[str, object], request_id: str) -> Optional[Handoff]:
        """The request's part in a handoff (None: an ordinary request)."""
        if self.engine != "sglang":
            found = vllm_handoff(data, request_id, self.backend)
            served = self.prefill if found is not None and found.role == "prefill" else self.decode
            return found if served is not None else None
        bootstrap = bootstrap_of(data)
        if bootstrap is None:
            return None
        host, port, room = bootstrap
        return Handoff(self.mode, str(room), (host, port) if self.mode == "decode" else None)

    def responder(self, responder: Responder, handoff: Handoff, seq: Sequence) -> Responder:
        """The responder a prefill's answer goes through: vLLM's carries ``kv_transfer_params``."""
        if self.engine == "sglang" or handoff.role != "prefill" or self.prefill is None:
            return responder
        params = self.prefill.nixl_params(handoff.key, seq.prompt_len) if self.backend == "nixl" else None
        return WithTransferParams(responder, params)  # type: ignore[return-value]
