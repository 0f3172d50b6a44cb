"""The engine front: routes sequences to scheduler replicas, records metrics, delivers tokens.

One :class:`Engine` stands for one served model. It owns one scheduler per data-parallel replica
(fixed-timing or continuous-batching), sends each new sequence to the least loaded one, and is the
:data:`~perflab.sim.sequence.Deliver` callback of all of them: every emitted token passes here
once, updating the metrics before the sequence's own ``on_tokens`` writes it to the client.
"""

from __future__ import annotations

import asyncio
from typing import List, Optional, Protocol

from perflab.sim.batching import BatchScheduler
from perflab.sim.deployment import Deployment
from perflab.sim.fixed import FixedScheduler
from perflab.sim.metrics import EngineGauges, MetricsRecorder
from perflab.sim.noise import Pace
from perflab.sim.perfmodel import MemoryPlan, PerfModel
from perflab.sim.sequence import Sequence
from perflab.sim.timing import PreciseTimer, TimerFactory


class Scheduler(Protocol):
    """What the engine needs from a scheduler."""

    @property
    def load(self) -> int: ...

    def submit(self, seq: Sequence) -> None: ...

    def abort(self, seq: Sequence) -> None: ...

    def gauges(self) -> EngineGauges: ...

    @property
    def idle(self) -> bool: ...

    def reset_prefix_cache(self) -> bool: ...


class Engine:
    """Front of the simulated engine for one model."""

    def __init__(self, metrics: MetricsRecorder) -> None:
        self.metrics = metrics
        self.replicas: List[Scheduler] = []

    def submit(self, seq: Sequence) -> None:
        self.metrics.received += 1
        self.metrics.prompt_tokens += seq.prompt_len
        replica = min(self.replicas, key=lambda scheduler: scheduler.load)
        seq.owner = replica
        replica.submit(seq)

    def abort(self, seq: Sequence) -> None:
        """The client went away: drop the sequence and free what it holds."""
        if seq.done or seq.aborted:
            return
        self.metrics.finished["abort"] += 1
        seq.owner.abort(seq)  # type: ignore[attr-defined]

    def deliver(self, seq: Sequence, count: int, now: float) -> None:
        """Called by the schedulers after ``seq.generated`` grew by ``count``."""
        metrics = self.metrics
        metrics.on_tokens(count, now)
        if seq.first_token_at < 0:
            seq.first_token_at = now
            metrics.ttft.observe(now - seq.arrival)
            metrics.queue.observe(max(0.0, seq.scheduled_at - seq.arrival))
        else:
            metrics.itl.observe(now - seq.last_token_at)
        seq.last_token_at = now
        finished = seq.generated >= seq.target_tokens
        if finished:
            seq.done = True
            metrics.finished[seq.finish_reason] += 1
            metrics.e2e.observe(now - seq.arrival)
        if seq.on_tokens is not None:
            seq.on_tokens(seq, count, finished)

    @property
    def idle(self) -> bool:
        """No replica runs or queues a request."""
        return all(replica.idle for replica in self.replicas)

    def reset_prefix_cache(self) -> bool:
        """Empty every replica's prefix cache; False (nothing reset) while any request runs or waits."""
        if not self.idle:
            return False
        return all([replica.reset_prefix_cache() for replica in self.replicas])

    def gauges(self) -> EngineGauges:
        return EngineGauges.total(replica.gauges() for replica in self.replicas)


def fixed_engine(loop: asyncio.AbstractEventLoop, ttft_s: float, itl_s: float) -> Engine:
    """An engine whose every request sees exactly ``ttft_s`` then ``itl_s`` per token."""
    engine = Engine(MetricsRecorder())
    engine.replicas.append(FixedScheduler(loop, ttft_s, itl_s, engine.deliver))
    return engine


def model_engine(
    loop: asyncio.AbstractEventLoop,
    dep: Deployment,
    plan: MemoryPlan,
    time_scale: float,
    timer_factory: TimerFactory = PreciseTimer,
    pace: Optional[Pace] = None,
) -> Engine:
    """A continuous-batching engine with one scheduler per data-parallel replica (each stepping its
    attention ranks in lockstep)."""
    engine = Engine(MetricsRecorder())
    for _ in range(dep.dp):
        engine.replicas.append(
            BatchScheduler(
                loop,
                PerfModel(dep),
                plan.kv_tokens,
                time_scale,
                engine.deliver,
                engine.metrics,
                timer_factory,
                pace,
            )
        )
    return engine
