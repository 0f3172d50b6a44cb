"""The simulator's seeded noise: reproducible factors with the requested spread, off when absent, and
the same for a benchmark whatever the machine's load."""

from __future__ import annotations

import statistics

import pytest

from perflab.bench import BenchOptions, run_benchmark
from perflab.inventory import SimulateSpec
from perflab.sim.deployment import Knobs, resolve_deployment
from perflab.sim.hardware import find_accelerator
from perflab.sim.hostspec import HostSpec
from perflab.sim.noise import RUN_GAP_S, NoiseModel, Pace, check_noise, next_launch
from perflab.sim.offline import RequestSpec, simulate
from tests.fixtures.cpu_load import busy_cpus
from tests.sim.conftest import SimHost, free_port


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


def _launch_and_bench(host: SimHost, benchmarks: int) -> list[float]:
    """Start vLLM on ``host`` and run ``benchmarks`` closed-loop benchmarks (warm-up included) on it;
    their output throughputs."""
    port = free_port()
    engine = host.start(["vllm", "serve", "Qwen/Qwen3-8B", "--host", "127.0.0.1", "--port", str(port)])
    engine.wait_for(r"Application startup complete\.")
    options = BenchOptions(
        base_urls=[f"http://127.0.0.1:{port}"],
        model="Qwen/Qwen3-8B",
        input_len=256,
        output_len=16,
        num_prompts=16,
        max_concurrency=4,
        warmup=2,
        progress="none",
    )
    throughputs = []
    for _ in range(benchmarks):
        result = run_benchmark(options)
        assert result["timing_source"] == "simulated" and result["completed"] == 16
        throughputs.append(result["output_throughput"])
    engine.terminate()
    return throughputs


def test_a_noisy_host_measures_its_seeded_draws_whatever_the_load(sim_host) -> None:
    """Each benchmark on a launch (its warm-up and measured phases one run, however far apart) runs at
    that launch's and run's seeded speed, with every CPU busy too: its throughput is the noise-free
    host's times the drawn factor, exactly."""
    noise = {"run_cv_pct": 5.0, "launch_cv_pct": 3.0, "seed": 7}
    spec = {"time_scale": 5.0, "startup_scale": 1000.0}
    clean = _launch_and_bench(sim_host("H100", 1, **spec), 2)  # the second finds the first's prompts cached
    model = NoiseModel(**noise)
    expected = [throughput * model.speed(0, run) for run, throughput in enumerate(clean)]
    assert model.speed(0, 0) != pytest.approx(model.speed(0, 1), rel=1e-3)
    assert _launch_and_bench(sim_host("H100", 1, noise=noise, **spec), 2) == pytest.approx(expected, rel=1e-6)
    with busy_cpus() as load:
        loaded = _launch_and_bench(sim_host("H100", 1, noise=noise, **spec), 2)
        assert load.cpu_seconds() > 0.5
    assert loaded == pytest.approx(expected, rel=1e-6)
