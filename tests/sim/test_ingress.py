"""The engine's API front end takes requests in by processor sharing: a burst reaches the scheduler
together, after all of it was taken in; a simulated vLLM's first token of a burst waits for that."""

from __future__ import annotations

import pytest

from perflab.sim.deployment import Knobs, resolve_deployment
from perflab.sim.hardware import find_accelerator
from perflab.sim.ingress import Ingress
from perflab.sim.offline import RequestSpec, simulate
from perflab.sim.sequence import Sequence


def _sequences(count: int) -> list[Sequence]:
    return [Sequence(f"r{index}", 0.0, 16, 4, "length", index) for index in range(count)]


def test_a_burst_is_taken_in_together_after_all_of_it():
    ingress = Ingress()
    burst = _sequences(100)
    for seq in burst:
        ingress.add(seq, 0.0, 0.01)
    assert ingress.next_done() == pytest.approx(1.0)  # 100 requests sharing the front end
    assert ingress.take(0.999) == [] and ingress.pending == 100
    assert ingress.take(1.0) == burst and ingress.pending == 0 and ingress.next_done() is None


def test_a_later_request_shares_the_front_end_from_its_arrival():
    ingress = Ingress()
    first, second = _sequences(2)
    ingress.add(first, 0.0, 0.01)
    ingress.add(second, 0.004, 0.01)  # first has 6 ms of work left, now at half speed
    assert ingress.next_done() == pytest.approx(0.016)
    assert ingress.take(0.016) == [first]
    assert ingress.next_done() == pytest.approx(0.020)  # second: 4 ms done while shared, 6 ms alone
    assert ingress.take(0.5) == [second]


def test_a_shorter_request_is_done_first():
    ingress = Ingress()
    long, short = _sequences(2)
    ingress.add(long, 0.0, 0.03)
    ingress.add(short, 0.0, 0.01)
    assert ingress.take(0.02) == [short] and ingress.next_done() == pytest.approx(0.04)


def test_a_request_taken_in_is_handed_out_once_even_if_another_arrives_first():
    ingress = Ingress()
    first, second = _sequences(2)
    ingress.add(first, 0.0, 0.01)
    ingress.add(second, 0.05, 0.01)  # first was done at 0.01 but not yet handed out
    assert ingress.next_done() == pytest.approx(0.05)
    assert ingress.take(0.05) == [first]
    assert ingress.discard(second, 0.055) and ingress.pending == 0


def test_a_simulated_vllm_burst_waits_for_its_front_end():
    """1,000 short chat requests at once on vLLM (seed 003's random-128 block shape): none gets its
    first token before the front end took all of them in, at its per-request cost each."""
    dep = resolve_deployment("vllm", Knobs("Qwen/Qwen3-14B"), find_accelerator("H100"))
    timings, _ = simulate(dep, [RequestSpec(0.0, 128, 4) for _ in range(1000)])
    assert min(timing.ttft for timing in timings) >= 1000 * dep.profile.ingress_s
    lone, _ = simulate(dep, [RequestSpec(0.0, 128, 4)])
    assert lone[0].ttft < 2 * dep.profile.ingress_s + 0.1
