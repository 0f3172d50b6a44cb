"""Offline runs of the performance model on a virtual clock: a workload's simulated latencies, at once.

:func:`simulate` feeds requests (arrival time, prompt and output lengths, optional prompt token ids
for prefix caching) to the same continuous-batching schedulers the simulated servers use, but on a
:class:`VirtualClock` that jumps from event to event instead of sleeping, and returns each request's
:class:`RequestTiming` (seconds of simulated time) with the engine's metrics. The tests use it to check
the model's behaviour; it can also estimate a configuration before running it.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from typing import Callable, Deque, List, Optional, Sequence, Tuple

from perflab.sim.deployment import Deployment
from perflab.sim.engine import model_engine
from perflab.sim.metrics import MetricsRecorder
from perflab.sim.noise import Pace
from perflab.sim.perfmodel import MemoryPlan, plan_memory
from perflab.sim.sequence import Sequence as SimSequence


class _Handle:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class VirtualClock:
    """The subset of an event loop the schedulers use, on simulated time."""

    def __init__(self) -> None:
        self.now = 0.0
        self._events: List[Tuple[float, int, _Handle, Callable[[], None]]] = []
        self._order = itertools.count()

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], None]) -> _Handle:
        handle = _Handle()
        heapq.heappush(self._events, (when, next(self._order), handle, callback))
        return handle

    def call_soon(self, callback: Callable[[], None]) -> _Handle:
        return self.call_at(self.now, callback)

    def run(self) -> None:
        while self._events:
            when, _, handle, callback = heapq.heappop(self._events)
            if handle.cancelled:
                continue
            self.now = max(self.now, when)
            callback()


class VirtualTimer:
    """A timer firing exactly at its deadline on a :class:`VirtualClock`."""

    def __init__(self, clock: VirtualClock, callback: Callable[[], None]) -> None:
        self._clock = clock
        self._callback = callback
        self._handle: Optional[_Handle] = None
        self.deadline: Optional[float] = None

    def arm(self, deadline: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self.deadline = deadline
        self._handle = self._clock.call_at(deadline, self._fire)

    def arm_earlier(self, deadline: float) -> None:
        if self.deadline is None or deadline < self.deadline:
            self.arm(deadline)

    def _fire(self) -> None:
        self.deadline = None
        self._handle = None
        self._callback()


class RequestSpec:
    """One request of an offline workload; a ``prefilled`` one arrives with its KV cache and first token
    (a disaggregated decode worker's request, :mod:`perflab.sim.disagg`) and only decodes."""

    def __init__(
        self,
        arrival: float,
        prompt_len: int,
        output_len: int,
        prompt_ids: Optional[List[int]] = None,
        prefilled: bool = False,
    ) -> None:
        self.arrival = arrival
        self.prompt_len = prompt_len
        self.output_len = output_len
        self.prompt_ids = prompt_ids
        self.prefilled = prefilled


class RequestTiming:
    """Simulated latencies of one request (seconds), and when it was ``sent``."""

    def __init__(self, seq: SimSequence) -> None:
        self.sent = seq.arrival
        self.ttft = seq.first_token_at - seq.arrival
        self.e2el = seq.last_token_at - seq.arrival
        self.queue = seq.scheduled_at - seq.arrival
        self.output_tokens = seq.generated
        self.cached_tokens = seq.cached_tokens
        self.tpot = (self.e2el - self.ttft) / (seq.generated - 1) if seq.generated > 1 else 0.0


def _decode_only(engine, clock: VirtualClock) -> Callable[[SimSequence], None]:  # noqa: ANN001
    """Admit a prefilled sequence: its first token goes out at once, the rest is decoded."""

    def submit(seq: SimSequence) -> None:
        seq.computed = seq.prompt_len
        seq.scheduled_at = clock.now
        seq.generated = 1
        engine.deliver(seq, 1, clock.now)
        if not seq.done:
            engine.submit(seq)

    return submit


def simulate(
    dep: Deployment,
    requests: Sequence[RequestSpec],
    plan: Optional[MemoryPlan] = None,
    pace: Optional[Pace] = None,
    max_concurrency: Optional[int] = None,
) -> Tuple[List[RequestTiming], MetricsRecorder]:
    """Run ``requests`` through ``dep``'s engine model (sped up or slowed by ``pace``, the noise of
    one launch); per-request timings and engine metrics. With ``max_concurrency`` a request that
    arrives while that many are in flight is sent when one finishes (``vllm bench serve
    --max-concurrency``); its latencies count from then, as the client measures them."""
    clock = VirtualClock()
    engine = model_engine(
        clock,
        dep,
        plan or plan_memory(dep),
        1.0,  # type: ignore[arg-type]
        timer_factory=VirtualTimer,
        pace=pace,
    )  # type: ignore[arg-type]
    sequences: List[Optional[SimSequence]] = [None] * len(requests)
    held: Deque[int] = deque()
    limit = max_concurrency or len(requests) or 1
    in_flight = [0]
    decode_only = _decode_only(engine, clock)

    def send(index: int) -> None:
        spec = requests[index]
        seq = SimSequence(
            f"offline-{index}", clock.now, spec.prompt_len, spec.output_len, "length", index, spec.prompt_ids
        )
        seq.on_tokens = finished
        sequences[index] = seq
        in_flight[0] += 1
        (decode_only if spec.prefilled else engine.submit)(seq)

    def arrive(index: int) -> None:
        if in_flight[0] < limit:
            send(index)
        else:
            held.append(index)

    def finished(seq: SimSequence, count: int, done: bool) -> None:
        if done:
            in_flight[0] -= 1
            if held:
                send(held.popleft())

    for index, spec in enumerate(requests):
        clock.call_at(spec.arrival, lambda index=index: arrive(index))
    clock.run()
    return [RequestTiming(seq) for seq in sequences if seq is not None], engine.metrics
