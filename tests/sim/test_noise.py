"""The simulator's seeded noise: reproducible factors with the requested spread, off when absent."""

from __future__ import annotations

import statistics

import pytest

from perflab.inventory import SimulateSpec
from perflab.sim.deployment import Knobs, resolve_deployment
from perflab.sim.hardware import find_accelerator
from perflab.sim.hostspec import HostSpec
from perflab.sim.noise import RUN_GAP_S, NoiseModel, Pace, check_noise, next_launch
from perflab.sim.offline import RequestSpec, simulate


def test_factors_are_seeded_and_have_the_requested_spread() -> None:
    model = NoiseModel(run_cv_pct=2.0, launch_cv_pct=1.0, seed=7)
    assert model.speed(3, 4) == NoiseModel(2.0, 1.0, seed=7).speed(3, 4)
    assert model.speed(3, 4) != NoiseModel(2.0, 1.0, seed=8).speed(3, 4)
    launches = [model.launch_speed(n) for n in range(4000)]
    runs = [model.speed(0, n) / model.launch_speed(0) for n in range(4000)]
    assert statistics.stdev(launches) / statistics.mean(launches) == pytest.approx(0.01, rel=0.1)
    assert statistics.stdev(runs) / statistics.mean(runs) == pytest.approx(0.02, rel=0.1)


def test_no_noise_is_exactly_one() -> None:
    assert NoiseModel().speed(5, 5) == 1.0
    assert check_noise(None) is None


def test_a_new_run_starts_after_an_idle_gap() -> None:
    model = NoiseModel(run_cv_pct=5.0, seed=1)
    pace = Pace(model, launch=2)
    first = pace.factor(0.0)
    pace.idle(1.0)
    assert pace.factor(1.0 + RUN_GAP_S / 2) == first  # a short pause inside a run
    pace.idle(3.0)
    assert pace.factor(3.0 + RUN_GAP_S) == model.speed(2, 1) != first


def test_launches_are_counted_per_host(tmp_path) -> None:
    assert [next_launch(str(tmp_path)) for _ in range(3)] == [0, 1, 2]


@pytest.mark.parametrize(
    "spec, message",
    [({"run_cv": 2}, "expected a mapping"), ({"run_cv_pct": -1}, "run_cv_pct"), ({"seed": "x"}, "seed")],
)
def test_bad_noise_specs_name_the_field(spec: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_noise(spec)


def test_the_schedulers_run_at_the_pace_of_their_launch_and_run() -> None:
    """Offline model runs: a launch's speed factor divides every step, so latencies scale by it."""
    dep = resolve_deployment("vllm", Knobs("Qwen/Qwen3-8B"), find_accelerator("H100"))
    burst = [RequestSpec(0.0, 512, 32) for _ in range(8)]
    plain = simulate(dep, burst)[0]
    model = NoiseModel(run_cv_pct=3.0, launch_cv_pct=2.0, seed=4)
    paced = simulate(dep, burst, pace=Pace(model, launch=1))[0]
    speed = model.speed(1, 0)
    assert speed != 1.0
    for ours, theirs in zip(paced, plain, strict=True):
        assert ours.e2el == pytest.approx(theirs.e2el / speed)


def test_a_hosts_simulate_block_takes_noise(tmp_path) -> None:
    block = SimulateSpec(accelerator="H100", noise={"run_cv_pct": 2, "launch_cv_pct": 1, "seed": 3})
    host = HostSpec(str(tmp_path), block.as_spec())
    assert host.noise is not None and host.noise.speed(0, 0) == NoiseModel(2.0, 1.0, seed=3).speed(0, 0)
    assert HostSpec(str(tmp_path), SimulateSpec(accelerator="H100").as_spec()).noise is None
    with pytest.raises(ValueError, match="launch_cv_pct"):
        SimulateSpec(accelerator="H100", noise={"launch_cv_pct": 99})
