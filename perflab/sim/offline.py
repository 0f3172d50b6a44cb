"""Offline runs of the performance model: a workload's simulated latencies, at once.

:func:`simulate` feeds requests (arrival time, prompt and output lengths, optional prompt token ids
for prefix caching) to the same engine and continuous-batching schedulers the simulated servers use,
on the same :class:`~perflab.sim.clock.SimClock`, run offline: it jumps from event to event instead of
following the wall clock. It returns each request's :class:`RequestTiming` (seconds of simulated time)
with the engine's metrics: what a live server reports to a client that declares the same send times.
The tests use it to check the model's behaviour; it can also estimate a configuration before running it.
"""

from __future__ import annotations

from collections import deque
from typing import Deque, List, Optional, Sequence, Tuple

from perflab.sim.clock import ARRIVAL, SimClock
from perflab.sim.deployment import Deployment
from perflab.sim.engine import model_engine
from perflab.sim.metrics import MetricsRecorder
from perflab.sim.noise import Pace
from perflab.sim.perfmodel import MemoryPlan, plan_memory
from perflab.sim.sequence import Sequence as SimSequence


class RequestSpec:
    """One request of an offline workload; a ``prefilled`` one arrives with its KV cache and first token
    (a disaggregated decode worker's request, :mod:`perflab.sim.disagg`) and only decodes; a ``chat``
    one goes to the chat endpoint (its output through the deployment's reasoning parser, if any)."""

    def __init__(
        self,
        arrival: float,
        prompt_len: int,
        output_len: int,
        prompt_ids: Optional[List[int]] = None,
        prefilled: bool = False,
        chat: bool = False,
    ) -> None:
        self.arrival = arrival
        self.prompt_len = prompt_len
        self.output_len = output_len
        self.prompt_ids = prompt_ids
        self.prefilled = prefilled
        self.chat = chat


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
    clock = SimClock()
    engine = model_engine(clock, dep, plan or plan_memory(dep), 1.0, pace=pace)
    sequences: List[Optional[SimSequence]] = [None] * len(requests)
    held: Deque[int] = deque()
    limit = max_concurrency or len(requests) or 1
    in_flight = [0]

    def send(index: int) -> None:
        spec = requests[index]
        seq = SimSequence(
            f"offline-{index}", clock.now, spec.prompt_len, spec.output_len, "length", index, spec.prompt_ids
        )
        seq.on_tokens = finished
        seq.parsed_reasoning = spec.chat and bool(dep.knobs.reasoning_parser)
        sequences[index] = seq
        in_flight[0] += 1
        engine.arrive(seq, clock.now, ("", index, 0), prefilled=spec.prefilled)

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
        clock.at(spec.arrival, ARRIVAL, ("", index, 0), lambda index=index: arrive(index))
    clock.run()
    return [RequestTiming(seq) for seq in sequences if seq is not None], engine.metrics
