"""The engine front: routes sequences to scheduler replicas, records metrics, delivers tokens.

One :class:`Engine` stands for one served model. It owns one scheduler per data-parallel replica
(fixed-timing or continuous-batching), sends each new sequence to the least loaded one, and is the
:data:`~perflab.sim.sequence.Deliver` callback of all of them: every emitted token passes here
once, updating the metrics before the sequence's own ``on_tokens`` writes it to the client.

A fixed-timing engine routes a request when it comes in. A model-mode engine runs on a
:class:`~perflab.sim.clock.SimClock`: a request arrives at its simulated send time — the one its client
declared (:mod:`perflab.sim.timelines`), else the wall time it came in — and is routed then, so the
replicas' loads it is routed by are those of that simulated instant.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import List, Optional, Protocol, Tuple

from perflab.sim import power
from perflab.sim.batching import BatchScheduler
from perflab.sim.clock import ARRIVAL, NO_KEY, SimClock
from perflab.sim.deployment import Deployment
from perflab.sim.energy import EnergyMeter
from perflab.sim.fixed import FixedScheduler
from perflab.sim.metrics import EngineGauges, MetricsRecorder
from perflab.sim.noise import Pace
from perflab.sim.perfmodel import MemoryPlan, PerfModel
from perflab.sim.sequence import Sequence
from perflab.sim.timelines import HOLD_S, ClockMark, Ticket, Timelines


class Scheduler(Protocol):
    """What the engine needs from a scheduler."""

    meter: Optional[EnergyMeter]

    @property
    def load(self) -> int: ...

    def submit(self, seq: Sequence) -> None: ...

    def abort(self, seq: Sequence) -> None: ...

    def gauges(self) -> EngineGauges: ...

    @property
    def idle(self) -> bool: ...

    def reset_prefix_cache(self) -> bool: ...


class Engine:
    """Front of the simulated engine for one model; ``clock`` is None for fixed timings."""

    def __init__(
        self, metrics: MetricsRecorder, clock: Optional[SimClock] = None, pace: Optional[Pace] = None
    ) -> None:
        self.metrics = metrics
        self.replicas: List[Scheduler] = []
        self.clock = clock
        self.timelines: Optional[Timelines] = None
        self._pace = pace
        self._arriving = 0
        self._bench = ""

    def submit(self, seq: Sequence, mark: Optional[ClockMark] = None) -> None:
        """A request came in: routed now (fixed timings), or at its simulated send time."""
        clock = self.clock
        if clock is None:
            self._route(seq)
            return
        if mark is not None and self.timelines is not None:
            seq.ticket = self.timelines.receive(mark, lambda ticket: self._arrive_at(seq, ticket))
        else:
            self.arrive(seq, clock.wall_arrival(), NO_KEY)

    def refuse(self, mark: ClockMark) -> None:
        """A request with a timeline mark was answered with an error: it still takes its place."""
        if self.timelines is not None:
            with contextlib.suppress(ValueError):  # an item sent twice takes no second place
                self.timelines.receive(mark, None)

    def submit_prefilled(self, seq: Sequence) -> None:
        """A sequence whose prompt another worker computed (a disaggregated decode worker's) arrives now
        with its KV cache: its first token goes out on arrival and the rest is decoded."""
        assert self.clock is not None
        self.arrive(seq, self.clock.wall_arrival(), NO_KEY, prefilled=True)

    def arrive(
        self, seq: Sequence, when: float, key: Tuple[str, int, int], bench: str = "", prefilled: bool = False
    ) -> None:
        """Route ``seq`` at simulated time ``when`` (``key`` orders arrivals of one instant); the first
        request of a new ``bench`` (benchmark) begins a new run of the launch's noise. A ``prefilled``
        sequence emits its first token on arrival and only decodes."""
        assert self.clock is not None
        self._arriving += 1
        self.clock.at(when, ARRIVAL, key, lambda: self._arrived(seq, when, bench, prefilled))

    def _arrive_at(self, seq: Sequence, ticket: Ticket) -> None:
        timeline = ticket.timeline
        self.arrive(seq, ticket.arrival, (timeline.run, ticket.item, ticket.turn), timeline.bench)

    def _arrived(self, seq: Sequence, when: float, bench: str, prefilled: bool) -> None:
        self._arriving -= 1
        if bench and bench != self._bench:
            self._bench = bench
            if self._pace is not None:
                self._pace.begin_run()
        if seq.aborted:
            return
        seq.arrival = when
        self._count_energy(seq, when)
        if prefilled:
            seq.computed = seq.prompt_len
            seq.scheduled_at = when
            seq.generated = 1
            self.deliver(seq, 1, when)
            if seq.done:
                return
        self._route(seq)

    def _route(self, seq: Sequence) -> None:
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
        if seq.ticket is not None and self.timelines is not None:
            self.timelines.abandoned(seq.ticket)
        if seq.owner is None:  # it has not arrived yet: it never will
            seq.aborted = True
        else:
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
            self._count_energy(seq, now)
            metrics.finished[seq.finish_reason] += 1
            metrics.e2e.observe(now - seq.arrival)
            if seq.ticket is not None and self.timelines is not None:
                self.timelines.finished(seq.ticket, now)
        if seq.on_tokens is not None:
            seq.on_tokens(seq, count, finished)

    def _count_energy(self, seq: Sequence, when: float) -> None:
        """Read the devices' energy counter for a request that declared its client's timeline (the
        client reads its window's energy from its first arrival and last end)."""
        if seq.ticket is None:
            return
        meters = [replica.meter for replica in self.replicas]
        if all(meters):
            seq.energy_mj.append(sum(meter.joules(when) for meter in meters if meter) * 1000.0)

    def utilization(self) -> float:
        """The replicas' mean busy share of the last simulated second (0 for fixed timings)."""
        meters = [replica.meter for replica in self.replicas]
        if self.clock is None or not meters or not all(meters):
            return 0.0
        present = self.clock.present()
        return sum(meter.utilization(present) for meter in meters if meter) / len(meters)

    @property
    def idle(self) -> bool:
        """No replica runs or queues a request, and none is on its way in."""
        waiting = self.timelines is not None and self.timelines.waiting
        return self._arriving == 0 and not waiting and all(replica.idle for replica in self.replicas)

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
    clock: SimClock,
    dep: Deployment,
    plan: MemoryPlan,
    time_scale: float,
    pace: Optional[Pace] = None,
    hold_s: float = HOLD_S,
) -> Engine:
    """A continuous-batching engine with one scheduler per data-parallel replica (each stepping its
    attention ranks in lockstep), on ``clock``; on a live clock requests may declare their clients'
    timelines (each holds the clock ``hold_s`` at most)."""
    engine = Engine(MetricsRecorder(), clock, pace)
    devices = dep.attention_dp * dep.tp * dep.pp
    if clock.loop is not None:
        engine.timelines = Timelines(clock, clock.loop, hold_s)
    for _ in range(dep.dp):
        engine.replicas.append(
            BatchScheduler(
                clock,
                PerfModel(dep),
                plan.kv_tokens,
                time_scale,
                engine.deliver,
                engine.metrics,
                clock.timer,
                pace,
                EnergyMeter(power.profile(dep.accel.key), devices, time_scale),
            )
        )
    return engine
