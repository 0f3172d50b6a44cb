"""Sending sessions: conversations whose every turn carries the history so far.

A session starts at its due time (the request rate's schedule over sessions) once a session slot is
free — ``--max-concurrency`` caps the sessions in flight, the load of a session workload, as AIPerf's
concurrency counts conversations. Its turns go one after another to the same server (where its
history is cached): each is sent with the messages of every earlier turn, the server's real reply to
each (the text it streamed, reasoning and tool-call text included), and the turn's own messages. After
a reply the session waits a think time drawn from a normal distribution
(``--conversation-turn-delay-mean``/``-stddev`` in ms, AIPerf's names, never below 0; seeded per
session, drawn when the session starts) before its next turn; against a simulator's clock each turn
declares that think time, so the simulator knows when the next turn is sent (``simclock``). A turn
that fails ends its session: its later turns need its reply.

Each turn is one ``Dispatch`` (its ``Prepared`` names the session and turn); it is due when the
session reached it, so ``dispatch_lag_ms`` measures the client's own lateness. A turn's prompt length
is its history's when the dataset counted every turn (its own tokens plus the earlier turns' and
replies'), else unknown (the server's usage counts it).
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Awaitable, List, Optional, Sequence

import httpx

from perflab.bench.client import Outcome
from perflab.bench.datasets import Message, Sample, Session
from perflab.bench.dispatch import Dispatch, Phase, RequestBuilder
from perflab.bench.options import BenchOptions
from perflab.bench.progress import Progress
from perflab.bench.simclock import HEADER


def think_time_s(rng: random.Random, mean_ms: float, stddev_ms: float) -> float:
    """One think time in seconds: normal around ``mean_ms``, never negative."""
    if mean_ms <= 0 and stddev_ms <= 0:
        return 0.0
    return max(0.0, rng.gauss(mean_ms, stddev_ms) if stddev_ms > 0 else mean_ms) / 1000.0


def reply_text(outcome: Outcome) -> str:
    """What the server streamed for a turn: the assistant's message in the next turn's history."""
    return "".join(outcome.text_parts)


class SessionPhase(Phase):
    """Sends sessions on a schedule, at most ``max_concurrency`` at once, each turn after the last."""

    def __init__(
        self,
        transport: httpx.AsyncBaseTransport,
        options: BenchOptions,
        progress: Progress,
        first_session: int = 0,
        clock_run: Optional[str] = None,
    ) -> None:
        super().__init__(transport, options, True, progress, clock_run)
        self._builder = RequestBuilder(options)
        self._session_slots = asyncio.Semaphore(options.max_concurrency) if options.max_concurrency else None
        self._first_session = first_session

    def _turn(
        self,
        number: int,
        index: int,
        messages: List[Message],
        own_tokens: Optional[int],
        output_len: int,
        then: Optional[float],
    ) -> Dispatch:
        """Turn ``number`` of session ``index``; ``then``: the think time before the next turn, if any."""
        prepared = self._builder.build(messages, Sample("", own_tokens, output_len), index)
        prepared.session, prepared.turn = index, number
        if self.marks is not None:
            mark = self.marks.turn(index, number, then) if number else self.marks.first(index, then)
            prepared.request.headers[HEADER] = mark
        now = time.perf_counter()
        dispatch = Dispatch(prepared, now - self.started_at, now, Outcome())
        self.dispatches.append(dispatch)
        return dispatch

    async def _session(self, item: Session, index: int) -> None:
        rng = random.Random(f"{self.options.seed}:{self._first_session + index}")
        if self._session_slots is not None:
            await self._session_slots.acquire()
        pauses = [
            think_time_s(rng, self.options.turn_delay_mean_ms, self.options.turn_delay_stddev_ms)
            for _ in item.turns[1:]
        ]
        try:
            history: List[Message] = []
            counted: Optional[int] = 0
            for number, turn in enumerate(item.turns):
                if number and pauses[number - 1]:
                    await asyncio.sleep(pauses[number - 1])
                messages = history + turn.messages
                counted = (
                    None if counted is None or turn.prompt_tokens is None else counted + turn.prompt_tokens
                )
                then = pauses[number] if number < len(pauses) else None
                dispatch = self._turn(number, index, messages, counted, turn.output_len, then)
                await self.send(dispatch)
                outcome = dispatch.outcome
                if not outcome.success:
                    return
                history = messages + [{"role": "assistant", "content": reply_text(outcome)}]
                answered = (
                    outcome.completion_tokens
                    if outcome.completion_tokens is not None
                    else len(outcome.chunk_times)
                )
                counted = None if counted is None else counted + answered
        finally:
            if self._session_slots is not None:
                self._session_slots.release()

    async def run(self, sessions: Sequence[Session], schedule: Sequence[float]) -> List[Dispatch]:  # type: ignore[override]
        """Start each session at ``start + schedule[i]``; return when every one has ended."""

        def start(index: int, session: Session, due: float) -> Awaitable[None]:
            return self._session(session, index)

        servers = self.options.base_urls
        targets = [servers[index % len(servers)] for index in range(len(sessions))]
        return await self.dispatch_all(sessions, schedule, start, targets)


def session_turns(sessions: Sequence[Session]) -> int:
    """How many requests the sessions hold."""
    return sum(len(session.turns) for session in sessions)
