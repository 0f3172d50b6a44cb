"""A simulated run of known length, watched the way the Run page watches it: the real load generator
against ``perflab sim serve`` with fixed timings writes its progress lines, the runner's history
(:func:`perflab.runner.live.with_point`) keeps them, and the page's view of that history
(:class:`perflab.views.run_progress.RunProgress`, :func:`perflab.runner.live.live_frame`) gives the
time left and the live latency. The time left said from the moment a tenth of the requests has ended
is held against the time that really was left in the median progress line (a loaded machine can stall
any one moment, which no estimate made before it can know), and every live latency point against the
latencies the requests really had (their records)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perflab.bench import BenchOptions, run_benchmark
from perflab.bench.progress import PROGRESS_PREFIX
from perflab.runner import live
from perflab.views.run_progress import RunProgress

# 120 requests at 10/s, each 100 ms to the first of 32 tokens and 20 ms per token after it: the run
# lasts about 12.7 s, and each request about 0.72 s.
REQUESTS = 120
RATE = 10.0
OUTPUT_TOKENS = 32
TTFT_MS = 100
ITL_MS = 20


def _bench_lines(capsys: pytest.CaptureFixture[str]) -> list[dict]:
    """The bench's JSON progress lines written to stderr so far."""
    return [
        json.loads(line[len(PROGRESS_PREFIX) :])
        for line in capsys.readouterr().err.splitlines()
        if line.startswith(PROGRESS_PREFIX)
    ]


def _median_line_holds(said: list[tuple[float, float]]) -> bool:
    """Whether the progress lines' time left (``eta``, ``really_left`` each) is within 0.4 × the time
    really left + 1 s of it in their median line (there is at least one line)."""
    misses = [abs(eta - really_left) - (0.4 * really_left + 1.0) for eta, really_left in said]
    return bool(misses) and float(np.median(misses)) <= 0.0


def _view(line: dict, profile: str, history: list, **stored: object) -> RunProgress:
    """What the run page shows of a benchmarking run at the progress ``line`` (with the runner's
    ``stored`` step and rounds, when given)."""
    return RunProgress(
        status="benchmarking",
        done=line["done"],
        failed=line["failed"],
        total=line["total"],
        in_flight=line["in_flight"],
        elapsed_s=line["elapsed_s"],
        profile=profile,
        profile_number=1,
        profiles=1,
        cancel_requested=False,
        history=history,
        **stored,  # type: ignore[arg-type]
    )


def _closed_loop(sim_server, capsys, max_num_seqs: int, **options: int | bool) -> tuple[list[dict], dict]:  # type: ignore[no-untyped-def]
    """The progress lines and result of a closed loop, prompt and output lengths spread ±90 % around
    ``options``', against a simulated Qwen3-8B batching at most ``max_num_seqs`` sequences."""
    url = sim_server(model="Qwen/Qwen3-8B", max_num_seqs=max_num_seqs)
    capsys.readouterr()
    result = run_benchmark(
        BenchOptions(base_urls=[url], model="Qwen/Qwen3-8B", range_ratio=0.9, progress="json", **options)
    )
    return _bench_lines(capsys), result


@pytest.fixture
def progress_lines(sim_server, capsys: pytest.CaptureFixture[str]) -> tuple[list[dict], dict]:  # type: ignore[no-untyped-def]
    """The bench's progress lines (JSON) and its result, for the run described above."""
    url = sim_server(fixed_ttft_ms=TTFT_MS, fixed_itl_ms=ITL_MS)
    capsys.readouterr()
    result = run_benchmark(
        BenchOptions(
            base_urls=[url],
            model="sim-model",
            num_prompts=REQUESTS,
            input_len=64,
            output_len=OUTPUT_TOKENS,
            request_rate=RATE,
            burstiness=1e9,  # a request every 0.1 s, not a Poisson process
            progress="json",
        )
    )
    lines = _bench_lines(capsys)
    return lines, result


def test_time_left_and_live_latency_of_a_simulated_run(progress_lines: tuple[list[dict], dict]) -> None:
    lines, result = progress_lines
    assert result["completed"] == REQUESTS and lines[-1]["done"] == REQUESTS
    ended_at = lines[-1]["elapsed_s"]
    history: list[list[float]] = []
    said = []
    for line in lines[:-1]:
        history = live.with_point(history, line)
        if line["done"] >= REQUESTS / 10:
            view = _view(line, "paced", history)
            said.append((view.eta_s, ended_at - line["elapsed_s"], view.text()))
    assert said and all(eta is not None for eta, _, _ in said), said
    first_text = said[0][2]
    assert "left" in first_text and "estimating" not in first_text
    assert _median_line_holds([(eta, really_left) for eta, really_left, _ in said]), said

    e2els = [record["e2el_ms"] / 1000 for record in result["requests"] if record["success"]]
    frame = live.live_frame(history)
    points = frame["latency_s"].dropna()
    assert len(points) >= len(frame) - 1  # after the first second, every point has measured latencies
    assert points.max() <= max(e2els) and points.min() >= min(e2els)


def test_time_left_of_a_closed_loop_through_its_drain(sim_server, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    """A closed loop (64 in flight, the simulated engine batching 32 of them, lengths that vary) against
    the simulator's performance model: once every request is sent the last 64 drain together. From a
    tenth of the run on, the time left said is held against the time really left in the median progress
    line while requests are sent and in the median line of the drain (one stalled moment of a loaded
    machine is no estimate's to know)."""
    total = 160
    lines, _ = _closed_loop(
        sim_server, capsys, 32, num_prompts=total, input_len=512, output_len=256, max_concurrency=64
    )
    ended_at = lines[-1]["elapsed_s"]
    history: list[list[float]] = []
    said = []
    for line in lines[:-1]:
        history = live.with_point(history, line)
        eta = live.eta_s(history, total)
        if line["done"] >= total / 10 and eta is not None:
            sent_all = line["done"] + line["in_flight"] >= total
            said.append((sent_all, eta, ended_at - line["elapsed_s"]))
    assert any(sent_all for sent_all, _, _ in said), said  # the drain was watched
    for phase in (False, True):  # while requests are still sent, and through the drain
        held = [(eta, really_left) for sent_all, eta, really_left in said if sent_all is phase]
        assert _median_line_holds(held), (phase, said)


def test_a_benchmark_in_rounds_says_its_round_and_the_time_left_of_every_round(  # type: ignore[no-untyped-def]
    sim_server, capsys: pytest.CaptureFixture[str]
) -> None:
    """A closed loop sized to a floor of evidence three rounds long (24 requests a round, 16 in flight,
    at least 60 requests): the runner's steps never say the result is being collected before the last
    round ended, say the next round is being prepared between rounds, and the time left covers the
    rounds still to come: in the first round it is more than that round's own time left and, in its
    median line, at most 1.4 × the time really left + 1 s (the first round's estimate cannot know the
    pauses, nor the long requests of a short round's drain); once a round and a pause between rounds
    have been seen it is held against the time really left in the median line of the later rounds (a
    run on the wall clock of a loaded machine can stall any one moment, which no estimate made before
    it can know, and a round may show only a few lines).

    The bench times this run by the wall clock (``wall_clock``), as it times a real engine: on its own
    clock the simulator would serve a round sent after a pause the load made long as if it had been
    sent on time, running its requests back to back until it caught up, so that round would end in a
    fraction of its wall time, which the page, watching the wall clock, cannot foresee."""
    per_round = 24
    lines, result = _closed_loop(
        sim_server,
        capsys,
        16,
        num_prompts=per_round,
        input_len=256,
        output_len=320,
        max_concurrency=16,
        min_requests=60,
        wall_clock=True,
    )
    rounds = result["rounds"]["count"]
    assert rounds == 3 and result["completed"] == 3 * per_round
    assert [line["rounds"]["number"] for line in lines] == sorted(line["rounds"]["number"] for line in lines)
    assert {line["rounds"]["number"] for line in lines} == {1, 2, 3}
    assert lines[-1]["rounds"]["next"] is False and lines[-1]["done"] == 3 * per_round

    now = [0.0]
    tracked = live.ProfileProgress(per_round, clock=lambda: now[0])
    ended_at = lines[-1]["elapsed_s"]
    steps, said = [], []
    for line in lines:
        now[0] = line["elapsed_s"]
        stored = tracked.line({"phase": "benchmark", **line})
        steps.append((stored["step"], line["rounds"]["number"]))
        view = _view(
            line,
            "closed",
            stored["history"],
            step=stored["step"],
            step_since=stored["step_since"],
            rounds=live.Rounds.read(stored["rounds"]),
        )
        if line is not lines[-1] and view.eta_s is not None:
            alone = live.eta_s(stored["history"], line["total"])  # the current round's requests only
            left = ended_at - line["elapsed_s"]
            said.append((line["rounds"]["number"], view.eta_s, alone, left, view.text(now[0])))
    # collecting only at the very end; each round but the last is followed by the next one's preparation
    assert [step for step, _ in steps].count(live.COLLECTING) == 1 and steps[-1][0] == live.COLLECTING
    assert [number for step, number in steps if step == live.PREPARING] == [1, 2]
    preparing = next(text for number, _, _, _, text in said if "preparing round 2" in text)
    assert "of at least 60 requests measured" in preparing, preparing
    # the time left: the rounds to come counted from the first round on, held to the truth from the second
    first_round = [entry for entry in said if entry[0] == 1]
    assert first_round and any(entry[0] == 2 for entry in said), said
    for _, eta, alone, _, text in first_round:
        assert alone is not None and alone + 1.0 < eta, (eta, alone, text)
    overshoot = [eta - (1.4 * really_left + 1.0) for _, eta, _, really_left, _ in first_round]
    assert np.median(overshoot) <= 0.0, said
    held = [(eta, really_left) for round_number, eta, _, really_left, _ in said if round_number > 1]
    assert _median_line_holds(held), said
