"""How much streaming the bench client can follow, and how exactly it times it.

(a) chunks/s ingested from a zero-delay scripted server (its own process, responses pre-rendered and
    written at once) at 256 and 1024 concurrent streams, for the bench's client path
    (``StreamingTransport`` driven directly, body drained from the socket callback), for
    ``httpx.AsyncClient`` on the same transport, and for ``httpx.AsyncClient`` with httpx's default
    transport;
(b) TTFT, ITL, TPOT and E2EL measured by the bench's run path (pre-connect, frozen GC, scheduled
    dispatch) against the simulator in fixed mode — ``python -m perflab sim serve --fixed-ttft-ms 50
    --fixed-itl-ms 10``, 64 output tokens — at 256, 512 and 1024 concurrent streams (three requests
    per stream), as mean and median error against the injected truth, for the bench's transport and
    for httpx's default transport (when it finishes within the time limit). Beside the errors: how
    reads were timed, the share of token chunks that shared a read with a later chunk (their time is
    an upper bound), and the CPU seconds each process spent per token, which shows when client and
    simulator together ask for more than the machine has, and the simulator's own view of its
    lateness (from its metrics). Each case runs ``--runs`` times; the table shows the median of the
    runs. ``--realtime`` runs simulator and client with ``SCHED_FIFO`` (as root), which shields them
    from other processes but not from each other: the machine as if it ran nothing else.

Run from the repository root:
``python benchmarks/bench_client_capacity.py [--runs N] [--only a|b] [--streams 256,512]
[--clients bench,default] [--realtime] [--smoke]``. Prints figures only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import httpx  # noqa: E402

from benchmarks.sim_accuracy import start_sim  # noqa: E402
from perflab.bench import BenchOptions  # noqa: E402
from perflab.bench.client import Outcome, StreamDecoder, build_body, stream_request  # noqa: E402
from perflab.bench.clock import new_event_loop  # noqa: E402
from perflab.bench.datasets import load_dataset  # noqa: E402
from perflab.bench.dispatch import Phase, prepare_requests  # noqa: E402
from perflab.bench.metrics import compute  # noqa: E402
from perflab.bench.progress import Progress  # noqa: E402
from perflab.bench.runner import raise_open_file_limit, send_measured  # noqa: E402
from perflab.bench.stopping import EarlyStop  # noqa: E402
from perflab.bench.tally import to_record  # noqa: E402
from perflab.bench.traffic import build_schedule  # noqa: E402
from perflab.bench.transport import StreamingTransport  # noqa: E402
from tests.fixtures.cpu_load import process_cpu_seconds  # noqa: E402
from tests.fixtures.realtime import realtime_priority  # noqa: E402
from tests.fixtures.streaming_server import start_server_process  # noqa: E402

CAPACITY_TOKENS = {256: 2000, 1024: 500}
SMOKE_TOKENS = {16: 100}  # --smoke: 16 streams of 100 tokens (and 16 streams in (b))
ACCURACY_STREAMS = (256, 512, 1024)
INJECTED_TTFT_MS = 50.0
INJECTED_ITL_MS = 10.0
OUTPUT_TOKENS = 64
REQUESTS_PER_STREAM = 3
CASE_TIME_LIMIT_S = 180.0
ACCURACY_CLIENTS = ("bench", "default")
TRUTH_MS = {
    "ttft": INJECTED_TTFT_MS,
    "itl": INJECTED_ITL_MS,
    "tpot": INJECTED_ITL_MS,
    "e2el": INJECTED_TTFT_MS + (OUTPUT_TOKENS - 1) * INJECTED_ITL_MS,
}
CLIENT_NAMES = {
    "bench": "perflab bench client (StreamingTransport)",
    "client+streaming": "httpx.AsyncClient + StreamingTransport",
    "client+default": "httpx.AsyncClient + default transport",
    "default": "perflab bench client on httpx's default transport",
}


def machine() -> str:
    model = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} CPUs ({model}), {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, httpx {httpx.__version__}"
    )


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


# (a) capacity ------------------------------------------------------------------------------------


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
                decoder = StreamDecoder(outcome, True, False)
                async for buffer in response.aiter_raw():
                    decoder(buffer, time.perf_counter())

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


def capacity_table(runs: int, sizes: dict[int, int]) -> None:
    """(a) for each of ``sizes`` (concurrent streams → tokens per stream)."""
    print("(a) chunks/s ingested from a zero-delay server (server in its own process), median of runs")
    print(f"{'client':<52} {'streams':>8} {'chunks/s':>12}")
    process, port = start_server_process()
    try:
        for streams, tokens in sizes.items():
            for kind in ("bench", "client+streaming", "client+default"):
                slow = kind == "client+default"
                rates = []
                for _ in range(runs):
                    loop = new_event_loop()
                    try:
                        rates.append(
                            loop.run_until_complete(
                                ingest(port, streams, tokens // 4 if slow else tokens, kind)
                            )
                        )
                    finally:
                        loop.close()
                print(f"{CLIENT_NAMES[kind]:<52} {streams:>8} {statistics.median(rates):>12,.0f}", flush=True)
    finally:
        process.kill()
        process.wait()


# (b) accuracy against the simulator -------------------------------------------------------------


def sim_histograms(url: str) -> dict[str, float]:
    """The simulator's own TTFT/ITL histogram sums and counts (it stamps tokens when it emits them)."""
    text = httpx.get(url + "/metrics", timeout=10).text
    values = {}
    for name in ("time_to_first_token", "inter_token_latency"):
        for part in ("sum", "count"):
            match = re.search(rf"^vllm:{name}_seconds_{part}{{[^}}]*}} (\S+)$", text, re.M)
            values[f"{name}_{part}"] = float(match.group(1)) if match else 0.0
    return values


def sim_mean_error(before: dict[str, float], after: dict[str, float], name: str, truth_ms: float) -> float:
    count = after[f"{name}_count"] - before[f"{name}_count"]
    mean_ms = (after[f"{name}_sum"] - before[f"{name}_sum"]) / count * 1000.0 if count else 0.0
    return 100.0 * (mean_ms - truth_ms) / truth_ms


async def measure(url: str, streams: int, kind: str, sim_pid: int) -> dict[str, float | str]:
    """One measured run of the bench's run path; errors in % of the injected truth."""
    options = BenchOptions(
        base_urls=[url],
        model="sim",
        input_len=32,
        output_len=OUTPUT_TOKENS,
        num_prompts=streams * REQUESTS_PER_STREAM,
        max_concurrency=streams,
        timeout=CASE_TIME_LIMIT_S,
        progress="none",
    )
    options.validate()
    dataset = load_dataset(options.dataset_spec(), None)
    prepared = prepare_requests(options, dataset.samples)
    schedule = build_schedule(options.num_prompts, options.request_rate)
    if kind == "bench":
        transport: httpx.AsyncBaseTransport = StreamingTransport()
    else:
        transport = httpx.AsyncHTTPTransport(
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=None)
        )
    phase = Phase(transport, options, False, Progress(options.num_prompts, "none"))
    histograms_before = sim_histograms(url)
    client_before, sim_before = time.process_time(), process_cpu_seconds(sim_pid)
    started = time.perf_counter()
    try:
        dispatches, preconnected, source = await send_measured(
            transport, phase, prepared, schedule, EarlyStop(), [item.base_url for item in prepared]
        )
    finally:
        await transport.aclose()
    wall = time.perf_counter() - started
    client_cpu, sim_cpu = time.process_time() - client_before, process_cpu_seconds(sim_pid) - sim_before
    histograms_after = sim_histograms(url)
    origin = dispatches[0].dispatched_at
    records = [to_record(index, item, origin, "unverified", None) for index, item in enumerate(dispatches)]
    metrics = compute(records)
    chunks = sum(len(item.outcome.chunk_times) for item in dispatches)
    figures: dict[str, float | str] = {
        "failed": metrics.failed,
        "timing": f"{source}, {preconnected} pre-connected",
        "coalesced %": 100.0 * sum(item.outcome.coalesced for item in dispatches) / max(chunks, 1),
        "first coalesced %": 100.0
        * sum(1 for item in dispatches if item.outcome.chunk_times[1:2] == item.outcome.chunk_times[:1])
        / len(dispatches),
        "sim ttft": sim_mean_error(
            histograms_before, histograms_after, "time_to_first_token", INJECTED_TTFT_MS
        ),
        "sim itl": sim_mean_error(
            histograms_before, histograms_after, "inter_token_latency", INJECTED_ITL_MS
        ),
        "client µs/token": client_cpu / max(chunks, 1) * 1e6,
        "sim µs/token": sim_cpu / max(chunks, 1) * 1e6,
        "cores busy": (client_cpu + sim_cpu) / wall,
    }
    for name, truth in TRUTH_MS.items():
        summary = metrics.latency[name]
        figures[f"{name} mean"] = 100.0 * (summary.mean_ms - truth) / truth
        figures[f"{name} median"] = 100.0 * (summary.median_ms - truth) / truth
    return figures


def run_case(
    streams: int, kind: str, runs: int, realtime: bool, workdir: Path
) -> list[dict[str, float | str]]:
    process, url = start_sim(INJECTED_TTFT_MS, INJECTED_ITL_MS, workdir / f"sim-{streams}-{kind}.log")
    results = []
    try:
        for _ in range(runs):
            loop = new_event_loop()
            try:
                with realtime_priority(process.pid) if realtime else contextlib.nullcontext():
                    results.append(
                        loop.run_until_complete(
                            asyncio.wait_for(measure(url, streams, kind, process.pid), CASE_TIME_LIMIT_S)
                        )
                    )
            except asyncio.TimeoutError:
                print(f"  {CLIENT_NAMES[kind]}: did not finish within {CASE_TIME_LIMIT_S:g} s", flush=True)
                break
            finally:
                loop.close()
    finally:
        process.terminate()
        process.wait(timeout=30)
    return results


def print_case(streams: int, kind: str, results: list[dict[str, float | str]]) -> None:
    def median(key: str) -> float:
        return statistics.median(float(result[key]) for result in results)

    print(
        f"  {CLIENT_NAMES[kind]}: timing {results[0]['timing']}, {len(results)} runs, "
        f"failed {median('failed'):.0f}, load average {load_average()}"
    )
    print(f"    {'':6} {'mean err':>9} {'median err':>11}")
    for name in TRUTH_MS:
        print(f"    {name.upper():6} {median(f'{name} mean'):+8.2f}% {median(f'{name} median'):+10.2f}%")
    if str(results[0]["timing"]).startswith("kernel"):
        print(
            f"    token chunks sharing a read with a later one {median('coalesced %'):.2f} %, "
            f"first tokens among them {median('first coalesced %'):.2f} % of requests"
        )
    print(
        f"    simulator's own mean (when it emitted, before writing): TTFT {median('sim ttft'):+.2f}%, "
        f"ITL {median('sim itl'):+.2f}%"
    )
    print(
        f"    CPU per token: client {median('client µs/token'):.1f} µs, simulator "
        f"{median('sim µs/token'):.1f} µs; cores busy {median('cores busy'):.2f}"
    )
    per_run = ", ".join(
        f"{float(result['ttft mean']):+.1f}%/{float(result['itl mean']):+.1f}%" for result in results
    )
    print(f"    per run (TTFT/ITL mean err): {per_run}", flush=True)


def accuracy_table(args: argparse.Namespace, workdir: Path) -> None:
    truth = ", ".join(f"{name.upper()} {value:g} ms" for name, value in TRUTH_MS.items())
    priority = "real-time priority (SCHED_FIFO)" if args.realtime else "normal priority"
    print(f"(b) error against the simulator's injected timings ({truth}), {priority}, median of runs")
    for streams in args.streams:
        print(f"{streams} concurrent streams, {streams * REQUESTS_PER_STREAM} requests per run")
        for kind in args.clients:
            results = run_case(streams, kind, args.runs, args.realtime, workdir)
            if results:
                print_case(streams, kind, results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", choices=("a", "b"))
    parser.add_argument(
        "--streams",
        type=lambda text: [int(item) for item in text.split(",")],
        default=list(ACCURACY_STREAMS),
        help="(b) concurrent streams, comma-separated (default 256,512,1024)",
    )
    parser.add_argument(
        "--clients",
        type=lambda text: text.split(","),
        default=list(ACCURACY_CLIENTS),
        help="(b) bench (StreamingTransport) and/or default (httpx's transport), comma-separated",
    )
    parser.add_argument(
        "--realtime",
        action="store_true",
        help="(b) run the simulator and the client with SCHED_FIFO (root), shielding them from other load",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="a small run that tests run: one run, 16 streams in (a) and (b)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.streams = 1, list(SMOKE_TOKENS)
    raise_open_file_limit()
    print(f"machine: {machine()}")
    print(f"load average before: {load_average()}")
    print()
    if args.only != "b":
        capacity_table(args.runs, SMOKE_TOKENS if args.smoke else CAPACITY_TOKENS)
        print()
    if args.only != "a":
        with tempfile.TemporaryDirectory() as scratch:
            accuracy_table(args, Path(scratch))
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
