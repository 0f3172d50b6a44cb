"""Turning a request's raw ``Outcome`` into a ``RequestRecord``: relative times and token counts.

Output tokens come from the server's usage when it reported them, else from a tokenizer over the
streamed text, else from the number of text chunks; the prompt's own tokens from the dataset's exact
count, else the server's usage, else the dataset's estimate, and the server's ``usage.prompt_tokens``
beside them. Each record says which source it used. A run timed by a simulator's clock (``simclock``)
takes its times from that clock: the request's simulated send time and each chunk's, on the phase's
timeline (a failed request without them counts from when it was due).
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from perflab.bench.client import Outcome
from perflab.bench.datasets import Sample
from perflab.bench.dispatch import Dispatch
from perflab.bench.records import (
    SOURCE_CHUNKS,
    SOURCE_TOKENIZER,
    SOURCE_USAGE,
    RequestRecord,
    distribute_tokens,
)
from perflab.bench.tokenizer import Tokenizer, TokenizeUnavailable


def output_count(outcome: Outcome, tokenizer: Optional[Tokenizer]) -> Tuple[int, str]:
    """Output tokens and where the count came from: usage, else a tokenizer, else the chunk count."""
    if outcome.completion_tokens is not None:
        return outcome.completion_tokens, SOURCE_USAGE
    if tokenizer is not None and outcome.text_parts:
        try:
            return tokenizer.count("".join(outcome.text_parts)), SOURCE_TOKENIZER
        except TokenizeUnavailable:
            pass
    return len(outcome.chunk_times), SOURCE_CHUNKS


def input_count(sample: Sample, outcome: Outcome, dataset_source: str) -> Tuple[int, str]:
    """Prompt tokens: the dataset's exact count, else the server's usage, else the dataset's estimate."""
    if sample.prompt_tokens is not None and dataset_source in ("tokenizer", "server"):
        return sample.prompt_tokens, dataset_source
    if outcome.prompt_tokens is not None:
        return outcome.prompt_tokens, SOURCE_USAGE
    if sample.prompt_tokens is not None:
        return sample.prompt_tokens, dataset_source
    return 0, "unknown"


def wall_times(dispatch: Dispatch) -> Tuple[float, float, float, List[float]]:
    """Dispatched, sent, ended and chunk times of a request by the wall clock (``perf_counter``)."""
    outcome = dispatch.outcome
    sent_at = dispatch.sent_at
    return dispatch.dispatched_at, sent_at, max(outcome.ended_at, sent_at), list(outcome.chunk_times)


def simulated_times(dispatch: Dispatch) -> Tuple[float, float, float, List[float]]:
    """The same times by the simulator's clock (the phase's timeline)."""
    outcome = dispatch.outcome
    sent = outcome.sim_arrival if outcome.sim_arrival is not None else dispatch.scheduled_s
    chunks = list(outcome.sim_times)
    return sent, sent, max([sent, *chunks[-1:]]), chunks


def request_times(dispatch: Dispatch, simulated: bool) -> Tuple[float, float, float, List[float]]:
    """A request's times by the clock its run is timed by: the ``simulated`` one, or the wall clock."""
    return simulated_times(dispatch) if simulated else wall_times(dispatch)


def to_record(
    index: int,
    dispatch: Dispatch,
    origin: float,
    dataset_source: str,
    tokenizer: Optional[Tokenizer],
    simulated: bool = False,
) -> RequestRecord:
    """A measured request as a ``RequestRecord``, its times (by the wall clock, or the ``simulated``
    one) relative to ``origin``."""
    outcome = dispatch.outcome
    dispatched, start, end, chunk_times = request_times(dispatch, simulated)
    record = RequestRecord(
        index=index,
        base_url=dispatch.prepared.base_url,
        scheduled_s=dispatch.scheduled_s,
        dispatched_s=dispatched - origin,
        start_s=start - origin,
        end_s=end - origin,
        chunk_times_s=[chunk - origin for chunk in chunk_times],
        success=outcome.success,
        error=outcome.error,
        reason=outcome.reason,
        connect_ms=None if outcome.connect_s is None else outcome.connect_s * 1000.0,
        server_queue_s=outcome.server_queue_s,
        server_ttft_s=outcome.server_ttft_s,
        session=dispatch.prepared.session,
        turn=dispatch.prepared.turn,
        cached_tokens=outcome.cached_tokens,
    )
    record.input_tokens, record.input_tokens_source = input_count(
        dispatch.prepared.sample, outcome, dataset_source
    )
    record.usage_input_tokens = outcome.prompt_tokens
    if outcome.success:
        record.output_tokens, record.output_tokens_source = output_count(outcome, tokenizer)
        record.chunk_tokens = distribute_tokens(record.output_tokens, outcome.chunk_chars)
    return record
