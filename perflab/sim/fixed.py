"""Fixed-timing scheduler: exact ground truth for accuracy tests.

Every sequence gets its first token exactly ``ttft`` after its request arrived and then one token
every ``itl``, whatever the load. One heap of absolute deadlines and one :class:`PreciseTimer` serve
all sequences: each wake-up emits the tokens of every sequence that is due.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from typing import List, Optional, Tuple

from perflab.sim.energy import EnergyMeter
from perflab.sim.metrics import EngineGauges
from perflab.sim.sequence import Deliver, Sequence
from perflab.sim.timing import GROUP_S, PreciseTimer


class FixedScheduler:
    """Emits tokens on a fixed schedule per sequence (no power model: it has no energy meter)."""

    meter: Optional[EnergyMeter] = None

    def __init__(
        self, loop: asyncio.AbstractEventLoop, ttft_s: float, itl_s: float, deliver: Deliver
    ) -> None:
        self._loop = loop
        self._ttft = ttft_s
        self._itl = itl_s
        self._deliver = deliver
        self._heap: List[Tuple[float, int, Sequence]] = []
        self._order = itertools.count()
        self._live = 0
        self._timer = PreciseTimer(loop, self._on_timer)

    @property
    def load(self) -> int:
        return self._live

    def submit(self, seq: Sequence) -> None:
        self._live += 1
        seq.scheduled_at = seq.arrival
        deadline = seq.arrival + self._ttft
        heapq.heappush(self._heap, (deadline, next(self._order), seq))
        self._timer.arm_earlier(deadline)

    def abort(self, seq: Sequence) -> None:
        if not seq.done and not seq.aborted:
            seq.aborted = True
            self._live -= 1

    @property
    def idle(self) -> bool:
        return self._live == 0

    def reset_prefix_cache(self) -> bool:
        """Fixed timings keep no prefix cache: nothing to forget once idle."""
        return self.idle

    def gauges(self) -> EngineGauges:
        return EngineGauges(running=self._live)

    def _on_timer(self) -> None:
        heap = self._heap
        now = self._loop.time()
        due = now + GROUP_S
        while heap and heap[0][0] <= due:
            deadline, order, seq = heapq.heappop(heap)
            if seq.aborted:
                continue
            seq.generated += 1
            self._deliver(seq, 1, now)
            if seq.generated >= seq.target_tokens:
                self._live -= 1
            else:
                heapq.heappush(heap, (deadline + self._itl, order, seq))
        if heap:
            self._timer.arm(heap[0][0])
