"""Response bodies of generation requests, streamed as vLLM's OpenAI server streams them.

Chat chunks carry ``choices[0].delta.content`` (or ``delta.reasoning_content`` for the reasoning
part when a reasoning parser is set); the first chunk also carries ``"role": "assistant"`` and the
first token, the last token's chunk carries ``finish_reason``. With
``stream_options.include_usage`` a final chunk with empty ``choices`` and the ``usage`` follows, then
``data: [DONE]``. Completion chunks carry ``choices[0].text``. One chunk holds the tokens of one
engine step (one token, or several with speculative decoding).

A request that declared its client's timeline (:mod:`perflab.sim.timelines`) is told the simulated
clock: every chunk that carries output has ``"perflab_sim_t"``, the simulated time of the step that
produced it, in seconds on the client's timeline; the first also ``"perflab_sim_arrival"``, when the
request was sent on that timeline, and ``"perflab_sim_late"`` (seconds) when it reached the server
after the clock had passed that time and started when it came instead; the last
``"perflab_sim_energy_mj": [at arrival, at end]``, the engine's devices' energy counter
(:mod:`perflab.sim.energy`) at those two simulated instants. Real engines send none of these.
"""

from __future__ import annotations

import json
from typing import List, Optional

from perflab.sim.httpserver import Responder
from perflab.sim.sequence import Sequence
from perflab.sim.tokenizer import output_piece, output_piece_bytes


class ResponseFormat:
    """Byte templates of one request's chunks and bodies."""

    def __init__(self, kind: str, request_id: str, created: int, model: str, reasoning_tokens: int) -> None:
        self.kind = kind
        self.reasoning_tokens = reasoning_tokens
        obj = "chat.completion.chunk" if kind == "chat" else "text_completion"
        self._request_id = request_id
        self._model = model
        self._created = created
        self._chunk_head = (
            f'data: {{"id":{json.dumps(request_id)},"object":"{obj}","created":{created},'
            f'"model":{json.dumps(model)},'
        )
        # Fast path of one content token: head + piece + tail (generated pieces need no JSON escaping).
        if kind == "chat":
            self.first_head = (
                self._chunk_head + '"choices":[{"index":0,"delta":{"role":"assistant","content":"'
            ).encode()
            self.plain_head = (self._chunk_head + '"choices":[{"index":0,"delta":{"content":"').encode()
            self.plain_tail = b'"},"logprobs":null,"finish_reason":null}]}\n\n'
        else:
            self.plain_head = (self._chunk_head + '"choices":[{"index":0,"text":"').encode()
            self.first_head = self.plain_head
            self.plain_tail = b'","logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n'
        self._framed_tail = self.plain_tail + b"\r\n"
        self._first_size = len(self.first_head) + len(self.plain_tail)
        self._plain_size = len(self.plain_head) + len(self.plain_tail)

    def token_frame(self, first: bool, piece: bytes, fields: bytes = b"") -> bytes:
        """One token's chunk framed for ``Transfer-Encoding: chunked``, built in one step; ``fields``
        (``,"name":value…``) are added to its object."""
        head, size = (self.first_head, self._first_size) if first else (self.plain_head, self._plain_size)
        if fields:
            return b"%x\r\n%s%s%s\r\n" % (
                size + len(piece) + len(fields),
                head,
                piece,
                with_fields(self.plain_tail, fields),
            )
        return b"%x\r\n%s%s%s" % (size + len(piece), head, piece, self._framed_tail)

    def delta_chunk(self, first: bool, key: str, text: str, finish_reason: Optional[str]) -> bytes:
        finish = "null" if finish_reason is None else f'"{finish_reason}"'
        if self.kind == "chat":
            role = '"role":"assistant",' if first else ""
            body = (
                f'"choices":[{{"index":0,"delta":{{{role}"{key}":{json.dumps(text)}}},'
                f'"logprobs":null,"finish_reason":{finish}}}]}}\n\n'
            )
        else:
            body = (
                f'"choices":[{{"index":0,"text":{json.dumps(text)},"logprobs":null,'
                f'"finish_reason":{finish},"stop_reason":null}}]}}\n\n'
            )
        return (self._chunk_head + body).encode()

    def usage_chunk(self, prompt_tokens: int, completion_tokens: int) -> bytes:
        usage = _usage(prompt_tokens, completion_tokens)
        return (self._chunk_head + f'"choices":[],"usage":{usage}}}\n\n').encode()

    def full_body(
        self, reasoning: str, content: str, finish_reason: str, prompt_tokens: int, completion_tokens: int
    ) -> bytes:
        if self.kind == "chat":
            message = {"role": "assistant", "content": content, "tool_calls": []}
            if self.reasoning_tokens:
                message["reasoning_content"] = reasoning
            choice = {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish_reason,
                "stop_reason": None,
            }
            obj = "chat.completion"
        else:
            choice = {
                "index": 0,
                "text": content,
                "logprobs": None,
                "finish_reason": finish_reason,
                "stop_reason": None,
                "prompt_logprobs": None,
            }
            obj = "text_completion"
        body = {
            "id": self._request_id,
            "object": obj,
            "created": self._created,
            "model": self._model,
            "choices": [choice],
            "usage": json.loads(_usage(prompt_tokens, completion_tokens)),
        }
        return json.dumps(body, separators=(",", ":")).encode()


def with_fields(event: bytes, fields: bytes) -> bytes:
    """One SSE event of a JSON object (``…}\\n\\n``) with ``fields`` added to the object."""
    return event[:-3] + fields + b"}\n\n"


def clock_fields(seq: Sequence, first: bool, last: bool = False) -> bytes:
    """The simulated times of a chunk of ``seq`` (nothing when it declared no timeline), and on its
    ``last`` the engine's energy counter at its arrival and at its end."""
    ticket = seq.ticket
    if ticket is None:
        return b""
    fields = b',"perflab_sim_t":%.9f' % (seq.last_token_at - ticket.origin)
    if first:
        fields += b',"perflab_sim_arrival":%.9f' % (seq.arrival - ticket.origin)
        if ticket.late > 0:
            fields += b',"perflab_sim_late":%.9f' % ticket.late
    if last and len(seq.energy_mj) == 2:
        fields += b',"perflab_sim_energy_mj":[%.6f,%.6f]' % tuple(seq.energy_mj)
    return fields


def _usage(prompt_tokens: int, completion_tokens: int) -> str:
    return (
        f'{{"prompt_tokens":{prompt_tokens},"total_tokens":{prompt_tokens + completion_tokens},'
        f'"completion_tokens":{completion_tokens},"prompt_tokens_details":null}}'
    )


def _split_pieces(seq: Sequence, start: int, end: int, reasoning_tokens: int) -> List[tuple]:
    """``[(key, text), ...]`` for tokens ``start..end-1``: reasoning part first, then content."""
    parts = []
    boundary = min(max(start, reasoning_tokens), end)
    if boundary > start:
        parts.append(
            ("reasoning_content", "".join(output_piece(seq.seed, i) for i in range(start, boundary)))
        )
    if end > boundary:
        parts.append(("content", "".join(output_piece(seq.seed, i) for i in range(boundary, end))))
    return parts


class StreamSink:
    """Writes each step's tokens as SSE chunks straight to the client."""

    def __init__(self, responder: Responder, fmt: ResponseFormat, include_usage: bool) -> None:
        self._responder = responder
        self._fmt = fmt
        self._include_usage = include_usage
        self._sent = 0

    def start(self) -> None:
        self._responder.start_stream()

    def on_tokens(self, seq: Sequence, count: int, finished: bool) -> None:
        fmt = self._fmt
        sent = self._sent
        if count == 1 and not finished and not fmt.reasoning_tokens:
            self._sent = sent + 1
            piece = output_piece_bytes(seq.seed, sent)
            self._responder.write_frame(fmt.token_frame(sent == 0, piece, clock_fields(seq, sent == 0)))
            return
        parts = _split_pieces(seq, self._sent, seq.generated, fmt.reasoning_tokens)
        chunks = []
        for index, (key, text) in enumerate(parts):
            last = finished and index == len(parts) - 1
            first = self._sent == 0 and index == 0
            chunk = fmt.delta_chunk(first, key, text, seq.finish_reason if last else None)
            fields = clock_fields(seq, first, last)
            chunks.append(with_fields(chunk, fields) if fields else chunk)
        self._sent = seq.generated
        if not finished:
            self._responder.write_chunk(b"".join(chunks))
            return
        if self._include_usage:
            chunks.append(fmt.usage_chunk(seq.prompt_len, seq.generated))
        chunks.append(b"data: [DONE]\n\n")
        self._responder.end_stream(b"".join(chunks))


class CollectSink:
    """Answers with one JSON body when the sequence finishes."""

    def __init__(self, responder: Responder, fmt: ResponseFormat) -> None:
        self._responder = responder
        self._fmt = fmt

    def start(self) -> None:
        """Nothing is sent before the last token."""

    def on_tokens(self, seq: Sequence, count: int, finished: bool) -> None:
        if not finished:
            return
        texts = {"reasoning_content": "", "content": ""}
        for key, text in _split_pieces(seq, 0, seq.generated, self._fmt.reasoning_tokens):
            texts[key] = text
        body = self._fmt.full_body(
            texts["reasoning_content"], texts["content"], seq.finish_reason, seq.prompt_len, seq.generated
        )
        self._responder.send(200, body)
