"""The bench client's CPU per streamed token on a session workload, beside the single-turn figure.

Both cases run against the same zero-delay scripted server (its own process; each response written at
once, one token per chunk) with 256 requests — or sessions — in flight:

- sessions: ``generated-shared-prefix`` with ``--gsp-num-turns 4`` (1024-word system prompts in 16
  groups, 64-word questions, 64 output tokens per turn), 256 concurrent sessions, each turn sent with
  its history (the server's real replies included) once the previous reply ended;
- single-turn: random prompts of the sessions' mean prompt length, 256 concurrent requests, as many
  requests and output tokens as the sessions' turns.

Only the measured phase is timed (datasets are built and connections opened before it): the client
process's user + system CPU seconds over the phase, divided by the output tokens streamed. Each case
runs ``--runs`` times (median shown). Prints the machine, a table, and one JSON line.

Run from the repository root: ``python benchmarks/session_client_cpu.py [--runs 3] [--sessions 512]``
(``--smoke``: one run of 16 sessions, the same output).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from benchmarks.bench_client_capacity import machine  # noqa: E402
from perflab.bench import BenchOptions  # noqa: E402
from perflab.bench.clock import new_event_loop  # noqa: E402
from perflab.bench.datasets import SharedPrefixSpec  # noqa: E402
from perflab.bench.runner import prepare, raise_open_file_limit, send_measured, sending_phase  # noqa: E402
from perflab.bench.stopping import EarlyStop  # noqa: E402
from perflab.bench.transport import StreamingTransport  # noqa: E402
from tests.fixtures.streaming_server import start_server_process  # noqa: E402

CONCURRENCY = 256
TURNS = 4
SYSTEM_WORDS = 1024
QUESTION_WORDS = 64
OUTPUT_TOKENS = 64
GROUPS = 16


def load_average() -> str:
    return ", ".join(f"{value:.1f}" for value in os.getloadavg())


def session_options(base_url: str, sessions: int) -> BenchOptions:
    return BenchOptions(
        base_urls=[base_url],
        model="scripted-model",
        dataset="generated-shared-prefix",
        shared_prefix=SharedPrefixSpec(
            num_groups=GROUPS, system_prompt_len=SYSTEM_WORDS, question_len=QUESTION_WORDS, num_turns=TURNS
        ),
        output_len=OUTPUT_TOKENS,
        num_prompts=sessions,
        max_concurrency=CONCURRENCY,
        progress="none",
    )


def single_turn_options(base_url: str, requests: int, input_len: int) -> BenchOptions:
    return BenchOptions(
        base_urls=[base_url],
        model="scripted-model",
        input_len=input_len,
        output_len=OUTPUT_TOKENS,
        num_prompts=requests,
        max_concurrency=CONCURRENCY,
        progress="none",
    )


def measure(options: BenchOptions) -> dict:
    """One measured phase: CPU seconds, tokens, wall seconds (the requests or sessions are prepared, as
    the bench prepares them, before the phase)."""
    options.validate()
    ready = prepare(options)
    loop = new_event_loop()
    transport = StreamingTransport()

    async def run() -> tuple[float, float, int]:
        phase = sending_phase(transport, options, ready, ready.measured, False)
        cpu, wall = time.process_time(), time.perf_counter()
        dispatches, _, _ = await send_measured(
            transport, phase, ready.measured, ready.schedule, EarlyStop(), ready.targets
        )
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        await transport.aclose()
        tokens = sum(d.outcome.completion_tokens or 0 for d in dispatches if d.outcome.success)
        return cpu, wall, tokens

    try:
        cpu, wall, tokens = loop.run_until_complete(run())
    finally:
        loop.close()
        ready.tokenizers.close()
    return {"cpu_s": cpu, "wall_s": wall, "tokens": tokens, "us_per_token": cpu / tokens * 1e6}


def mean_prompt_words() -> int:
    """The sessions' mean prompt length in words: history of earlier turns (questions, replies) + own."""
    total = 0
    for turn in range(TURNS):
        total += SYSTEM_WORDS + QUESTION_WORDS * (turn + 1) + OUTPUT_TOKENS * turn
    return total // TURNS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=512)
    parser.add_argument(
        "--smoke", action="store_true", help="a small run (1 run of 16 sessions) that tests run"
    )
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.sessions = 1, 16
    raise_open_file_limit()
    process, port = start_server_process()
    base_url = f"http://127.0.0.1:{port}"
    figures: dict[str, list[dict]] = {"sessions": [], "single-turn": []}
    try:
        for _ in range(args.runs):
            figures["sessions"].append(measure(session_options(base_url, args.sessions)))
            figures["single-turn"].append(
                measure(single_turn_options(base_url, args.sessions * TURNS, mean_prompt_words()))
            )
    finally:
        process.terminate()
        process.wait(10)
    print(f"machine: {machine()}, load average {load_average()}")
    print(
        f"{CONCURRENCY} in flight, {args.sessions} sessions x {TURNS} turns (single-turn: "
        f"{args.sessions * TURNS} requests of {mean_prompt_words()} words), {OUTPUT_TOKENS} tokens each, "
        f"median of {args.runs} runs"
    )
    print(f"{'workload':<12} {'CPU us/token':>13} {'tokens/s':>10} {'tokens':>8}")
    summary = {}
    for name, runs in figures.items():
        us = statistics.median(run["us_per_token"] for run in runs)
        rate = statistics.median(run["tokens"] / run["wall_s"] for run in runs)
        print(f"{name:<12} {us:>13.1f} {rate:>10.0f} {runs[0]['tokens']:>8}")
        summary[name] = {"cpu_us_per_token": round(us, 2), "tokens_per_s": round(rate)}
    print(json.dumps({"machine": machine(), "load": load_average(), "concurrency": CONCURRENCY, **summary}))


if __name__ == "__main__":
    main()
