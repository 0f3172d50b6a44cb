"""Run a benchmark: tokenizers, dataset, warmup, the scheduled measured requests, then the result.

``run_benchmark_async(options)`` returns the JSON result (see ``report.build_result``). Everything
the requests need is prepared first, in a thread (:func:`prepare`), so SIGTERM/SIGINT are answered
while a large dataset is built (:mod:`perflab.bench.stopping`). Warmup requests (or sessions) go
first, with the same concurrency limit, and are left out of every statistic; the measured ones follow
the precomputed schedule (``traffic``, or a trace's own times; sent by ``dispatch``, sessions by
``sessions``). Between the two, ``--flush-cache`` empties the servers' prefix caches
(``cache_reset``), and the engines' counters are read on both sides of the measured phase
(``engine_metrics``). When a local tokenizer made
the prompts and the server has ``/tokenize``, up to 200 prompt lengths are checked against it; random
prompts the two count differently are re-aligned to the server's tokenizer first (as vLLM 0.32.0 does),
with a note saying so.

Before the measured requests start, ``send_measured`` opens as many keep-alive connections per
server as requests can be in flight there (the concurrency limit, else the request count, at most
``PRECONNECT_LIMIT``), so a burst of first requests does not pay for TCP handshakes — nor the server
for accepting them — while it is being timed (``preconnected`` in the result). The run's
``timing_source`` says how the reads of the measured requests were stamped: ``kernel`` (the
kernel's receive time), ``poll`` (when the event loop's poll returned) or ``read`` (when the read was
processed), ``+``-joined when several occurred — or ``simulated``: every request of both phases tells
a simulator its place in the schedule, and when every successful measured response carried the
simulator's clock the figures come from that clock (``simclock``; not with ``--wall-clock``).
"""

from __future__ import annotations

import contextlib
import gc
import resource
import secrets
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import httpx

from perflab.bench.cache_reset import not_requested, reset_prefix_caches
from perflab.bench.clock import SOURCE_POLL, SOURCE_READ, new_event_loop
from perflab.bench.datasets import Dataset, load_dataset
from perflab.bench.datasets.synthetic import align_to_server
from perflab.bench.dispatch import Dispatch, Phase, dispatch_lag_ms, prepare_requests
from perflab.bench.engine_metrics import EngineWindow
from perflab.bench.errors import BenchError
from perflab.bench.metrics import compute
from perflab.bench.options import BenchOptions
from perflab.bench.progress import Progress
from perflab.bench.report import build_result
from perflab.bench.rxstamp import SOURCE_KERNEL
from perflab.bench.session_metrics import session_summary, ttft_by_turn
from perflab.bench.sessions import SessionPhase, session_turns
from perflab.bench.simclock import SOURCE_SIMULATED, clock_timing
from perflab.bench.stopping import EarlyStop, in_thread, partial_fields, run_until_stopped, unless_stopped
from perflab.bench.tally import to_record
from perflab.bench.tokenizer import (
    ServerTokenizer,
    Tokenizers,
    TokenizeUnavailable,
    first_served_model,
    resolve_tokenizers,
)
from perflab.bench.traffic import build_schedule
from perflab.bench.transport import StreamingTransport

MAX_LENGTH_CHECKS = 200
PRECONNECT_LIMIT = 4096


def check_lengths(dataset: Dataset, server: ServerTokenizer) -> Dict[str, Any]:
    """Compare the dataset's prompt lengths with the server's /tokenize on up to 200 prompts."""
    report: Dict[str, Any] = {
        "method": "server /tokenize",
        "checked": 0,
        "mismatched": 0,
        "max_difference": 0,
    }
    seen = set()
    for sample in dataset.samples:
        if report["checked"] == MAX_LENGTH_CHECKS:
            break
        if sample.prompt_tokens is None or sample.prompt in seen:
            continue
        seen.add(sample.prompt)
        try:
            difference = abs(server.count(sample.prompt) - sample.prompt_tokens)
        except TokenizeUnavailable as exc:
            report["error"] = str(exc)
            break
        report["checked"] += 1
        if difference:
            report["mismatched"] += 1
            report["max_difference"] = max(report["max_difference"], difference)
    return report


def raise_open_file_limit() -> None:
    """Let the process open as many sockets as the hard limit allows (thousands of streams need it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def connections_wanted(options: BenchOptions, targets: Sequence[str]) -> Dict[str, int]:
    """Per server, how many requests (or sessions, one server each) can be in flight there at once
    (capped at ``PRECONNECT_LIMIT``); ``targets`` names the server of each."""
    requests: Dict[str, int] = {}
    for base_url in targets:
        requests[base_url] = requests.get(base_url, 0) + 1
    limit = min(options.max_concurrency or len(targets) or 1, PRECONNECT_LIMIT)
    return {base_url: min(count, limit) for base_url, count in requests.items()}


def timing_source(read_sources: Dict[str, int]) -> str:
    """``kernel``, ``poll``, ``read`` or a ``+``-joined mix, from the reads counted per source."""
    used = [source for source in (SOURCE_KERNEL, SOURCE_POLL, SOURCE_READ) if read_sources.get(source)]
    return "+".join(used) if used else "none"


async def send_measured(
    transport: httpx.AsyncBaseTransport,
    phase: Phase,
    items: Sequence[Any],
    schedule: Sequence[float],
    stop: EarlyStop,
    targets: Sequence[str],
) -> Tuple[List[Dispatch], int, str]:
    """Pre-connect, then send the measured requests (or sessions) with the cyclic GC frozen.

    Returns the dispatches (only those that ended when ``stop`` cut the run short), the number of
    connections ready before the first request and the timing source of the phase's reads.
    """
    preconnected = 0
    preconnect = getattr(transport, "preconnect", None)
    if preconnect is not None:
        for base_url, count in connections_wanted(phase.options, targets).items():
            url = httpx.URL(base_url)
            preconnected += await preconnect(url, count)
    sources: Optional[Dict[str, int]] = getattr(transport, "read_sources", None)
    before = dict(sources or {})
    # The prepared requests and the dataset live through the run: keep the cyclic collector from
    # walking them again and again (fewer, shorter pauses while streams are timed).
    gc.collect()
    gc.freeze()
    try:
        dispatches = await run_until_stopped(phase, items, schedule, stop)
    finally:
        gc.unfreeze()
    if sources is None:
        return dispatches, preconnected, SOURCE_READ
    used = {source: count - before.get(source, 0) for source, count in sources.items()}
    return dispatches, preconnected, timing_source(used)


@dataclass
class Preparation:
    """What the measured requests (or sessions) need, built before any is sent: the warm-up and the
    measured items (prepared requests, or sessions), when each measured one is due, its server, and for
    sessions the number of turns of each."""

    tokenizers: Tokenizers
    dataset: Dataset
    length_check: Optional[Dict[str, Any]]
    warmup: List[Any]
    measured: List[Any]
    schedule: List[float]
    targets: List[str]
    planned_turns: Dict[int, int]


def measured_schedule(options: BenchOptions, dataset: Dataset, count: int, notes: List[str]) -> List[float]:
    """When each measured item is due: a trace's own times (``--use-trace-timestamps``, scaled by
    ``--mooncake-slowdown-factor``), else the request rate's schedule; items due after ``--max-seconds``
    are left out."""
    arrivals = dataset.arrivals_s
    if options.use_trace_timestamps and arrivals is not None:
        measured = arrivals[len(arrivals) - count :]
        schedule = [(arrival - measured[0]) * options.slowdown_factor for arrival in measured]
    else:
        schedule = build_schedule(
            count, options.request_rate, options.burstiness, options.seed, options.ramp_up_seconds
        )
    if options.max_seconds is not None:
        kept = [due for due in schedule if due <= options.max_seconds]
        if len(kept) < len(schedule):
            notes.append(
                f"{len(schedule) - len(kept)} of {len(schedule)} requests were due after --max-seconds "
                f"{options.max_seconds:g} and were not sent"
            )
        schedule = kept
    return schedule


def due_times(options: BenchOptions, dataset: Dataset, count: int) -> List[float]:
    """``measured_schedule`` of ``count`` items; ``BenchError`` when none is due at all."""
    schedule = measured_schedule(options, dataset, count, dataset.notes)
    if not schedule:
        raise BenchError(f"no request is due within --max-seconds {options.max_seconds:g}")
    return schedule


def prepare(options: BenchOptions) -> Preparation:
    """The served model when none was named, the tokenizers and the dataset with its length check,
    every request built (or the sessions split), and the schedule (synchronous: run in a thread, see
    :func:`in_thread`)."""
    if not options.model:
        options.model = first_served_model(options.base_urls[0], options.headers())
    tokenizers = resolve_tokenizers(
        options.tokenizer,
        options.model,
        options.base_urls[0],
        options.headers(),
        served_model=options.served_model_name,
        trust_remote_code=options.trust_remote_code,
    )
    try:
        dataset = load_dataset(options.dataset_spec(), tokenizers.best)
        length_check = None
        if tokenizers.local is not None and tokenizers.server is not None:
            length_check = check_lengths(dataset, tokenizers.server)
            if options.dataset == "random" and length_check["mismatched"]:
                changed = align_to_server(dataset, tokenizers.server, options.seed)
                dataset.notes.append(
                    f"the server's tokenizer counts the prompts differently from {tokenizers.local.name}: "
                    f"{changed} prompts re-aligned to its lengths"
                )
                length_check = check_lengths(dataset, tokenizers.server)
        items: List[Any] = (
            dataset.sessions if dataset.sessions is not None else prepare_requests(options, dataset.samples)
        )
        warmup, measured = items[: options.warmup], items[options.warmup :]
        schedule = due_times(options, dataset, len(measured))
        measured = measured[: len(schedule)]
    except BaseException:
        tokenizers.close()
        raise
    if dataset.sessions is None:
        urls, turns = [item.base_url for item in measured], {}
    else:
        urls = [options.base_urls[index % len(options.base_urls)] for index in range(len(measured))]
        turns = {index: len(session.turns) for index, session in enumerate(measured)}
    return Preparation(tokenizers, dataset, length_check, warmup, measured, schedule, urls, turns)


def sending_phase(
    transport: httpx.AsyncBaseTransport,
    options: BenchOptions,
    ready: Preparation,
    items: List[Any],
    keep_text: bool,
    phase: str = "benchmark",
    clock_run: Optional[str] = None,
) -> Phase:
    """The phase that sends ``items``: sessions (counted by their turns; the measured ones numbered after
    the warm-up's), or prepared requests; ``clock_run`` names its timeline for a simulator's clock."""
    if ready.dataset.sessions is not None:
        first = len(ready.warmup) if phase == "benchmark" else 0
        progress = Progress(session_turns(items), options.progress, phase=phase)
        return SessionPhase(transport, options, progress, first_session=first, clock_run=clock_run)
    progress = Progress(len(items), options.progress, phase=phase)
    return Phase(transport, options, keep_text, progress, clock_run=clock_run)


async def run_benchmark_async(
    options: BenchOptions,
    transport: Optional[httpx.AsyncBaseTransport] = None,
    stop: Optional[EarlyStop] = None,
) -> Dict[str, Any]:
    """Run the benchmark ``options`` describe and return its JSON result.

    Requests go through ``transport`` when given (closed at the end), else a ``StreamingTransport``.
    When ``stop`` is requested, or a server goes away, the result covers the requests that ended and
    is marked ``partial`` (``BenchStopped`` if none had ended, and at once while the dataset is
    prepared or the warm-up runs).
    """
    stop = stop if stop is not None else EarlyStop()
    options.validate()
    raise_open_file_limit()
    ready = await unless_stopped(stop, in_thread(lambda: prepare(options)), "while preparing the dataset")
    tokenizers, dataset = ready.tokenizers, ready.dataset
    bench = None if options.wall_clock else secrets.token_hex(8)
    try:
        if transport is None:
            transport = StreamingTransport()
        try:
            if ready.warmup:
                warmup_phase = sending_phase(
                    transport, options, ready, ready.warmup, False, "warmup", bench and f"{bench}/warmup"
                )
                await unless_stopped(
                    stop, warmup_phase.run(ready.warmup, [0.0] * len(ready.warmup)), "during the warm-up"
                )
            phase = sending_phase(
                transport,
                options,
                ready,
                ready.measured,
                tokenizers.best is not None,
                clock_run=bench and f"{bench}/measured",
            )
            if options.flush_cache:
                cache_reset = reset_prefix_caches(
                    options.base_urls, options.headers(), options.flush_cache_timeout
                )
            else:
                cache_reset = not_requested()
            window = EngineWindow(options.base_urls, options.headers())
            window.start()
            dispatches, preconnected, source = await send_measured(
                transport, phase, ready.measured, ready.schedule, stop, ready.targets
            )
            engine_fields = window.fields()
        finally:
            await transport.aclose()
        origin = dispatches[0].dispatched_at
        simulated, clock_notes = clock_timing([dispatch.outcome for dispatch in dispatches])
        records = [
            to_record(index, dispatch, origin, dataset.prompt_tokens_source, tokenizers.best, simulated)
            for index, dispatch in enumerate(dispatches)
        ]
    finally:
        tokenizers.close()
    metrics = compute(
        records, options.percentiles, options.goodput or None, options.input_tokens, options.peak_concurrency
    )
    result = build_result(
        options,
        metrics,
        records,
        tokenizer_id=tokenizers.local.name
        if tokenizers.local is not None
        else options.tokenizer or options.model,
        input_tokens_source=dataset.prompt_tokens_source,
        input_tokens_check=ready.length_check,
        dispatch_lag=dispatch_lag_ms(dispatches, phase.started_at),
        timing={
            "timing_source": SOURCE_SIMULATED if simulated else source,
            "preconnected": preconnected,
            "coalesced_chunks": sum(dispatch.outcome.coalesced for dispatch in dispatches),
        },
        notes=dataset.notes + clock_notes,
    )
    result.update(engine_fields)
    result["cache_reset"] = cache_reset
    if dataset.sessions is not None:
        result["ttft_by_turn_ms"] = ttft_by_turn(records)
        result["sessions"] = session_summary(
            records, ready.planned_turns, metrics.duration_s, options.goodput or None
        )
    if stop.cut:
        result.update(partial_fields(stop, sent=len(phase.dispatches), finished=len(dispatches)))
    return result


def run_benchmark(options: BenchOptions, handle_signals: bool = False) -> Dict[str, Any]:
    """Synchronous ``run_benchmark_async`` on its own event loop (``clock.new_event_loop``).

    With ``handle_signals`` (main thread only), SIGTERM and SIGINT end the run early with a partial
    result instead of killing the process."""
    loop = new_event_loop()
    stop = EarlyStop()
    if handle_signals:
        stop.install_signal_handlers(loop)
    try:
        return loop.run_until_complete(run_benchmark_async(options, stop=stop))
    finally:
        if handle_signals:
            stop.remove_signal_handlers(loop)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
