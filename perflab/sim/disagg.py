"""Simulated prefill/decode disaggregation: a prefill worker hands each prompt's KV cache to a decode worker.

SGLang's protocol, as ``sglang-router`` 0.3.2 drives it: the router sends every request to one prefill
and one decode worker at once, with ``bootstrap_host``, ``bootstrap_port`` (the prefill worker's
``--disaggregation-bootstrap-port``) and ``bootstrap_room`` (one number per request) added to the body,
and streams the decode worker's answer.

- A **prefill** worker (``--disaggregation-mode prefill``) runs the prompt through its own scheduler as
  a one-token request (SGLang's prefill server computes the first token with the KV cache), answers the
  router with that token, and publishes the room on its bootstrap server (an HTTP server on the
  bootstrap port, as SGLang's is; ``GET /route`` gives the prefill's parallelism as SGLang's does) once
  the KV cache has crossed the link: ``transfer seconds = KV bytes of the prompt / (link bandwidth ×
  LINK_EFFICIENCY × prefill TP) + TRANSFER_LATENCY_S`` (each prefill TP rank sends its shard over its
  own link; the link is the accelerator's NVLink/HCCS figure of :mod:`perflab.sim.hardware`,
  450 GB/s per direction on H100 and H200), divided by the host's time scale.
- A **decode** worker (``--disaggregation-mode decode``) asks the prefill's bootstrap server for the room
  (``GET /sim/kv?room=R``, perflab's own long poll: SGLang's workers move the KV themselves), waits for
  the transfer to end, emits the first token it received and decodes the rest in its own scheduler, its
  radix cache off (SGLang disables it on decode servers). A bootstrap server it cannot reach fails the
  request after :data:`FETCH_ATTEMPTS` tries, logging SGLang's ``Could not fetch prefill parallel info
  from HOST:PORT after N attempts``.

Every handoff is logged (``KV sent room=R …`` on the prefill, ``KV received room=R from HOST:PORT …`` on the
decode), which is how a test tells that a request went prefill → decode.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
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
# SGLang 0.5.23's DISAGG_TRANSFER_BACKEND_CHOICES (sglang/srt/arg_groups/choices.py)
TRANSFER_BACKENDS = ["mooncake", "nixl", "ascend", "fake", "mori", "mooncake_tcp"]
# What SGLang 0.5.23 raises when the backend's library is missing (nixl/conn.py, mooncake_transfer_engine.py)
MISSING_BACKEND = {
    "nixl": "ImportError: Please install NIXL by following the instructions at "
    "https://github.com/ai-dynamo/nixl/blob/main/README.md to run SGLang with NixlTransferEngine.",
    "mooncake": "ImportError: Please install mooncake by following the instructions at "
    "https://github.com/kvcache-ai/Mooncake/blob/main/doc/en/build.md to run SGLang with "
    "MooncakeTransferEngine.",
}

Log = Callable[[str], None]


def transfer_seconds(dep: Deployment, prompt_tokens: int) -> float:
    """Simulated seconds to move ``prompt_tokens`` tokens of KV cache from the prefill worker ``dep``."""
    per_rank = kv_bytes_per_token_per_gpu(dep) * dep.pp
    return prompt_tokens * per_rank / (dep.accel.link_gbs * 1e9 * LINK_EFFICIENCY) + TRANSFER_LATENCY_S


class PrefillSide:
    """A prefill worker's bootstrap server and the rooms whose KV cache it sent."""

    def __init__(self, dep: Deployment, time_scale: float, log: Log) -> None:
        self._dep = dep
        self._time_scale = time_scale
        self._log = log
        self._rooms: Dict[int, Tuple[float, int]] = {}  # room → (loop time the KV is there, first token)
        self._waiters: Dict[int, asyncio.Future] = {}

    async def start(self, host: str, port: int) -> object:
        return await start_http_server(self._handle, host, port)

    def accept(self, seq: Sequence, room: int, on_tokens: Callable[[Sequence, int, bool], None]) -> None:
        """Run ``seq`` as a prefill: one token, then its KV cache goes to the room's decode worker."""
        loop = asyncio.get_running_loop()
        seq.target_tokens = 1

        def finished(seq_: Sequence, count: int, done: bool) -> None:
            on_tokens(seq_, count, done)
            if not done:
                return
            seconds = transfer_seconds(self._dep, seq_.prompt_len) / self._time_scale
            self._rooms[room] = (loop.time() + seconds, seq_.prompt_len)
            self._log(f"KV sent room={room} tokens={seq_.prompt_len} transfer_ms={seconds * 1000:.3f}")
            waiter = self._waiters.pop(room, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

        seq.on_tokens = finished

    def _handle(self, request: HttpRequest, responder: Responder) -> None:
        if request.path == "/route":
            info = {"attn_tp_size": self._dep.tp, "attn_dp_size": 1, "pp_size": self._dep.pp, "page_size": 1}
            responder.send(200, json.dumps(info).encode())
        elif request.path == "/sim/kv":
            query = urllib.parse.parse_qs(request.query)
            try:
                room = int(query.get("room", [""])[0])
            except ValueError:
                responder.send(400, b'{"error":"room must be an integer"}')
                return
            asyncio.get_running_loop().create_task(self._answer(room, responder))
        else:
            responder.send(404, b'{"detail":"Not Found"}')

    async def _answer(self, room: int, responder: Responder) -> None:
        loop = asyncio.get_running_loop()
        if room not in self._rooms:
            waiter = self._waiters.setdefault(room, loop.create_future())
            try:
                await asyncio.wait_for(asyncio.shield(waiter), ROOM_WAIT_S)
            except asyncio.TimeoutError:
                responder.send(404, json.dumps({"error": f"room {room} was never prefilled"}).encode())
                return
        ready_at, tokens = self._rooms.pop(room)
        body = {"room": room, "prompt_tokens": tokens, "ready_in_s": max(0.0, ready_at - loop.time())}
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

    def __init__(self, log: Log) -> None:
        self._log = log
        self._attempts: Dict[str, int] = {}

    def accept(
        self,
        seq: Sequence,
        bootstrap: Tuple[str, int, int],
        start: Callable[[], None],
        admit: Callable[[Sequence], None],
        fail: Callable[[str], None],
    ) -> None:
        """Fetch the room's KV cache, then ``start`` the response and ``admit`` the sequence to the
        engine (its first token goes out on arrival, the rest is decoded); ``fail`` the request when
        the prefill cannot be reached."""
        asyncio.get_running_loop().create_task(self._receive(seq, bootstrap, start, admit, fail))

    async def _receive(self, seq, bootstrap, start, admit, fail) -> None:  # noqa: ANN001
        host, port, room = bootstrap
        answer: Optional[dict] = None
        count = 0
        while answer is None and count < FETCH_ATTEMPTS:
            count += 1
            answer = await _get_json(host, port, f"/sim/kv?room={room}", ROOM_WAIT_S + 5.0)
            if answer is None and count < FETCH_ATTEMPTS:
                await asyncio.sleep(FETCH_RETRY_S)
        if not answer:
            if answer is None:
                self._log(f"Could not fetch prefill parallel info from {host}:{port} after {count} attempts")
            fail(f"KVTransferError(bootstrap_room={room}): the prefill at {host}:{port} sent no KV cache")
            return
        await asyncio.sleep(float(answer.get("ready_in_s", 0.0)))
        if seq.aborted:
            return
        self._log(f"KV received room={room} from {host}:{port} tokens={answer.get('prompt_tokens')}")
        start()
        admit(seq)


def bootstrap_of(data: Dict[str, object]) -> Optional[Tuple[str, int, int]]:
    """``(bootstrap_host, bootstrap_port, bootstrap_room)`` of a request the router sent, or None."""
    host, port, room = data.get("bootstrap_host"), data.get("bootstrap_port"), data.get("bootstrap_room")
    if not isinstance(host, str) or isinstance(port, bool) or isinstance(room, bool):
        return None
    if not isinstance(port, int) or not isinstance(room, int):
        return None
    return host, port, room
