"""The simulated clock of a model-mode engine, driven in-process on a real event loop.

A client declares each request's place in its schedule (``ClockMark``); the engine then gives every
request the same simulated times however late the client sends it, equal to the offline simulator's
for the same send times, and stops waiting for a client that went quiet or cut a request off.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from dataclasses import dataclass, field

import pytest

from perflab.sim.clock import SimClock
from perflab.sim.deployment import Knobs, resolve_deployment
from perflab.sim.engine import Engine, model_engine
from perflab.sim.hardware import find_accelerator
from perflab.sim.offline import RequestSpec, simulate
from perflab.sim.perfmodel import plan_memory
from perflab.sim.sequence import Sequence
from perflab.sim.timelines import ClockMark, parse_mark
from tests.sim.sse_client import chat_payload, request

MODEL = "Qwen/Qwen3-8B"
RUN = "bench0/measured"


def _deployment(**knobs: object):
    values = Knobs(MODEL)
    for name, value in knobs.items():
        setattr(values, name, value)
    return resolve_deployment("vllm", values, find_accelerator("H100"))


@dataclass
class Request:
    """One request's simulated send, first and last token times on its client's timeline."""

    sent: float = math.nan
    first: float = math.nan
    last: float = math.nan
    late: float = 0.0
    wall_done: float = math.nan
    done: asyncio.Event = field(default_factory=asyncio.Event)


class Client:
    """Sends requests straight to an in-process engine and records their simulated times."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.requests: list[Request] = []

    def send(self, mark: ClockMark, prompt: int, output: int) -> Request:
        record = Request()
        self.requests.append(record)
        seq = Sequence(f"r{len(self.requests)}", 0.0, prompt, output, "length", len(self.requests))

        def on_tokens(seq: Sequence, count: int, finished: bool) -> None:
            ticket = seq.ticket
            assert ticket is not None
            if math.isnan(record.first):
                record.sent = seq.arrival - ticket.origin
                record.first = seq.last_token_at - ticket.origin
                record.late = ticket.late
            if finished:
                record.last = seq.last_token_at - ticket.origin
                record.wall_done = time.monotonic()
                record.done.set()

        seq.on_tokens = on_tokens
        self.engine.submit(seq, mark)
        return record


def _live_engine(time_scale: float, hold_s: float = 10.0, **knobs: object) -> Engine:
    dep = _deployment(**knobs)
    return model_engine(
        SimClock(asyncio.get_running_loop()), dep, plan_memory(dep), time_scale, hold_s=hold_s
    )


async def _closed_loop(delays: list[float], limit: int, dp: int = 1) -> list[Request]:
    """``len(delays)`` requests, at most ``limit`` in flight, each sent ``delays[k]`` wall seconds
    after its slot freed (a client that is late by that much)."""
    client = Client(_live_engine(20.0, dp=dp))
    slots = asyncio.Semaphore(limit)
    count = len(delays)

    async def one(index: int) -> None:
        await asyncio.sleep(delays[index])
        mark = ClockMark(RUN, index, due=0.0, next_due=0.0 if index < count - 1 else math.inf, limit=limit)
        record = client.send(mark, 256 + 32 * (index % 5), 24 + index % 7)
        await record.done.wait()
        slots.release()

    tasks = []
    for index in range(count):
        await slots.acquire()
        tasks.append(asyncio.ensure_future(one(index)))
    await asyncio.gather(*tasks)
    return client.requests


@pytest.mark.parametrize("dp", [1, 2])
def test_a_late_client_changes_no_simulated_time(dp: int) -> None:
    """The same closed-loop benchmark, sent on time and by a client up to 40 ms late per request,
    gives every request the same simulated times; each request is sent when a slot frees."""
    count, limit = 24, 4
    on_time = asyncio.run(_closed_loop([0.0] * count, limit, dp))
    rng = random.Random(5)
    late = asyncio.run(_closed_loop([rng.uniform(0.0, 0.04) for _ in range(count)], limit, dp))
    for punctual, slow in zip(on_time, late, strict=True):
        assert (slow.sent, slow.first, slow.last) == pytest.approx(
            (punctual.sent, punctual.first, punctual.last), abs=1e-6
        )
        assert slow.late == 0.0
    ends = []
    for index, punctual in enumerate(on_time):
        expected = 0.0 if index < limit else sorted(ends)[index - limit]
        assert punctual.sent == pytest.approx(expected, abs=1e-6)
        ends.append(punctual.last)


def test_open_loop_times_equal_the_offline_simulators() -> None:
    """Requests declared at their scheduled times get exactly the offline simulator's latencies (at time
    scale 10, a tenth of them), whatever the wall clock did meanwhile."""
    scale = 10.0
    rng = random.Random(3)
    dues = sorted(rng.uniform(0.0, 0.3) for _ in range(20))
    shapes = [(rng.randint(64, 2048), rng.randint(8, 48)) for _ in dues]

    async def live() -> list[Request]:
        client = Client(_live_engine(scale))
        records = []
        for index, (due, (prompt, output)) in enumerate(zip(dues, shapes, strict=True)):
            following = dues[index + 1] if index + 1 < len(dues) else math.inf
            records.append(client.send(ClockMark(RUN, index, due=due, next_due=following), prompt, output))
            await asyncio.sleep(rng.uniform(0.0, 0.01))  # sent late, early, out of step with the schedule
        await asyncio.gather(*(record.done.wait() for record in records))
        return records

    measured = asyncio.run(live())
    specs = [
        RequestSpec(due * scale, prompt, output) for due, (prompt, output) in zip(dues, shapes, strict=True)
    ]
    offline, _ = simulate(_deployment(), specs)
    for due, sent, truth in zip(dues, measured, offline, strict=True):
        assert sent.sent == pytest.approx(due, abs=1e-6)
        assert (sent.first - sent.sent) * scale == pytest.approx(truth.ttft, rel=1e-6)
        assert (sent.last - sent.sent) * scale == pytest.approx(truth.e2el, rel=1e-6)


def test_a_client_that_goes_quiet_is_waited_for_only_so_long() -> None:
    """Item 1 is due at 5 ms but never sent: the clock holds item 0's steps past 5 ms until the run has
    been quiet for its hold, then goes on; item 1, sent later, starts when it came and says how late."""
    hold_s = 0.4

    async def run() -> tuple[Request, Request, float]:
        client = Client(_live_engine(20.0, hold_s=hold_s))
        started = time.monotonic()
        first = client.send(ClockMark(RUN, 0, due=0.0, next_due=0.005), 512, 64)
        await first.done.wait()
        second = client.send(ClockMark(RUN, 1, due=0.005, next_due=math.inf), 512, 64)
        await second.done.wait()
        return first, second, started

    first, second, started = asyncio.run(run())
    assert first.wall_done - started >= hold_s
    assert first.sent == 0.0 and first.last > 0.005
    assert second.late > 0.0 and second.sent > 0.005


def test_an_abandoned_request_releases_the_clock() -> None:
    """A request the client cuts off ends its item then, and its run stops holding the clock: a request
    that follows is served at once (no hold of 10 s), starting when it came."""

    async def run() -> tuple[Request, float]:
        engine = _live_engine(20.0)
        client = Client(engine)
        started = time.monotonic()
        # 8192 tokens to decode: seconds of the wall clock at time scale 20, however late the test runs
        client.send(ClockMark(RUN, 0, due=0.0, next_due=0.0, limit=1), 4096, 8192)
        running: list = []
        while not running:
            await asyncio.sleep(0.01)
            running = [
                seq
                for replica in engine.replicas
                for rank in replica.ranks  # type: ignore[attr-defined]
                for seq in rank.running
            ]
        engine.abort(running[0])
        follower = client.send(ClockMark(RUN, 1, due=0.0, next_due=math.inf, limit=1), 64, 8)
        await follower.done.wait()
        return follower, time.monotonic() - started

    follower, elapsed = asyncio.run(run())
    assert elapsed < 5.0
    assert follower.sent > 0.0


def test_a_refused_request_keeps_its_place_and_frees_its_slot() -> None:
    """Item 0 was refused (an error answer): with one slot, item 1 is sent when item 0 was, not never."""

    async def run() -> Request:
        engine = _live_engine(20.0)
        client = Client(engine)
        engine.refuse(ClockMark(RUN, 0, due=0.0, next_due=0.01, limit=1))
        follower = client.send(ClockMark(RUN, 1, due=0.01, next_due=math.inf, limit=1), 64, 8)
        await asyncio.wait_for(follower.done.wait(), 5.0)
        return follower

    follower = asyncio.run(run())
    assert follower.sent == pytest.approx(0.01) and follower.late == 0.0


def test_an_item_sent_twice_is_refused() -> None:
    async def run() -> None:
        client = Client(_live_engine(20.0))
        client.send(ClockMark(RUN, 0, due=0.0, next_due=0.1), 64, 8)
        with pytest.raises(ValueError, match="item 0 of run bench0/measured was already sent"):
            client.send(ClockMark(RUN, 0, due=0.0, next_due=0.1), 64, 8)

    asyncio.run(run())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("run=a/b;item=x", "item must be an integer"),
        ("run=nobench;item=1", "run must be BENCH/PHASE"),
        ("run=a/b;item=1;due=-1", "due must be seconds"),
        ("run=a/b;item=1;due=nan", "due must be seconds"),
        ("run=a/b;item=1;then=inf", "then must be seconds"),
        ("run=a/b;item=1;when=3", "unknown field 'when'"),
        ("run=a/b;item", "expected name=value pairs"),
        ("run=a/b", "item= is missing"),
    ],
)
def test_bad_marks_are_named(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_mark(text)


def test_a_mark_reads_back() -> None:
    mark = parse_mark("run=3fa/measured;item=7;turn=2;due=0.25;next=inf;limit=16;then=0.5")
    assert (mark.run, mark.bench, mark.item, mark.turn) == ("3fa/measured", "3fa", 7, 2)
    assert (mark.due, mark.next_due, mark.limit, mark.then) == (0.25, math.inf, 16, 0.5)


def _choice_events(result) -> list[dict]:
    return [event for _, event in result.events if isinstance(event, dict) and event.get("choices")]


def test_the_server_tells_a_declaring_client_its_clock(sim_server) -> None:
    """Over HTTP: each output chunk of a declared request carries its simulated time, the first also the
    send time; undeclared requests and fixed-timing servers send no such field; a bad mark is a 400."""
    url = sim_server(model=MODEL, accelerator="H100", time_scale=20, reasoning_parser="qwen3")
    payload = chat_payload(MODEL, "a question " * 40, 12)
    mark = {"x-perflab-sim-clock": "run=abc/measured;item=0;due=0.25;next=inf"}
    declared = _choice_events(asyncio.run(request(url, "/v1/chat/completions", payload, headers=mark)))
    times = [event["perflab_sim_t"] for event in declared]
    assert len(times) == 12 and times == sorted(times) and times[0] > 0.25
    assert declared[0]["perflab_sim_arrival"] == pytest.approx(0.25, abs=1e-6)
    assert "perflab_sim_late" not in declared[0] and "perflab_sim_arrival" not in declared[1]
    plain = _choice_events(asyncio.run(request(url, "/v1/chat/completions", payload)))
    assert len(plain) == 12 and not any(key.startswith("perflab_sim") for event in plain for key in event)
    bad = asyncio.run(
        request(url, "/v1/chat/completions", payload, headers={"x-perflab-sim-clock": "run=abc;item=0"})
    )
    assert bad.status == 400 and b"run must be BENCH/PHASE" in bad.body
    fixed = sim_server(fixed_ttft_ms=1, fixed_itl_ms=1)
    ignored = _choice_events(
        asyncio.run(request(fixed, "/v1/chat/completions", chat_payload("sim-model", "hi", 4), headers=mark))
    )
    assert len(ignored) == 4 and not any("perflab_sim_t" in event for event in ignored)
