"""How much streaming the bench client can follow, and how exactly it times it.

(a) chunks/s ingested from a zero-delay scripted server (its own process, responses pre-rendered and
    written at once) at 256 and 1024 concurrent streams, for the bench's client path
    (``StreamingTransport`` driven directly, body drained from the socket callback), for
    ``httpx.AsyncClient`` on the same transport, and for ``httpx.AsyncClient`` with httpx's default
    transport;
(b) TTFT/ITL measured by the bench's dispatch path at 256 and 512 concurrent streams against the
    scripted server with 50 ms / 10 ms injected, compared with the injected values and with the wire
    (the server logs, on the same clock, when it read each request and wrote each chunk).

Run from the repository root: ``python benchmarks/bench_client_capacity.py``. Prints figures only.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import httpx  # noqa: E402

from perflab.bench import BenchOptions  # noqa: E402
from perflab.bench.client import Outcome, StreamDecoder, build_body, stream_request  # noqa: E402
from perflab.bench.clock import new_event_loop  # noqa: E402
from perflab.bench.datasets import load_dataset  # noqa: E402
from perflab.bench.dispatch import Dispatch, Phase, prepare_requests  # noqa: E402
from perflab.bench.progress import Progress  # noqa: E402
from perflab.bench.traffic import build_schedule  # noqa: E402
from perflab.bench.transport import StreamingTransport  # noqa: E402
from tests.fixtures.streaming_server import start_server_process  # noqa: E402

CAPACITY_TOKENS = {256: 2000, 1024: 500}
ACCURACY_STREAMS = (256, 512)
INJECTED_TTFT_MS = 50.0
INJECTED_ITL_MS = 10.0


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


async def ingest(port: int, streams: int, tokens: int, client_kind: str) -> float:
    """Chunks per second for ``streams`` concurrent responses of ``tokens`` chunks each."""
    url = httpx.URL(f"http://127.0.0.1:{port}/v1/chat/completions")
    transport = StreamingTransport()
    client = None
    if client_kind == "bench":

        async def send(request: httpx.Request, outcome: Outcome) -> None:
            await stream_request(transport, request, True, outcome)
    else:
        client = httpx.AsyncClient(
            transport=transport if client_kind == "client+streaming" else None,
            timeout=httpx.Timeout(None),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=None),
            trust_env=False,
        )

        async def send(request: httpx.Request, outcome: Outcome) -> None:
            async with client.stream(request.method, request.url, content=request.content) as response:
                await _drain_generic(response, outcome)

    warm = build_body("chat", "m", "warm", 2, True, 0.0)
    await asyncio.gather(*[send(httpx.Request("POST", url, content=warm), Outcome()) for _ in range(streams)])
    body = build_body("chat", "m", "hello", tokens, True, 0.0)
    requests = [httpx.Request("POST", url, content=body) for _ in range(streams)]
    outcomes = [Outcome() for _ in range(streams)]
    started = time.perf_counter()
    await asyncio.gather(
        *[send(request, outcome) for request, outcome in zip(requests, outcomes, strict=True)]
    )
    elapsed = time.perf_counter() - started
    if client is not None:
        await client.aclose()
    await transport.aclose()
    failures = [outcome.error for outcome in outcomes if outcome.error]
    if failures:
        raise RuntimeError(f"{len(failures)} requests failed, first: {failures[0]}")
    return sum(len(outcome.chunk_times) for outcome in outcomes) / elapsed


async def _drain_generic(response: httpx.Response, outcome: Outcome) -> None:
    decoder = StreamDecoder(outcome, True, False)
    async for buffer in response.aiter_raw():
        decoder(buffer, time.perf_counter())


def capacity_table() -> list[tuple[str, int, float]]:
    rows = []
    process, port = start_server_process()
    try:
        for streams, tokens in CAPACITY_TOKENS.items():
            for kind in ("bench", "client+streaming", "client+default"):
                loop = new_event_loop()
                slow = kind == "client+default"
                try:
                    rate = loop.run_until_complete(
                        ingest(port, streams, tokens // 4 if slow else tokens, kind)
                    )
                finally:
                    loop.close()
                rows.append((kind, streams, rate))
    finally:
        process.kill()
        process.wait()
    return rows


async def timed_run(options: BenchOptions) -> list[Dispatch]:
    """The measured phase exactly as ``run_benchmark`` sends it, keeping the raw (absolute) timings."""
    options.validate()
    dataset = load_dataset(options.dataset_spec(), None)
    schedule = build_schedule(options.num_prompts, options.request_rate, options.burstiness, options.seed)
    transport = StreamingTransport()
    try:
        phase = Phase(transport, options, False, Progress(options.num_prompts, "none"))
        return await phase.run(prepare_requests(options, dataset.samples), schedule)
    finally:
        await transport.aclose()


def accuracy(streams: int, log_path: str) -> dict[str, float]:
    """Client-measured TTFT/ITL at ``streams`` concurrent streams, with the server's log as truth.

    The server logs (on the same monotonic clock) when it read each request and wrote each chunk, so
    the client's error can be told apart from the server's lateness: the client's stamp of a chunk
    minus the instant the server wrote it is all the client adds.
    """
    process, port = start_server_process(INJECTED_TTFT_MS, INJECTED_ITL_MS, log_path)
    options = BenchOptions(
        base_urls=[f"http://127.0.0.1:{port}"],
        model="scripted-model",
        input_len=32,
        output_len=50,
        num_prompts=streams * 3,
        max_concurrency=streams,
        request_rate=streams * 2.0,
        progress="none",
    )
    loop = new_event_loop()
    try:
        dispatches = loop.run_until_complete(timed_run(options))
    finally:
        loop.close()
        process.terminate()
        process.wait()
    served = {}
    with open(log_path, encoding="utf-8") as handle:
        for line in handle:
            entry = json.loads(line)
            if "messages" in entry["body"]:
                served[entry["body"]["messages"][-1]["content"]] = entry
    client_ttft, wire_ttft, server_ttft, client_itl, server_itl, stamp_lag = [], [], [], [], [], []
    for dispatch in dispatches:
        outcome = dispatch.outcome
        entry = served[dispatch.prepared.sample.prompt]
        writes = entry["chunk_times"]
        client_ttft.append(outcome.chunk_times[0] - outcome.sent_at)
        wire_ttft.append(writes[0] - outcome.sent_at)
        server_ttft.append(writes[0] - entry["received_at"])
        client_itl.extend(later - earlier for earlier, later in pairwise(outcome.chunk_times))
        server_itl.extend(later - earlier for earlier, later in pairwise(writes))
        stamp_lag.extend(
            arrival - written for arrival, written in zip(outcome.chunk_times, writes, strict=True)
        )
    stamp_lag.sort()
    return {
        "requests": len(dispatches),
        "failed": sum(1 for dispatch in dispatches if not dispatch.outcome.success),
        "client TTFT": statistics.mean(client_ttft) * 1000.0,
        "wire TTFT": statistics.mean(wire_ttft) * 1000.0,
        "server TTFT": statistics.mean(server_ttft) * 1000.0,
        "client ITL": statistics.mean(client_itl) * 1000.0,
        "server ITL": statistics.mean(server_itl) * 1000.0,
        "stamp lag mean": statistics.mean(stamp_lag) * 1000.0,
        "stamp lag p99": stamp_lag[int(0.99 * (len(stamp_lag) - 1))] * 1000.0,
    }


def print_accuracy(streams: int, figures: dict[str, float]) -> None:
    injected = f"TTFT {INJECTED_TTFT_MS:g} ms / ITL {INJECTED_ITL_MS:g} ms"
    print(
        f"(b) {streams} concurrent streams, injected {injected}: {figures['requests']:.0f} requests, "
        f"{figures['failed']:.0f} failed"
    )
    ttft, itl = figures["client TTFT"], figures["client ITL"]
    print(
        f"  TTFT  client {ttft:7.2f} ms  vs injected {(ttft - INJECTED_TTFT_MS) / INJECTED_TTFT_MS:+7.2%}"
        f"  vs wire {(ttft - figures['wire TTFT']) / figures['wire TTFT']:+7.2%}"
        f"  (wire {figures['wire TTFT']:.2f} ms, server's own {figures['server TTFT']:.2f} ms)"
    )
    print(
        f"  ITL   client {itl:7.2f} ms  vs injected {(itl - INJECTED_ITL_MS) / INJECTED_ITL_MS:+7.2%}"
        f"  vs wire {(itl - figures['server ITL']) / figures['server ITL']:+7.2%}"
        f"  (server wrote every {figures['server ITL']:.2f} ms)"
    )
    print(
        f"  client stamp − server write per chunk: mean {figures['stamp lag mean']:.2f} ms, "
        f"p99 {figures['stamp lag p99']:.2f} ms"
    )


def main() -> None:
    versions = f"Python {platform.python_version()}, httpx {httpx.__version__}"
    print(f"machine: {os.cpu_count()} CPUs, {cpu_model()}, {versions}")
    print()
    print("(a) chunks/s ingested from a zero-delay server (server in its own process)")
    print(f"{'client':<44} {'streams':>8} {'chunks/s':>12}")
    names = {
        "bench": "perflab bench client (StreamingTransport)",
        "client+streaming": "httpx.AsyncClient + StreamingTransport",
        "client+default": "httpx.AsyncClient + default transport",
    }
    for kind, streams, rate in capacity_table():
        print(f"{names[kind]:<44} {streams:>8} {rate:>12,.0f}")
    print()
    for streams in ACCURACY_STREAMS:
        with tempfile.TemporaryDirectory() as scratch:
            print_accuracy(streams, accuracy(streams, os.path.join(scratch, "served.jsonl")))
    load = os.getloadavg()
    print(f"load average after the run: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
