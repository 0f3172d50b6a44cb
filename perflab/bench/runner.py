"""Run a benchmark: tokenizers, dataset, warmup, the scheduled measured requests, then the result.

``run_benchmark_async(options)`` returns the JSON result (see ``report.build_result``). Warmup
requests go first, with the same concurrency limit, and are left out of every statistic; the measured
ones follow the precomputed schedule (``traffic``, sent by ``dispatch``). When a local tokenizer made
the prompts and the server has ``/tokenize``, up to 200 prompt lengths are checked against it.
"""

from __future__ import annotations

import gc
from typing import Any, Dict

from perflab.bench.clock import new_event_loop
from perflab.bench.datasets import Dataset, load_dataset
from perflab.bench.dispatch import Phase, dispatch_lag_ms, prepare_requests
from perflab.bench.metrics import compute
from perflab.bench.options import BenchOptions
from perflab.bench.progress import Progress
from perflab.bench.report import build_result
from perflab.bench.tally import to_record
from perflab.bench.tokenizer import ServerTokenizer, TokenizeUnavailable, resolve_tokenizers
from perflab.bench.traffic import build_schedule
from perflab.bench.transport import StreamingTransport

MAX_LENGTH_CHECKS = 200


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


async def run_benchmark_async(options: BenchOptions) -> Dict[str, Any]:
    """Run the benchmark ``options`` describe and return its JSON result."""
    options.validate()
    schedule = build_schedule(
        options.num_prompts, options.request_rate, options.burstiness, options.seed, options.ramp_up_seconds
    )
    tokenizers = resolve_tokenizers(options.tokenizer, options.model, options.base_urls[0], options.headers())
    try:
        dataset = load_dataset(options.dataset_spec(), tokenizers.best)
        length_check = None
        if tokenizers.local is not None and tokenizers.server is not None:
            length_check = check_lengths(dataset, tokenizers.server)
        prepared = prepare_requests(options, dataset.samples)
        warmup, measured = prepared[: options.warmup], prepared[options.warmup :]
        transport = StreamingTransport()
        keep_text = tokenizers.best is not None
        try:
            if warmup:
                warmup_phase = Phase(
                    transport, options, False, Progress(len(warmup), options.progress, phase="warmup")
                )
                await warmup_phase.run(warmup, [0.0] * len(warmup))
            phase = Phase(transport, options, keep_text, Progress(len(measured), options.progress))
            # The prepared requests and the dataset live through the run: keep the cyclic collector
            # from walking them again and again (fewer, shorter pauses while streams are timed).
            gc.collect()
            gc.freeze()
            try:
                dispatches = await phase.run(measured, schedule)
            finally:
                gc.unfreeze()
        finally:
            await transport.aclose()
        origin = dispatches[0].dispatched_at
        records = [
            to_record(index, dispatch, origin, dataset.prompt_tokens_source, tokenizers.best)
            for index, dispatch in enumerate(dispatches)
        ]
    finally:
        tokenizers.close()
    metrics = compute(records, options.percentiles, options.goodput or None)
    return build_result(
        options,
        metrics,
        records,
        tokenizer_id=tokenizers.local.name
        if tokenizers.local is not None
        else options.tokenizer or options.model,
        input_tokens_source=dataset.prompt_tokens_source,
        input_tokens_check=length_check,
        dispatch_lag=dispatch_lag_ms(dispatches, phase.started_at),
        notes=dataset.notes,
    )


def run_benchmark(options: BenchOptions) -> Dict[str, Any]:
    """Synchronous ``run_benchmark_async`` on its own event loop (reads stamped with the poll time)."""
    loop = new_event_loop()
    try:
        return loop.run_until_complete(run_benchmark_async(options))
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
