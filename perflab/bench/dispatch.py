"""Sending the requests of one phase (warmup or measured) on their schedule.

``prepare_requests`` builds every httpx request before the run, so a dispatch costs only the send.
``Phase.run`` dispatches each request at its due time (absolute offsets, so lateness never
accumulates), lets it wait for a concurrency slot, cuts it off after its deadline (``--timeout``, else
derived from the tokens it asks for) or once it carries more text chunks than those tokens allow, and
records when it was due and when it was really dispatched (``dispatch_lag_ms``). With a clock run
(``clock_run``) each request carries its place in the phase's schedule for a simulator's clock
(``simclock``).
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, Tuple, Union

import httpx

from perflab.bench.client import Outcome, build_body, max_text_chunks, stream_request
from perflab.bench.datasets import Message, Sample
from perflab.bench.options import BenchOptions
from perflab.bench.progress import Progress
from perflab.bench.simclock import HEADER, ClockMarks


@dataclass
class Prepared:
    """One request ready to go: the httpx request and what the dataset knew about it (the session and
    turn it belongs to, for a session's turn)."""

    request: httpx.Request
    base_url: str
    sample: Sample
    max_tokens: int
    session: Optional[int] = None
    turn: Optional[int] = None


class RequestBuilder:
    """Builds the httpx request of a prompt (or of a chat's messages) for one server, each with an
    ``x-request-id`` of the prefix and its number when ``request_id_prefix`` is set, as vLLM sends."""

    def __init__(self, options: BenchOptions) -> None:
        self._options = options
        self._headers = options.headers()
        self._urls = [httpx.URL(base + options.endpoint_path) for base in options.base_urls]
        self._extra = dict(options.sampling, **options.extra_body)
        asked = self._extra.get("max_tokens", self._extra.get("max_completion_tokens"))
        self._asked = asked if isinstance(asked, int) and asked > 0 else None
        self._built = 0

    def build(self, content: Union[str, List[Message]], sample: Sample, slot: int) -> Prepared:
        """The request of ``content`` to server ``slot`` (an index into the base URLs, wrapped)."""
        options = self._options
        body = build_body(
            options.endpoint_kind,
            options.request_model,
            content,
            sample.output_len,
            options.ignore_eos,
            options.temperature,
            self._extra,
        )
        headers = self._headers
        if options.request_id_prefix is not None:
            headers = dict(headers, **{"x-request-id": f"{options.request_id_prefix}{self._built}"})
        self._built += 1
        slot %= len(self._urls)
        return Prepared(
            httpx.Request("POST", self._urls[slot], content=body, headers=headers),
            options.base_urls[slot],
            sample,
            self._asked or sample.output_len,
        )


def prepare_requests(options: BenchOptions, samples: Sequence[Sample]) -> List[Prepared]:
    """httpx requests built ahead of the run, so dispatching one costs only the send; requests go to
    the servers in turn."""
    builder = RequestBuilder(options)
    return [builder.build(sample.prompt, sample, index) for index, sample in enumerate(samples)]


@dataclass
class Dispatch:
    """When one measured request was due, when it was dispatched, and what came of it."""

    prepared: Prepared
    scheduled_s: float
    dispatched_at: float
    outcome: Outcome

    @property
    def sent_at(self) -> float:
        """When the request was sent (its latencies count from here): as the transport saw it, else
        when the client started it, else when it was dispatched."""
        outcome = self.outcome
        return outcome.sent_at if outcome.sent_at is not None else outcome.started_at or self.dispatched_at

    @property
    def e2el_s(self) -> Optional[float]:
        """Sent → last token, for a successful request that streamed tokens; else None."""
        outcome = self.outcome
        if not outcome.success or not outcome.chunk_times:
            return None
        return outcome.chunk_times[-1] - self.sent_at


class RequestTimer:
    """Cancels the task running a request when its time is up (``expired`` then says why).

    ``asyncio.wait_for`` would run each request in a second task, which costs more than all the rest
    of a request's bookkeeping when hundreds of requests start at once.
    """

    __slots__ = ("expired", "_task", "_handle")

    def __init__(self, timeout: float) -> None:
        self.expired = False
        self._task = asyncio.current_task()
        self._handle = asyncio.get_running_loop().call_later(timeout, self._expire)

    def _expire(self) -> None:
        self.expired = True
        if self._task is not None:
            self._task.cancel()

    def cancel(self) -> None:
        self._handle.cancel()


class Phase:
    """Sends a list of prepared requests on a schedule with a concurrency limit (the dispatches so far
    stay readable in ``dispatches`` while it runs), counting them in ``progress``."""

    def __init__(
        self,
        transport: httpx.AsyncBaseTransport,
        options: BenchOptions,
        keep_text: bool,
        progress: Progress,
        clock_run: Optional[str] = None,
    ):
        self._transport = transport
        self.options = options
        self.clock_run = clock_run
        self.marks: Optional[ClockMarks] = None
        self._chat = options.endpoint_kind == "chat"
        self._keep_text = keep_text
        self.progress = progress
        self._slots = asyncio.Semaphore(options.max_concurrency) if options.max_concurrency else None
        self.started_at = 0.0
        self.dispatches: List[Dispatch] = []

    async def send(self, dispatch: Dispatch) -> None:
        """Send one request, cut off at its deadline, counted in ``progress``."""
        outcome = dispatch.outcome
        self.progress.sent()
        prepared = dispatch.prepared
        deadline = self.options.request_deadline(prepared.max_tokens)
        timer = RequestTimer(deadline)
        try:
            await stream_request(
                self._transport,
                prepared.request,
                self._chat,
                outcome,
                self._keep_text,
                max_text_chunks(prepared.max_tokens),
            )
        except asyncio.CancelledError:
            if not timer.expired:
                raise
            source = "--timeout" if self.options.timeout is not None else "the deadline for its tokens"
            outcome.fail("timeout", f"no complete response within {deadline:g} s ({source})")
        finally:
            timer.cancel()
            self.progress.finished(outcome.success, dispatch.e2el_s)

    async def _one(self, dispatch: Dispatch) -> None:
        if self._slots is not None:
            await self._slots.acquire()
        try:
            await self.send(dispatch)
        finally:
            if self._slots is not None:
                self._slots.release()

    def _start(self, index: int, item: Prepared, due: float) -> Awaitable[None]:
        if self.marks is not None:
            item.request.headers[HEADER] = self.marks.first(index)
        dispatch = Dispatch(item, due, time.perf_counter(), Outcome())
        self.dispatches.append(dispatch)
        return self._one(dispatch)

    async def dispatch_all(
        self,
        items: Sequence[Any],
        schedule: Sequence[float],
        start: Callable[[int, Any, float], Awaitable[None]],
        targets: Sequence[str],
    ) -> List[Dispatch]:
        """Start ``start(i, items[i], schedule[i])`` at each due time; return the dispatches once all have
        ended (cancelling the run cancels what is in flight). ``targets`` names each item's server."""
        if self.clock_run is not None:
            self.marks = ClockMarks(
                self.clock_run, targets, schedule, self.options.max_concurrency, self.options.base_urls
            )
        loop = asyncio.get_running_loop()
        origin = loop.time()
        self.started_at = time.perf_counter()
        tasks = []
        self.progress.start()
        try:
            for index, (item, due) in enumerate(zip(items, schedule)):
                delay = origin + due - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(loop.create_task(start(index, item, due)))
                if not delay > 0:
                    await asyncio.sleep(0)
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        await self.progress.stop()
        return self.dispatches

    async def run(self, prepared: Sequence[Prepared], schedule: Sequence[float]) -> List[Dispatch]:
        """Dispatch each request at ``start + schedule[i]``; return when all have ended (cancelling
        the run cancels the requests in flight)."""
        return await self.dispatch_all(prepared, schedule, self._start, [item.base_url for item in prepared])


def dispatch_lag_ms(phases: Sequence[Tuple[Sequence[Dispatch], float]]) -> Dict[str, float]:
    """Mean, p99 and max of (actual − scheduled) dispatch time, in ms, over ``(dispatches, started_at)``
    of each phase (each round of a run is one)."""
    lags = sorted(
        max((item.dispatched_at - started_at) - item.scheduled_s, 0.0) * 1000.0
        for dispatches, started_at in phases
        for item in dispatches
    )
    if not lags:
        return {"mean": 0.0, "p99": 0.0, "max": 0.0}
    p99_index = min(len(lags) - 1, math.ceil(0.99 * len(lags)) - 1)
    return {"mean": sum(lags) / len(lags), "p99": lags[p99_index], "max": lags[-1]}
