"""The bench against model-mode simulators measures the model, not the machine: the same benchmark run
on a quiet machine and with every CPU kept busy gives the same figures — and as many rounds of a sized
benchmark, and the same joules by the engines' own energy counters — timed by the simulator's clock;
prefix caching beats no caching at time scale 5 under load by what the offline simulator says.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from perflab.bench import BenchOptions, run_benchmark
from perflab.bench.datasets import SharedPrefixSpec
from perflab.bench.traffic import build_schedule
from tests.fixtures.cpu_load import busy_cpus
from tests.fixtures.sim_workloads import MODEL, offline_run, shared_prefix_prompts, write_custom_dataset

SCALE = 5
OUTPUT_LEN = 32
FIGURES = ("duration", "output_throughput", "total_token_throughput", "request_throughput")
LATENCIES = [
    f"{stat}_{name}_ms" for stat in ("mean", "median", "p99") for name in ("ttft", "tpot", "itl", "e2el")
]
# The busy processes must have had a real share of the machine while the benchmark ran (on a two-core
# machine shared with other work they get a fraction of it).
MIN_LOAD_CPU_S = 0.5

SCENARIOS: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {
    # Open-loop arrivals capped by --max-concurrency, on a shared-prefix workload with prefix caching.
    "rate-and-concurrency": (
        [{"enable_prefix_caching": True}],
        {
            "dataset": "generated-shared-prefix",
            "shared_prefix": SharedPrefixSpec(num_groups=4, system_prompt_len=1024, question_len=64),
            "output_len": 32,
            "num_prompts": 80,
            "request_rate": 100.0,
            "max_concurrency": 16,
        },
    ),
    # Sessions with think times on two data-parallel replicas, after a warm-up.
    "sessions-on-two-replicas": (
        [{"dp": 2}],
        {
            "dataset": "generated-shared-prefix",
            "shared_prefix": SharedPrefixSpec(
                num_groups=2, system_prompt_len=512, question_len=32, num_turns=3
            ),
            "output_len": 24,
            "num_prompts": 12,
            "max_concurrency": 4,
            "warmup": 2,
            "turn_delay_mean_ms": 20.0,
            "turn_delay_stddev_ms": 10.0,
        },
    ),
    # Rounds until the floor: counted in simulated seconds, so a loaded machine sends as many rounds.
    "rounds": (
        [{}],
        {
            "dataset": "random",
            "input_len": 256,
            "output_len": 16,
            "num_prompts": 10,
            "request_rate": 200.0,
            "min_duration_s": 0.2,
            "min_requests": 25,
        },
    ),
    # Two engines behind one bench, closed loop.
    "two-servers": (
        [{}, {}],
        {"dataset": "random", "input_len": 512, "output_len": 32, "num_prompts": 60, "max_concurrency": 5},
    ),
}


def _bench(urls: list[str], **options: Any) -> dict[str, Any]:
    return run_benchmark(BenchOptions(base_urls=urls, model=MODEL, progress="none", **options))


def _servers(sim_server: Callable[..., str], flags: list[dict[str, Any]]) -> list[str]:
    return [sim_server(model=MODEL, accelerator="H100", time_scale=SCALE, **each) for each in flags]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_loaded_machine_changes_no_figure(sim_server, scenario: str) -> None:
    """Fresh engines each time (the prefix caches start empty): quietly, then with every CPU busy."""
    flags, options = SCENARIOS[scenario]
    before = time.perf_counter()
    quiet = _bench(_servers(sim_server, flags), **options)
    with busy_cpus() as load:
        loaded = _bench(_servers(sim_server, flags), **options)
        assert load.cpu_seconds() >= MIN_LOAD_CPU_S
    after = time.perf_counter()
    for result in (quiet, loaded):
        assert result["timing_source"] == "simulated" and result["failed"] == 0, result["notes"]
        assert not any("simulator" in note for note in result["notes"])
        # the samples' energy window stays on the bench's wall clock, whichever clock timed the figures;
        # the engines' own energy count is over the measured simulated time
        first, last = result["bench_clock_window_s"]
        assert before <= first < last <= after
        assert result["simulated_energy"]["window_s"] == result["duration"]
        assert result["simulated_energy"]["joules"] > 0
    if "min_duration_s" in options:
        rounds = quiet["rounds"]
        assert loaded["rounds"]["count"] == rounds["count"] >= 3 and rounds["floor_reached"]
        assert loaded["rounds"]["measured_s"] == rounds["measured_s"]
        assert quiet["duration"] == pytest.approx(sum(rounds["measured_s"]), abs=1e-5)
    for name in (*FIGURES, *LATENCIES):
        assert loaded[name] == pytest.approx(quiet[name], rel=1e-6, abs=1e-6), name
    assert loaded["simulated_energy"]["joules"] == pytest.approx(
        quiet["simulated_energy"]["joules"], rel=1e-6
    )
    quiet_requests, loaded_requests = _by_request(quiet), _by_request(loaded)
    assert sorted(loaded_requests) == sorted(quiet_requests)
    for place, figures in quiet_requests.items():
        assert loaded_requests[place] == pytest.approx(figures, abs=1e-3), place


def _by_request(result: dict[str, Any]) -> dict[tuple, tuple[float, float, float]]:
    """Each request's send time, TTFT and E2EL (ms) by its server and place in the run (a session's turns
    were dispatched in whatever order they became due on the wall clock)."""
    servers = result["base_urls"]
    by_place: dict[tuple, tuple[float, float, float]] = {}
    for record in result["requests"]:
        place = (record["index"],) if record["session"] is None else (record["session"], record["turn"])
        figures = (record["start_s"] * 1000.0, record["ttft_ms"], record["e2el_ms"])
        by_place[(servers.index(record["base_url"]), *place)] = figures
    return by_place


def test_prefix_caching_wins_under_load_as_the_offline_simulator_says(sim_server, tmp_path) -> None:
    """At time scale 5 with every CPU busy: each request's TTFT and E2EL are the offline simulator's for
    the same send times, with and without prefix caching, and so is the gain caching brings."""
    prompts = shared_prefix_prompts(groups=4, prefix_words=1536, per_group=12)
    options = {
        "dataset": "custom",
        "dataset_path": str(write_custom_dataset(tmp_path / "prompts.jsonl", prompts, OUTPUT_LEN)),
        "num_prompts": len(prompts),
        "request_rate": 200.0,
    }
    measured: dict[bool, dict[str, Any]] = {}
    with busy_cpus() as load:
        for caching in (True, False):
            measured[caching] = _bench(_servers(sim_server, [{"enable_prefix_caching": caching}]), **options)
        assert load.cpu_seconds() >= MIN_LOAD_CPU_S
    schedule = build_schedule(len(prompts), options["request_rate"])
    offline_throughput = {}
    for caching, result in measured.items():
        assert result["timing_source"] == "simulated" and result["failed"] == 0
        timings, offline_throughput[caching] = offline_run(prompts, schedule, OUTPUT_LEN, caching, SCALE)
        for record, truth in zip(result["requests"], timings, strict=True):
            assert record["start_s"] == pytest.approx(record["scheduled_s"], abs=1e-6)
            # Records keep latencies to 0.1 µs: five times that on the offline simulator's scale.
            assert record["ttft_ms"] * SCALE == pytest.approx(truth.ttft * 1000.0, abs=1e-3)
            assert record["e2el_ms"] * SCALE == pytest.approx(truth.e2el * 1000.0, abs=1e-3)
    gain = measured[True]["output_throughput"] / measured[False]["output_throughput"]
    assert gain > 1.5
    assert gain == pytest.approx(offline_throughput[True] / offline_throughput[False], rel=1e-4)
    assert measured[True]["mean_ttft_ms"] < measured[False]["mean_ttft_ms"] / 2


def test_wall_clock_times_a_simulator_as_a_real_engine(sim_server) -> None:
    """--wall-clock sends no marks: the figures come from the kernel's receive times, as for vLLM."""
    url = _servers(sim_server, [{}])[0]
    result = _bench([url], input_len=64, output_len=8, num_prompts=4, wall_clock=True)
    assert result["timing_source"] != "simulated" and result["completed"] == 4
    assert "--wall-clock" in result["bench_args"]


def test_a_mix_of_simulated_and_other_engines_is_timed_by_the_wall_clock(sim_server) -> None:
    """A fixed-timing engine keeps no simulated clock: with one beside a model-mode engine the run is
    timed by the wall clock, and a note says why."""
    model_mode = _servers(sim_server, [{}])[0]
    fixed = sim_server(model=MODEL, fixed_ttft_ms=5, fixed_itl_ms=1)
    result = _bench([model_mode, fixed], input_len=64, output_len=8, num_prompts=6)
    assert result["timing_source"] != "simulated" and result["completed"] == 6
    assert any(
        "3 of 6 successful responses carried the simulator's clock" in note for note in result["notes"]
    )
