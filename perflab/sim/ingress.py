"""The engine's API front end taking requests in, before its scheduler sees them.

A serving engine's HTTP front end is one process running an asyncio loop: vLLM's API server (its V1
``AsyncLLM`` parses, applies the chat template and tokenizes each request in the API-server process,
then sends it to the EngineCore process), SGLang's ``TokenizerManager``, MindIE's endpoint. Each
request costs that process a fixed time (:attr:`~perflab.sim.profiles.EngineProfile.ingress_s`), and the
loop interleaves the handlers of all requests it holds at their await points: processor sharing. So
requests that came in together reach the scheduler together, once all of them were taken in — a burst
of 1,000 requests waits 1,000 times the cost before its first prefill.

:class:`Ingress` keeps the requests held and, given the time, releases those whose share of the front
end's time has covered their cost (the one with the least work left first).
"""

from __future__ import annotations

import heapq
import itertools
from typing import List, Optional, Tuple

from perflab.sim.sequence import Sequence


class Ingress:
    """Requests being taken in by a processor-sharing front end."""

    def __init__(self) -> None:
        # (the service every held request will have had when this one is done, arrival order, request)
        self._held: List[Tuple[float, int, Sequence]] = []
        self._order = itertools.count()
        self._service = 0.0  # service each held request has had (per-request virtual time)
        self._updated = 0.0
        self._done: List[Sequence] = []  # taken in, not yet handed to the scheduler

    @property
    def pending(self) -> int:
        return len(self._held) + len(self._done)

    def add(self, seq: Sequence, now: float, seconds: float) -> None:
        """``seq`` came in at ``now`` and takes ``seconds`` of the front end's time."""
        self._advance(now)
        heapq.heappush(self._held, (self._service + seconds, next(self._order), seq))

    def discard(self, seq: Sequence, now: float) -> bool:
        """Drop ``seq`` (its client went away) if it is still being taken in; whether it was."""
        self._advance(now)
        if seq in self._done:
            self._done.remove(seq)
            return True
        for index, (_, _, held) in enumerate(self._held):
            if held is seq:
                self._held.pop(index)
                heapq.heapify(self._held)
                return True
        return False

    def take(self, now: float) -> List[Sequence]:
        """The requests taken in by ``now``, oldest first (each handed out once)."""
        self._advance(now)
        done, self._done = self._done, []
        return done

    def _advance(self, now: float) -> None:
        while self._held:
            finish, _, seq = self._held[0]
            due = self._updated + (finish - self._service) * len(self._held)
            if due > now:
                self._service += (now - self._updated) / len(self._held)
                break
            self._updated, self._service = due, finish
            heapq.heappop(self._held)
            self._done.append(seq)
        self._updated = max(self._updated, now)

    def next_done(self) -> Optional[float]:
        """When the oldest request not yet handed out is (or will be, if no other comes) taken in;
        None when none is held."""
        if self._done:
            return self._updated
        if not self._held:
            return None
        return self._updated + (self._held[0][0] - self._service) * len(self._held)
