"""Rounds: a benchmark too short for its floor sends its workload again, fresh prompts each round, and
measures the rounds' own time (by a simulator's clock when it answers with one); how many rounds a
configuration of a given speed gets, and that a faster one never ends below the floor."""

from __future__ import annotations

import json
import math
from pathlib import Path

import httpx
import pytest

from perflab.bench.client import Outcome
from perflab.bench.datasets import DatasetSpec, Sample
from perflab.bench.dispatch import Dispatch, Prepared
from perflab.bench.rounds import (
    MAX_MEASURED_REQUESTS,
    Floor,
    MeasuredRounds,
    another_round,
    derived_seed,
    round_seed,
    round_spec,
    sized,
)
from perflab.cli import main
from perflab.runner.evidence import MARGIN, MIN_COMPLETED, MIN_DURATION_S, floor_args, sized_benchmark
from tests.fixtures.streaming_server import Script


def _prompt_of(body: dict) -> str:
    return body["messages"][-1]["content"] if "messages" in body else body["prompt"]


def _bench(server_url: str, tmp_path: Path, *extra: str) -> dict:
    result_file = tmp_path / "result.json"
    status = main(
        [
            "bench",
            "--base-url",
            server_url,
            "--model",
            "scripted-model",
            "--output-len",
            "8",
            "--no-progress",
            "--save-result",
            str(result_file),
            "--result-text",
            str(tmp_path / "result.txt"),
            *extra,
        ]
    )
    assert status == 0
    return json.loads(result_file.read_text())


def test_a_server_too_fast_for_the_floor_is_measured_over_rounds_of_fresh_prompts(
    scripted_server, tmp_path: Path
) -> None:
    server = scripted_server(Script(ttft_s=0.02, itl_s=0.004))
    result = _bench(
        server.base_url,
        tmp_path,
        *("--dataset", "random", "--input-len", "24", "--num-prompts", "10", "--seed", "7"),
        *("--perflab-min-duration", "0.3", "--perflab-min-requests", "25"),
    )
    rounds = result["rounds"]
    assert rounds["count"] >= 3 and rounds["floor_reached"] and rounds["prompts_per_round"] == 10
    assert result["completed"] == 10 * rounds["count"] == len(server.completions)
    # the measured time is the rounds' own, the pauses between them left out
    assert result["duration"] >= 0.3
    assert result["duration"] == pytest.approx(sum(rounds["measured_s"]), abs=1e-5)
    assert result["output_throughput"] == pytest.approx(result["total_output_tokens"] / result["duration"])
    # every round a fresh draw: no prompt sent twice
    prompts = [_prompt_of(request.body) for request in server.completions]
    assert len(set(prompts)) == len(prompts)
    assert result["dataset"]["seed"] == 7 and round_seed(7, 1) == derived_seed(7, "round-1") != 7
    shown = [line.split() for line in (tmp_path / "result.txt").read_text().splitlines()]
    assert ["Rounds", "of", "10", "fresh", "prompts:", str(rounds["count"])] in shown


def test_without_a_floor_the_benchmark_sends_its_prompts_once(scripted_server, tmp_path: Path) -> None:
    server = scripted_server(Script(ttft_s=0.01))
    result = _bench(server.base_url, tmp_path, "--num-prompts", "6", "--input-len", "16")
    assert "rounds" not in result and result["completed"] == 6 == len(server.completions)


def test_rounds_of_a_file_take_its_next_entries_until_it_runs_out(scripted_server, tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("".join(f"prompt number {index}\n" for index in range(25)))
    server = scripted_server(Script(ttft_s=0.005))
    result = _bench(
        server.base_url,
        tmp_path,
        *("--dataset", "custom", "--dataset-path", str(prompts), "--num-prompts", "10"),
        *("--perflab-min-requests", "30"),
    )
    sent = [_prompt_of(request.body) for request in server.completions]
    assert result["rounds"]["count"] == 3 and len(sent) == 30
    # rounds one and two send the file's first twenty entries, each once; the third reuses five
    assert sorted(sent[:20]) == sorted(f"prompt number {index}" for index in range(20))
    assert any("reusing them" in note for note in result["notes"])


def test_a_round_draws_from_the_next_entries_of_a_pool_or_a_seed_of_its_own() -> None:
    pool = DatasetSpec(kind="sharegpt", path="x.json", count=12, seed=3)
    assert round_spec(pool, 10, 0) == pool
    assert (round_spec(pool, 10, 2).count, round_spec(pool, 10, 2).seed) == (32, 3)
    generated = DatasetSpec(kind="random", count=12, seed=3)
    second = round_spec(generated, 10, 1)
    assert (second.count, second.seed) == (10, derived_seed(3, "round-1"))


def test_rounds_stop_at_the_floor_at_a_round_that_completes_nothing_or_at_the_bound() -> None:
    floor = Floor(5.0, 50)
    assert another_round(floor, 4.9, 60, 20, 60, 20)
    assert another_round(floor, 6.0, 40, 20, 40, 20)
    assert not another_round(floor, 5.0, 50, 10, 50, 10)
    assert not another_round(floor, 1.0, 10, 0, 20, 10)  # the last round completed nothing
    assert not another_round(floor, 1.0, 10, 10, MAX_MEASURED_REQUESTS, 10)
    assert sized(floor, 2.0, 100).rounds == 3 and sized(floor, 6.0, 10).rounds == 5


def _dispatch(wall: tuple[float, float], simulated: tuple[float, float] | None) -> Dispatch:
    """One streamed token of a request sent and ended at ``wall`` (``perf_counter`` seconds), and at
    ``simulated`` on its round's timeline when the simulator answered with its clock."""
    outcome = Outcome()
    outcome.sent_at, outcome.ended_at = wall
    outcome.chunk_times, outcome.chunk_chars = [wall[1]], [4]
    if simulated is not None:
        outcome.sim_arrival, outcome.sim_times = simulated[0], [simulated[1]]
    request = httpx.Request("POST", "http://sim/v1/completions")
    prepared = Prepared(request, "http://sim", Sample("p", 1, 1), 1)
    return Dispatch(prepared, 0.0, wall[0], outcome)


def _rounds(floor: Floor, simulated: tuple[float, float] | None) -> MeasuredRounds:
    """Rounds of one request that each take 2 s of wall time, 1 s apart, until ``floor`` is reached."""
    measured = MeasuredRounds()
    while True:
        start = 100.0 + 3.0 * measured.count
        measured.add(
            [_dispatch((start, start + 2.0), simulated)],
            started_at=start,
            sent=1,
            planned_turns={},
            dataset_source="unverified",
            preconnected=0,
            reads={},
            reset={},
        )
        if not measured.another(floor, 1):
            return measured


def test_a_run_timed_by_a_simulators_clock_counts_its_floor_in_the_simulators_seconds() -> None:
    """A loaded machine stretched each round to 2 s of wall time where the simulator's clock says 1 s:
    the floor counts the simulated seconds the result reports, so the rounds go on until those reach it
    (the wall clock would have stopped a round earlier, leaving a result shorter than its floor); the
    pauses between rounds and the energy window stay on the wall clock."""
    floor = Floor(2.5, 1)
    simulated = _rounds(floor, (0.0, 1.0))
    assert simulated.simulated and simulated.count == 3
    assert simulated.round_s == [1.0, 1.0, 1.0] and simulated.measured_s == 3.0
    records = simulated.records(None)
    assert [(record.start_s, record.end_s) for record in records] == [(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)]
    assert simulated.summary(floor, 1)["paused_s"] == 2.0
    assert simulated.clock_window() == [100.0, 108.0]
    wall = _rounds(floor, None)
    assert not wall.simulated and wall.count == 2 and wall.round_s == [2.0, 2.0]
    assert [(record.start_s, record.end_s) for record in wall.records(None)] == [(0.0, 2.0), (2.0, 4.0)]


def test_the_runner_asks_the_bench_for_the_floor_in_wall_seconds() -> None:
    wanted = ["--perflab-min-duration", f"{MIN_DURATION_S * MARGIN:g}", "--perflab-min-requests"]
    assert floor_args(1.0) == [*wanted, str(MIN_COMPLETED)]
    assert float(floor_args(200.0)[1]) * 200.0 >= MIN_DURATION_S


@pytest.mark.parametrize("per_round", [1, 10, 100, 1000])
@pytest.mark.parametrize("per_request_ms", [1.0, 10.0, 44.0, 65.0, 600.0])
@pytest.mark.parametrize("speedup", [1.2, 1.37, 1.49, 2.0, 5.0, 10.0])
def test_a_configuration_faster_than_its_reference_never_ends_too_short(
    per_round: int, per_request_ms: float, speedup: float
) -> None:
    """The reference serves a pass of the profile's ``per_round`` requests at ``per_request_ms`` each
    (1 ms: a thousand requests a second, beyond any LLM server); a candidate ``speedup`` times as fast
    (+37 % and +49 % are the gains the fixed count censored on local-sim) gets the rounds it needs and
    is judged, as is its reference."""
    reference_s = per_round * per_request_ms / 1000.0
    for round_s in (reference_s, reference_s / speedup):
        size = sized_benchmark(round_s, per_round)
        assert size.too_short is None, size
        assert size.duration_s >= MIN_DURATION_S and size.completed >= MIN_COMPLETED
        needed = max(
            math.ceil(MIN_DURATION_S * MARGIN / round_s - 1e-9), math.ceil(MIN_COMPLETED / per_round)
        )
        assert size.rounds == needed


def test_only_a_pass_faster_than_the_bench_can_ever_count_is_censored() -> None:
    # 100,000 requests in all, each lasting 10 µs (100,000 requests a second), cannot make 5 s
    censored = sized_benchmark(1e-5, 1)
    assert censored.too_short is not None and censored.completed == MAX_MEASURED_REQUESTS
    with pytest.raises(ValueError):
        sized_benchmark(0.0, 10)


def test_rounds_of_a_sharegpt_file_ask_the_server_to_count_each_prompt_once(
    sim_server, tmp_path: Path
) -> None:
    entries = [
        {
            "conversations": [
                {"from": "human", "value": f"question {index} " + "word " * 8},
                {"value": "a reply"},
            ]
        }
        for index in range(30)
    ]
    dataset = tmp_path / "sharegpt.json"
    dataset.write_text(json.dumps(entries))
    url = sim_server(fixed_ttft_ms=1, fixed_itl_ms=1, access_log=True)
    result_file = tmp_path / "result.json"
    status = main(
        [
            "bench",
            *("--base-url", url, "--model", "sim-model", "--endpoint", "chat", "--no-progress"),
            *("--dataset", "sharegpt", "--dataset-path", str(dataset), "--num-prompts", "10"),
            *("--output-len", "4", "--perflab-min-requests", "30", "--save-result", str(result_file)),
        ]
    )
    assert status == 0
    result = json.loads(result_file.read_text())
    assert result["rounds"]["count"] == 3 and result["completed"] == 30
    assert result["input_tokens_source"] == "server"
    # round n reads the file's first 10·n entries: counted again, they would take 10 + 20 + 30 round trips
    tokenize = sim_server.log(url).count('"POST /tokenize HTTP/1.1" 200')
    assert 30 <= tokenize <= 32  # each prompt once, and the probe that found the endpoint
