"""Partial benchmark results: the bench stopped by a signal, or seeing its server go away, writes what
it measured (marked partial, with the reason) and exits 3; a study never takes a partial result for
a measurement."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from db.models import ProfileResult, Run
from perflab.profiles import BenchmarkProfile
from perflab.study.measure import RetryPolicy, RunOutcome, outcomes
from perflab.study.types import Measurement
from tests.fixtures.sim_server import SimServerFactory

REPO_ROOT = Path(__file__).resolve().parents[2]
EXIT_STOPPED = 3
PROMPTS = 200


def _bench(base_url: str, result: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "perflab", "bench", "--base-url", base_url, "--model", "sim-model",
         "--input-len", "16", "--output-len", "8", "--num-prompts", str(PROMPTS), "--request-rate", "20",
         "--progress-json", "--save-result", str(result), *extra],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def _wait_for_progress(bench: subprocess.Popen[str], done: int) -> None:
    """Read the bench's progress lines until ``done`` requests ended."""
    assert bench.stderr is not None
    for line in bench.stderr:
        if line.startswith("PERFLAB_PROGRESS ") and json.loads(line.split(" ", 1)[1])["done"] >= done:
            return
    raise AssertionError(f"the bench ended before {done} requests did")


def _check_partial(result_file: Path, reason: str) -> dict:
    result = json.loads(result_file.read_text())
    assert result["partial"] is True and reason in result["partial_reason"]
    assert 0 < len(result["requests"]) == result["completed"] + result["failed"] < PROMPTS
    assert result["requests_sent"] - result["requests_unfinished"] == len(result["requests"])
    assert result["num_prompts"] == PROMPTS and result["duration"] > 0
    return result


def test_sigterm_writes_the_requests_measured_so_far(sim_server: SimServerFactory, tmp_path: Path) -> None:
    base_url = sim_server(fixed_ttft_ms=10, fixed_itl_ms=20)
    result_file = tmp_path / "result.json"
    bench = _bench(base_url, result_file, "--result-text", str(tmp_path / "result.txt"))
    _wait_for_progress(bench, done=5)
    bench.send_signal(signal.SIGTERM)
    out, err = bench.communicate(timeout=30)

    assert bench.returncode == EXIT_STOPPED, err
    result = _check_partial(result_file, "received SIGTERM")
    assert result["failed"] == 0
    assert "perflab bench: stopped early: received SIGTERM" in err
    text = (tmp_path / "result.txt").read_text()
    assert "Serving Benchmark Result" in text and "Partial result:" in text and "Partial result:" in out


def test_a_server_going_away_stops_the_bench_with_its_records(
    sim_server: SimServerFactory, tmp_path: Path
) -> None:
    base_url = sim_server(fixed_ttft_ms=10, fixed_itl_ms=20)
    result_file = tmp_path / "result.json"
    bench = _bench(base_url, result_file)
    _wait_for_progress(bench, done=5)
    os.kill(sim_server.pid(base_url), signal.SIGKILL)
    _, err = bench.communicate(timeout=60)

    assert bench.returncode == EXIT_STOPPED, err
    result = _check_partial(result_file, f"the server at {base_url} went away mid-run")
    # It stopped instead of sending the rest of its requests into the void.
    assert result["requests_sent"] < PROMPTS
    assert result["failure_reasons"].get("connect_error", 0) >= 1


def test_stopped_before_any_request_ended_writes_nothing(
    sim_server: SimServerFactory, tmp_path: Path
) -> None:
    base_url = sim_server(fixed_ttft_ms=30000, fixed_itl_ms=20)
    result_file = tmp_path / "result.json"
    bench = _bench(base_url, result_file)
    assert bench.stderr is not None
    assert bench.stderr.readline().startswith("PERFLAB_PROGRESS ")
    bench.send_signal(signal.SIGINT)
    _, err = bench.communicate(timeout=30)

    assert bench.returncode == EXIT_STOPPED
    assert "stopped before any measured request ended: received SIGINT" in err
    assert "Traceback" not in err and not result_file.exists()


def test_a_partial_result_is_never_a_study_measurement() -> None:
    tuning = BenchmarkProfile(
        name="tune", title="Tune", dataset="random", input_len=64, output_len=8, num_prompts=100
    )
    stopped_at = datetime(2026, 1, 1, tzinfo=UTC)
    interrupted = Run(
        id=1,
        status="failed",
        failure_class="worker_restarted",
        config_fingerprint="abc",
        profiles=[],
        finished_at=stopped_at,
    )
    partial = ProfileResult(
        id=1,
        run_id=1,
        profile_name="tune",
        profile={},
        result={"completed": 40, "failed": 0, "num_prompts": 100, "output_throughput": 900.0,
                "total_token_throughput": 1000.0, "partial": True, "partial_reason": "received SIGTERM"},
    )  # fmt: skip
    retry = RetryPolicy(delays_s=(30.0,))

    def outcome_at(now: datetime) -> RunOutcome:
        found = outcomes(
            [interrupted], {1: [partial]}, tuning=tuning, objective="total_token_throughput", slos={},
            retry=retry, now=now,
        )  # fmt: skip
        return found["abc"]

    # The configuration is run again rather than judged on 40 of its 100 requests: the worker's death
    # is the infrastructure's failure, so it waits out the backoff, then gets a new run.
    waiting = outcome_at(stopped_at + timedelta(seconds=10))
    assert waiting.score is None
    assert waiting.measurement == Measurement(
        "pending",
        1,
        error="worker_restarted: the worker died under the run",
        retry_at=stopped_at + timedelta(seconds=30),
    )
    again = outcome_at(stopped_at + timedelta(seconds=31))
    assert again.score is None and again.measurement is None
