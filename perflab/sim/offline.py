"""Offline runs of the performance model: a workload's simulated latencies, at once.

:func:`simulate` feeds requests (arrival time, prompt and output lengths, optional prompt token ids
for prefix caching) to the same engine and continuous-batching schedulers the simulated servers use,
on the same :class:`~perflab.sim.clock.SimClock`, run offline: it jumps from event to event instead of
following the wall clock. It returns each request's :class:`RequestTiming` (seconds of simulated time)
with the engine's metrics: what a live server reports to a client that declares the same send times.
The tests use it to check the model's behaviour; it can also estimate a configuration before running it.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from perflab.sim.clock import SimClock
from perflab.sim.deployment import Deployment
from perflab.sim.engine import model_engine
from perflab.sim.metrics import MetricsRecorder
from perflab.sim.noise import Pace
from perflab.sim.perfmodel import MemoryPlan, plan_memory
from perflab.sim.sequence import Sequence as SimSequence


class RequestSpec:
    """One request of an offline workload."""

    def __init__(
        self, arrival: float, prompt_len: int, output_len: int, prompt_ids: Optional[List[int]] = None
    ) -> None:
        self.arrival = arrival
        self.prompt_len = prompt_len
        self.output_len = output_len
        self.prompt_ids = prompt_ids


class RequestTiming:
    """Simulated latencies of one request (seconds)."""

    def __init__(self, seq: SimSequence) -> None:
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
) -> Tuple[List[RequestTiming], MetricsRecorder]:
    """Run ``requests`` through ``dep``'s engine model (sped up or slowed by ``pace``, the noise of
    one launch); per-request timings and engine metrics."""
    clock = SimClock()
    engine = model_engine(clock, dep, plan or plan_memory(dep), 1.0, pace=pace)
    sequences = []
    for index, spec in enumerate(requests):
        seq = SimSequence(
            f"offline-{index}",
            spec.arrival,
            spec.prompt_len,
            spec.output_len,
            "length",
            index,
            spec.prompt_ids,
        )
        sequences.append(seq)
        engine.arrive(seq, spec.arrival, ("", index, 0))
    clock.run()
    return [RequestTiming(seq) for seq in sequences], engine.metrics
