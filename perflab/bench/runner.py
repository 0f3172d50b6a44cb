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
import dataclasses
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
from perflab.bench.prefix_share import own_prefix_share
from perflab.bench.progress import Progress
from perflab.bench.records import RequestRecord
from perflab.bench.report import CLOCK_WINDOW_KEY, SIM_ENERGY_KEY, build_result
from perflab.bench.rounds import POOL_DATASETS, Floor, MeasuredRounds, round_items, round_seed, round_spec
from perflab.bench.rxstamp import SOURCE_KERNEL
from perflab.bench.session_metrics import session_summary, ttft_by_turn
from perflab.bench.sessions import SessionPhase, session_turns
from perflab.bench.simclock import SOURCE_SIMULATED
from perflab.bench.stopping import (
    BenchStopped,
    EarlyStop,
    in_thread,
    partial_fields,
    run_until_stopped,
    unless_stopped,
)
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
) -> Tuple[List[Dispatch], int, Dict[str, int]]:
    """Pre-connect, then send the measured requests (or sessions) with the cyclic GC frozen.

    Returns the dispatches (only those that ended when ``stop`` cut the run short), the number of
    connections ready before the first request and the phase's reads counted by timing source.
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
        return dispatches, preconnected, {SOURCE_READ: len(dispatches)}
    return (
        dispatches,
        preconnected,
        {source: count - before.get(source, 0) for source, count in sources.items()},
    )


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


def round_options(options: BenchOptions, round_index: int) -> BenchOptions:
    """The options of round ``round_index``: the run's for the first, the round's seed after it (its
    arrivals and think times; its prompts come from :func:`perflab.bench.rounds.round_spec`)."""
    if round_index == 0:
        return options
    return dataclasses.replace(options, seed=round_seed(options.seed, round_index), warmup=0)


def draw(options: BenchOptions, tokenizers: Tokenizers, round_index: int, realign: bool) -> Preparation:
    """Round ``round_index``'s dataset, every request built (or the sessions split) and its schedule;
    the first round's prompt lengths are checked against the server's tokenizer (random prompts it
    counts differently re-aligned to it, and so every later round's when ``realign``)."""
    spec = round_spec(options.dataset_spec(), options.num_prompts, round_index)
    dataset = load_dataset(spec, tokenizers.best)
    length_check = None
    if round_index == 0 and tokenizers.local is not None and tokenizers.server is not None:
        length_check = check_lengths(dataset, tokenizers.server)
        if options.dataset == "random" and length_check["mismatched"]:
            changed = align_to_server(dataset, tokenizers.server, options.seed)
            dataset.notes.append(
                f"the server's tokenizer counts the prompts differently from {tokenizers.local.name}: "
                f"{changed} prompts re-aligned to its lengths"
            )
            length_check = check_lengths(dataset, tokenizers.server)
    elif realign and tokenizers.server is not None:
        align_to_server(dataset, tokenizers.server, spec.seed)
    ahead = round_options(options, round_index)
    items: List[Any] = (
        dataset.sessions if dataset.sessions is not None else prepare_requests(ahead, dataset.samples)
    )
    warmup = items[: options.warmup] if round_index == 0 else []
    measured = round_items(items[len(warmup) :], options.num_prompts, round_index, spec.kind in POOL_DATASETS)
    schedule = due_times(ahead, dataset, len(measured))
    measured = measured[: len(schedule)]
    if dataset.sessions is None:
        urls, turns = [item.base_url for item in measured], {}
    else:
        urls = [options.base_urls[index % len(options.base_urls)] for index in range(len(measured))]
        turns = {index: len(session.turns) for index, session in enumerate(measured)}
    return Preparation(tokenizers, dataset, length_check, warmup, measured, schedule, urls, turns)


def prepare(options: BenchOptions) -> Preparation:
    """The served model when none was named, the tokenizers and the first round's dataset with its
    length check, every request built (or the sessions split), and the schedule (synchronous: run in
    a thread, see :func:`in_thread`)."""
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
        return draw(options, tokenizers, 0, realign=False)
    except BaseException:
        tokenizers.close()
        raise


def sending_phase(
    transport: httpx.AsyncBaseTransport,
    options: BenchOptions,
    ready: Preparation,
    items: List[Any],
    keep_text: bool,
    phase: str = "benchmark",
    progress: Optional[Progress] = None,
    first_session: int = 0,
    clock_run: Optional[str] = None,
) -> Phase:
    """The phase that sends ``items``: sessions (counted by their turns; the measured ones numbered after
    the warm-up's and the earlier rounds', from ``first_session``), or prepared requests; counted in
    ``progress`` when given (the rounds of one run share it); ``clock_run`` names its timeline for a
    simulator's clock."""
    if ready.dataset.sessions is not None:
        first = len(ready.warmup) + first_session if phase == "benchmark" else 0
        counted = progress or Progress(session_turns(items), options.progress, phase=phase)
        return SessionPhase(transport, options, counted, first_session=first, clock_run=clock_run)
    counted = progress or Progress(len(items), options.progress, phase=phase)
    return Phase(transport, options, keep_text, counted, clock_run=clock_run)


def _progress_floor(floor: Floor) -> Optional[Dict[str, float]]:
    """The floor the progress lines count rounds against (None without one: a single round)."""
    if not floor.min_duration_s and not floor.min_requests:
        return None
    return {"min_duration_s": floor.min_duration_s, "min_requests": floor.min_requests}


def _reset_or_not(options: BenchOptions) -> Dict[str, Any]:
    """The prefix caches emptied before a round (``--flush-cache``), or the record that none was asked."""
    if not options.flush_cache:
        return not_requested()
    return reset_prefix_caches(options.base_urls, options.headers(), options.flush_cache_timeout)


async def _next_round(
    stop: EarlyStop, options: BenchOptions, ready: Preparation, round_index: int
) -> Optional[Preparation]:
    """Round ``round_index`` drawn (in a thread), or None when the run was stopped meanwhile."""
    realign = any("re-aligned" in note for note in ready.dataset.notes)
    try:
        return await unless_stopped(
            stop,
            in_thread(lambda: draw(options, ready.tokenizers, round_index, realign)),
            f"while preparing round {round_index + 1}",
        )
    except BenchStopped:
        stop.cut = True
        return None


def _own_prefix_share(
    ready: Preparation, measured: MeasuredRounds, records: List[RequestRecord], cache_reset: Dict[str, Any]
) -> Optional[float]:
    """The most of the prompt tokens the run's own prompts could serve one another from a prefix cache
    (:mod:`perflab.bench.prefix_share`): the successful requests in the order sent, after the warm-up's
    prompts unless a cache reset emptied the cache."""
    earlier = [] if cache_reset.get("done") else [item.sample.prompt for item in ready.warmup]
    served = [
        (text, record.input_tokens, record.usage_input_tokens)
        for text, record in zip(measured.prompts(), records)
        if record.success
    ]
    return own_prefix_share(earlier, served)


async def run_benchmark_async(
    options: BenchOptions,
    transport: Optional[httpx.AsyncBaseTransport] = None,
    stop: Optional[EarlyStop] = None,
) -> Dict[str, Any]:
    """Run the benchmark ``options`` describe and return its JSON result.

    Requests go through ``transport`` when given (closed at the end), else a ``StreamingTransport``.
    With ``--perflab-min-duration``/``--perflab-min-requests`` the measured requests are sent in
    rounds (:mod:`perflab.bench.rounds`). When ``stop`` is requested, or a server goes away, the result
    covers the requests that ended and is marked ``partial`` (``BenchStopped`` if none had ended, and
    at once while the dataset is prepared or the warm-up runs).
    """
    stop = stop if stop is not None else EarlyStop()
    options.validate()
    raise_open_file_limit()
    ready = await unless_stopped(stop, in_thread(lambda: prepare(options)), "while preparing the dataset")
    tokenizers, dataset = ready.tokenizers, ready.dataset
    bench = None if options.wall_clock else secrets.token_hex(8)
    notes = dataset.notes
    floor = Floor(options.min_duration_s, options.min_requests)
    measured = MeasuredRounds()
    try:
        if transport is None:
            transport = StreamingTransport()
        try:
            if ready.warmup:
                warmup_phase = sending_phase(
                    transport,
                    options,
                    ready,
                    ready.warmup,
                    False,
                    phase="warmup",
                    clock_run=bench and f"{bench}/warmup",
                )
                await unless_stopped(
                    stop, warmup_phase.run(ready.warmup, [0.0] * len(ready.warmup)), "during the warm-up"
                )
            progress = Progress(0, options.progress, floor=_progress_floor(floor))
            window = EngineWindow(options.base_urls, options.headers())
            current: Optional[Preparation] = ready
            cache_reset: Dict[str, Any] = {}
            while current is not None:
                index = measured.count
                ahead = round_options(options, index)
                progress.begin_round(
                    index + 1,
                    session_turns(current.measured)
                    if current.dataset.sessions is not None
                    else len(current.measured),
                )
                phase = sending_phase(
                    transport,
                    ahead,
                    current,
                    current.measured,
                    tokenizers.best is not None,
                    progress=progress,
                    first_session=measured.sessions,
                    clock_run=bench and f"{bench}/measured-{index}",
                )
                reset = _reset_or_not(options)
                cache_reset = cache_reset or reset
                if index == 0:
                    window.start()
                try:
                    dispatches, preconnected, reads = await send_measured(
                        transport, phase, current.measured, current.schedule, stop, current.targets
                    )
                except BenchStopped:
                    if index == 0:
                        raise
                    dispatches, preconnected, reads = [], 0, {}
                measured.add(
                    dispatches,
                    started_at=phase.started_at,
                    sent=len(phase.dispatches),
                    planned_turns=current.planned_turns,
                    dataset_source=current.dataset.prompt_tokens_source,
                    preconnected=preconnected,
                    reads=reads,
                    reset=reset,
                )
                notes.extend(note for note in current.dataset.notes if note not in notes)
                another = not stop.cut and measured.another(floor, len(current.measured))
                progress.end_round(another, measured.measured_s, measured.completed, measured.paused_s)
                if not another:
                    break
                current = await _next_round(stop, options, ready, index + 1)
            engine_fields = window.fields()
        finally:
            await transport.aclose()
        records = measured.records(tokenizers.best)
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
        dispatch_lag=dispatch_lag_ms(measured.phases),
        timing={
            "timing_source": SOURCE_SIMULATED if measured.simulated else timing_source(measured.reads),
            "preconnected": measured.preconnected or 0,
            "coalesced_chunks": measured.coalesced_chunks,
        },
        notes=notes + measured.clock_notes(),
    )
    result.update(engine_fields)
    result[CLOCK_WINDOW_KEY] = measured.clock_window()
    energy = measured.simulated_energy()
    if energy is not None:
        result[SIM_ENERGY_KEY] = energy
    result["cache_reset"] = cache_reset
    if dataset.sessions is None:
        result["own_prefix_share"] = _own_prefix_share(ready, measured, records, cache_reset)
    if floor != Floor():
        result["rounds"] = measured.summary(floor, options.num_prompts)
    if dataset.sessions is not None:
        result["ttft_by_turn_ms"] = ttft_by_turn(records)
        result["sessions"] = session_summary(
            records, measured.planned_turns, metrics.duration_s, options.goodput or None
        )
    if stop.cut:
        result.update(partial_fields(stop, sent=measured.sent, finished=len(records)))
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
