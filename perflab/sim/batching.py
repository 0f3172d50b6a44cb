"""Continuous batching of one engine replica (model mode): its steps on the simulated clock.

A replica has one :class:`~perflab.sim.scheduling.RankScheduler` per attention rank (one, or the
``attention_dp`` ranks of a MoE group, which step in lockstep). A new sequence first passes the
engine's API front end where its profile gives that a cost (:mod:`perflab.sim.ingress`), then goes to
the rank with the fewest running and waiting sequences. Each step every rank plans its batch, the
step's duration comes from :meth:`~perflab.sim.perfmodel.PerfModel.group_step_seconds` and is divided
by the time scale (and the launch's pace, as the front end's time is) and counted busy by the replica's
energy meter (:mod:`perflab.sim.energy`); at the step's end (an absolute
deadline) every rank applies its batch: sequences that finished their prefill get their first token
and decoding sequences their next token(s), all in one pass.
Time is the engine's simulated clock (:class:`~perflab.sim.clock.SimClock`): ``clock.time()`` is the
instant of the running event, a step end (or, with no step running, the front end's next request
taken in) is a timer from ``timer_factory(clock, callback)``, a batch start ``clock.call_soon``.
"""

from __future__ import annotations

from typing import List, Optional

from perflab.sim.clock import SchedulerClock
from perflab.sim.energy import EnergyMeter
from perflab.sim.ingress import Ingress
from perflab.sim.metrics import EngineGauges, MetricsRecorder
from perflab.sim.noise import Pace
from perflab.sim.perfmodel import PerfModel
from perflab.sim.scheduling import Batch, RankScheduler
from perflab.sim.sequence import Deliver, Sequence
from perflab.sim.timing import TimerFactory


class BatchScheduler:
    """One replica's scheduler: its attention ranks' queues and batches, and the steps."""

    def __init__(
        self,
        loop: SchedulerClock,
        perf: PerfModel,
        kv_tokens: int,
        time_scale: float,
        deliver: Deliver,
        metrics: MetricsRecorder,
        timer_factory: TimerFactory,
        pace: Optional[Pace] = None,
        meter: Optional[EnergyMeter] = None,
    ) -> None:
        dep = perf.dep
        self.meter = meter
        self._pace = pace
        self._loop = loop
        self._perf = perf
        self._time_scale = time_scale
        self._metrics = metrics
        self.ranks = [RankScheduler(dep, kv_tokens, deliver, metrics) for _ in range(dep.attention_dp)]
        # The API front end takes each request in before the ranks see it (perflab.sim.ingress).
        self._ingress = Ingress() if dep.profile.ingress_s else None
        self._ingress_s = dep.profile.ingress_s
        if dep.spec_tokens:
            metrics.enable_speculation(dep.spec_tokens)
        self._batches: List[Batch] = []
        self._step_end: Optional[float] = None
        self._kick_pending = False
        self._steps = 0
        self._timer = timer_factory(loop, self._finish_step)  # type: ignore[arg-type]

    @property
    def load(self) -> int:
        held = self._ingress.pending if self._ingress is not None else 0
        return held + sum(rank.queued for rank in self.ranks)

    def submit(self, seq: Sequence) -> None:
        if self._ingress is not None:
            now = self._loop.time()
            speed = self._pace.factor(now) if self._pace is not None else 1.0
            self._ingress.add(seq, now, self._ingress_s / self._time_scale / speed)
            if self._step_end is None:
                self._wait_for_ingress()
            return
        self._route(seq)
        if self._step_end is None and not self._kick_pending:
            # Start on the next loop turn, so requests that arrived together share the first step.
            self._kick_pending = True
            self._loop.call_soon(self._kick)

    def _route(self, seq: Sequence) -> None:
        min(self.ranks, key=lambda rank: rank.queued).submit(seq)

    def _wait_for_ingress(self) -> None:
        """With no step running, wake when the front end has taken the next request in."""
        done = self._ingress.next_done() if self._ingress is not None else None
        if done is not None:
            self._timer.arm(done)

    def _kick(self) -> None:
        self._kick_pending = False
        if self._step_end is None:
            self._start_step(self._loop.time())

    def abort(self, seq: Sequence) -> None:
        seq.aborted = True
        if self._ingress is not None and self._ingress.discard(seq, self._loop.time()):
            return
        for rank in self.ranks:
            if rank.abort(seq):
                return

    @property
    def idle(self) -> bool:
        """Nothing running, waiting or being taken in."""
        held = self._ingress.pending if self._ingress is not None else 0
        return not held and all(rank.idle for rank in self.ranks)

    def reset_prefix_cache(self) -> bool:
        """Forget every cached prefix block; refused (False) while requests run or wait."""
        return self.idle and all([rank.reset_prefix_cache() for rank in self.ranks])

    def gauges(self) -> EngineGauges:
        return EngineGauges.total(rank.gauges() for rank in self.ranks)

    def _start_step(self, start: float) -> None:
        if self._ingress is not None:
            for seq in self._ingress.take(start):
                self._route(seq)
        batches = [rank.plan(start) for rank in self.ranks]
        if not any(batches):
            self._step_end = None
            if self._pace is not None:
                self._pace.idle(start)
            self._wait_for_ingress()
            return
        speed = self._pace.factor(start) if self._pace is not None else 1.0
        seconds = self._perf.group_step_seconds(
            [rank.load(batch) for rank, batch in zip(self.ranks, batches)]
        )
        duration = seconds / self._time_scale / speed
        self._batches = batches
        if self.meter is not None:
            self.meter.busy(start, start + duration)
        self._step_end = start + duration
        self._timer.arm(self._step_end)

    def _finish_step(self) -> None:
        """The timer fired: a step ended, or (no step running) the front end took a request in."""
        now = self._loop.time()
        step_end = self._step_end if self._step_end is not None else now
        if self._batches:
            self._steps += 1
            self._metrics.iterations += 1
            for rank, batch in zip(self.ranks, self._batches):
                rank.finish(batch, now, self._steps)
        self._batches = []
        self._start_step(step_end)
