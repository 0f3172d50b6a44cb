"""What the disaggregation tests check of simulated workers behind a real router: streamed requests
through the router, each handed off prefill → decode, as both workers' logs tell."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

from tests.sim.conftest import EngineProcess
from tests.sim.sse_client import stream_chat

REQUESTS = 12
TOKENS = 5


def chat_through_router(
    port: int, model: str, prefill: EngineProcess, decode: EngineProcess, handoff: str, source: str
) -> None:
    """Send :data:`REQUESTS` streamed chats of :data:`TOKENS` tokens through the router on ``port``; each
    must come back whole and appear in the prefill's log as ``KV sent <handoff>`` and in the decode's as
    ``KV received <handoff> from <source>`` with the same prompt tokens (``handoff`` a regex with one
    group for the key)."""
    prompts = [f"question number {index} about disaggregation" for index in range(REQUESTS)]
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda prompt: stream_chat(port, model, prompt, TOKENS), prompts))
    assert all(answer["usage"]["completion_tokens"] == TOKENS for answer in answers)
    assert all(len(answer["content"].split()) == TOKENS for answer in answers)
    sent = dict(re.findall(rf"KV sent {handoff} tokens=(\d+)", prefill.log))
    received = re.findall(rf"KV received {handoff} from {source} tokens=(\d+)", decode.log)
    assert len(received) == len(prompts) == len(sent)
    assert all(sent[key] == tokens for key, tokens in received)
