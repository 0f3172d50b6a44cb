"""Progress of a running benchmark on stderr: a bar for people, JSON lines for the remote runner.

JSON mode writes one line per second (and a last one at the end)::

    PERFLAB_PROGRESS {"phase": "warmup"|"benchmark", "done": n, "failed": f, "total": N, "elapsed_s": s,
                      "in_flight": k, "e2el_sum_s": l, "e2el_n": m, "clock_s": c}

``phase`` says which requests the line counts (the warm-up's, or the measured ones); ``done`` counts
every request that ended, ``failed`` those of them that failed; ``e2el_sum_s`` is the
sum of the end-to-end latencies of the ``e2el_n`` successful requests so far (sent → last token, as
the per-request records measure it), so a reader gets the mean latency of the requests that ended
between two lines from measured values. ``clock_s`` is when the line was written on the bench process's
``perf_counter`` clock, the clock of the result's ``bench_clock_window_s``: a reader that stamps each
line when it arrives places that window on its own clock (the smallest arrival − ``clock_s``).

A benchmark sized to a floor (``--perflab-min-duration``/``--perflab-min-requests``,
:mod:`perflab.bench.rounds`) counts its rounds in one line: ``total`` grows by each round's requests as
the round begins, and the line carries ``rounds``::

    "rounds": {"number": k, "first": d, "started_s": t, "measured_s": m, "completed": c,
               "paused_s": p, "min_duration_s": D, "min_requests": R, "next": false}

``number`` is the round being sent (from 1), ``first`` the requests that had ended before it and
``started_s`` the ``elapsed_s`` it began at; ``measured_s``, ``completed`` and ``paused_s`` are the
measured seconds, successful requests and pauses between rounds of the rounds that ended; ``D`` and
``R`` the floor. A round's first line is written as it begins; once it has ended, one line says what
follows: ``next`` true while the next round is being prepared, else it is the last line. No line is
written between a round's last request ending and that line (a reader would take ``done`` = ``total``
with ``next`` false for the end of the benchmark).

The bar redraws in place on a terminal and prints a plain line every few seconds otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from typing import Any, Dict, Optional, TextIO

PROGRESS_PREFIX = "PERFLAB_PROGRESS "
CLOCK_KEY = "clock_s"
BAR_WIDTH = 30
PLAIN_INTERVAL_S = 5.0


class Progress:
    """Counters updated by the request tasks and a ticker task that reports them."""

    def __init__(
        self,
        total: int,
        mode: str,
        stream: Optional[TextIO] = None,
        phase: str = "benchmark",
        floor: Optional[Dict[str, float]] = None,
    ) -> None:
        """``floor``: ``{"min_duration_s": D, "min_requests": R}`` when the requests are sent in rounds
        (see the module), counted from :meth:`begin_round` on."""
        self.total = total
        self.mode = mode
        self.phase = phase
        self.done = 0
        self.failed = 0
        self.in_flight = 0
        self.e2el_sum_s = 0.0
        self.e2el_n = 0
        self._stream = stream if stream is not None else sys.stderr
        self._started = time.perf_counter()
        self._task: Optional["asyncio.Task[None]"] = None
        self._last_plain = 0.0
        self._began = False
        self.rounds: Optional[Dict[str, Any]] = (
            None
            if floor is None
            else {
                "number": 0,
                "first": 0,
                "started_s": 0.0,
                "measured_s": 0.0,
                "completed": 0,
                "paused_s": 0.0,
                **floor,
                "next": False,
            }
        )

    def begin_round(self, number: int, requests: int) -> None:
        """Round ``number`` (from 1) of ``requests`` more requests is about to be sent."""
        self.total += requests
        if self.rounds is not None:
            self.rounds.update(number=number, first=self.done, next=False)

    def end_round(self, another: bool, measured_s: float, completed: int, paused_s: float) -> None:
        """The round ended; ``another``: whether another follows. Reports it at once, with the
        ``measured_s`` seconds, ``completed`` requests and ``paused_s`` pauses of the rounds so far
        (nothing without a floor: :meth:`stop` wrote the last line)."""
        if self.rounds is None:
            return
        self.rounds.update(
            measured_s=round(measured_s, 6), completed=completed, paused_s=round(paused_s, 6), next=another
        )
        self.report(final=not another)

    def sent(self) -> None:
        self.in_flight += 1

    def finished(self, success: bool, e2el_s: Optional[float] = None) -> None:
        """A request ended; ``e2el_s``: its end-to-end latency when it succeeded with tokens."""
        self.in_flight -= 1
        self.done += 1
        if not success:
            self.failed += 1
        elif e2el_s is not None:
            self.e2el_sum_s += e2el_s
            self.e2el_n += 1

    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self._started

    def snapshot(self) -> dict:
        return {
            "phase": self.phase,
            "done": self.done,
            "failed": self.failed,
            "total": self.total,
            "elapsed_s": round(self.elapsed_s, 3),
            "in_flight": self.in_flight,
            "e2el_sum_s": round(self.e2el_sum_s, 6),
            "e2el_n": self.e2el_n,
            CLOCK_KEY: round(time.perf_counter(), 6),
            **({"rounds": dict(self.rounds)} if self.rounds is not None else {}),
        }

    def render(self) -> str:
        """The bar line, e.g. ``benchmark  120/1000 [===>      ]  12% failed 3 in flight 256  15.2 s``."""
        fraction = self.done / self.total if self.total else 1.0
        filled = int(fraction * BAR_WIDTH)
        bar = "=" * filled + (">" if filled < BAR_WIDTH else "") + " " * max(BAR_WIDTH - filled - 1, 0)
        number = self.rounds["number"] if self.rounds is not None else 0
        return (
            f"{self.phase}{f' round {number}' if number > 1 else ''} {self.done:>6}/{self.total} [{bar}] "
            f"{fraction * 100:3.0f}%"
            f"  failed {self.failed}  in flight {self.in_flight}  {self.elapsed_s:6.1f} s"
        )

    def report(self, final: bool = False) -> None:
        """Write the progress now; once the reader is gone (a closed pipe), the run goes on silently."""
        try:
            if self.mode == "json":
                self._stream.write(PROGRESS_PREFIX + json.dumps(self.snapshot()) + "\n")
            elif self.mode == "bar":
                if self._stream.isatty():
                    self._stream.write("\r" + self.render() + ("\n" if final else ""))
                elif final or self.elapsed_s - self._last_plain >= PLAIN_INTERVAL_S:
                    self._last_plain = self.elapsed_s
                    self._stream.write(self.render() + "\n")
            else:
                return
            self._stream.flush()
        except OSError:
            self.mode = "none"

    async def _tick(self) -> None:
        interval = 1.0 if self.mode == "json" else 0.25
        while True:
            await asyncio.sleep(interval)
            if not (self.rounds is not None and self.done >= self.total):
                # a round whose requests all ended is next reported by end_round, which says what follows
                self.report()

    def start(self) -> None:
        """Start reporting (again, for a later round of the same run: the clock keeps running)."""
        if self._task is not None:
            return
        if not self._began:
            self._started = time.perf_counter()
            self._began = True
        if self.rounds is not None:
            self.rounds["started_s"] = round(self.elapsed_s, 3)
            self.report()  # a round's first line as it begins: its requests are in the total
        if self.mode != "none":
            self._task = asyncio.get_running_loop().create_task(self._tick())

    async def stop(self) -> None:
        """Stop reporting, with a last line; a round's last line is :meth:`end_round`'s, which says
        whether another round follows."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.rounds is None:
            self.report(final=True)
