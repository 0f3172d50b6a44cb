"""Ending a benchmark early: on SIGTERM/SIGINT in any phase, or once a server stopped answering in the
middle of the run.

``EarlyStop`` holds why the run must end. ``run_until_stopped`` sends the phase's requests and, when a
stop comes first, cancels the requests still in flight and returns only the dispatches whose request
had ended, so the result covers the completed requests and says it is partial. A server "went away"
when a request to it failed with ``connect_error`` (nothing listens on its port any more) after a
request to it had succeeded: the engine died, and every later request would fail the same way.

Before the measured requests nothing is measured yet, so a stop there ends the run at once
(:func:`unless_stopped`, ``BenchStopped``): while the dataset is prepared — which runs in a thread of
its own (:func:`in_thread`), so the event loop still answers the signal however long it takes — and
during the warm-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, Set, TypeVar

from perflab.bench.dispatch import Dispatch, Phase

WATCH_INTERVAL_S = 0.1
SIGNALS = (signal.SIGTERM, signal.SIGINT)
T = TypeVar("T")


class BenchStopped(Exception):
    """The run was stopped before any measured request ended: there is nothing to report."""


class EarlyStop:
    """Why the measured requests must end now (``reason`` is None while they may go on); ``cut`` once
    requests were cut off by it."""

    def __init__(self) -> None:
        self.reason: Optional[str] = None
        self.cut = False
        self._event: Optional[asyncio.Event] = None

    def request(self, reason: str) -> None:
        """Ask the run to stop (the first reason wins)."""
        if self.reason is None:
            self.reason = reason
        if self._event is not None:
            self._event.set()

    async def wait(self) -> None:
        if self._event is None:
            self._event = asyncio.Event()
        if self.reason is not None:
            self._event.set()
        await self._event.wait()

    def install_signal_handlers(self, loop: asyncio.AbstractEventLoop) -> None:
        """SIGTERM and SIGINT request a stop instead of killing the process (main thread only)."""
        for signum in SIGNALS:
            loop.add_signal_handler(signum, self.request, f"received {signal.Signals(signum).name}")

    @staticmethod
    def remove_signal_handlers(loop: asyncio.AbstractEventLoop) -> None:
        for signum in SIGNALS:
            loop.remove_signal_handler(signum)


def ended(dispatch: Dispatch) -> bool:
    """Whether the request of ``dispatch`` has ended (completed or failed)."""
    return dispatch.outcome.ended_at > 0.0


def server_gone(dispatches: Sequence[Dispatch], answered: Set[str]) -> Optional[str]:
    """The reason to stop when a server that answered before now refuses connections, else None.

    ``answered`` collects the base URLs with a successful request (updated in place)."""
    for dispatch in dispatches:
        if not ended(dispatch):
            continue
        outcome = dispatch.outcome
        base_url = dispatch.prepared.base_url
        if outcome.success:
            answered.add(base_url)
        elif outcome.reason == "connect_error" and base_url in answered:
            return f"the server at {base_url} went away mid-run ({outcome.error})"
    return None


async def _watch_servers(phase: Phase, stop: EarlyStop) -> None:
    answered: Set[str] = set()
    checked = 0
    while stop.reason is None:
        await asyncio.sleep(WATCH_INTERVAL_S)
        dispatches = phase.dispatches
        reason = server_gone(dispatches[checked:], answered)
        if reason is not None:
            stop.request(reason)
        # Requests end out of order: look again at everything from the first one still in flight.
        while checked < len(dispatches) and ended(dispatches[checked]):
            checked += 1


async def run_until_stopped(
    phase: Phase,
    items: Sequence[Any],
    schedule: Sequence[float],
    stop: EarlyStop,
) -> List[Dispatch]:
    """``phase.run`` of its requests (or sessions) unless ``stop`` comes first: then the ended
    dispatches only (``BenchStopped`` if none had ended)."""
    run = asyncio.ensure_future(phase.run(items, schedule))
    watchers = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(_watch_servers(phase, stop))]
    try:
        await asyncio.wait([run, watchers[0]], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in watchers:
            task.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
    if run.done():
        return run.result()
    stop.cut = True
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)
    await phase.progress.stop()
    finished = [dispatch for dispatch in phase.dispatches if ended(dispatch)]
    if not finished:
        raise BenchStopped(f"stopped before any measured request ended: {stop.reason}")
    return finished


def partial_fields(stop: EarlyStop, sent: int, finished: int) -> Dict[str, object]:
    """The result fields that mark a result as covering only the requests that ended."""
    return {
        "partial": True,
        "partial_reason": stop.reason,
        "requests_sent": sent,
        "requests_unfinished": sent - finished,
    }


async def unless_stopped(stop: EarlyStop, work: Awaitable[T], phase: str) -> T:
    """What ``work`` (a phase before the measured requests) returns, unless ``stop`` comes first: then
    ``work`` is cancelled and ``BenchStopped`` says in which ``phase``."""
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
    if task.done():
        return task.result()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    raise BenchStopped(f"stopped {phase}, before any measured request: {stop.reason}")


def in_thread(function: Callable[[], T]) -> "asyncio.Future[T]":
    """``function()`` run in a daemon thread, as a future of the running loop: the loop keeps handling
    signals meanwhile, and a process that stops does not wait for the thread."""
    loop = asyncio.get_running_loop()
    future: "asyncio.Future[T]" = loop.create_future()

    def settle(setter: Callable[[Any], None], value: Any) -> None:
        if not future.done():
            setter(value)

    def deliver(setter: Callable[[Any], None], value: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits for it
            loop.call_soon_threadsafe(settle, setter, value)

    def target() -> None:
        try:
            result = function()
        except BaseException as exc:  # handed to the awaiting coroutine, whatever it is
            deliver(future.set_exception, exc)
        else:
            deliver(future.set_result, result)

    threading.Thread(target=target, name="bench-prepare", daemon=True).start()
    return future
