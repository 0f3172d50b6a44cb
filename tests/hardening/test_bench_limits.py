"""``perflab bench`` within bounds: flags that would exhaust memory or run for days are refused naming
the flag, SIGTERM and SIGINT end it in every phase (while its dataset is built, during the warm-up),
and a dataset that is a device or a FIFO is refused at once. Each bench is a real process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from perflab.bench.options import MAX_DATASET_TOKENS, MAX_NUM_PROMPTS, MAX_TOKENS_PER_PROMPT, MAX_WARMUP
from perflab.cli import main
from tests.fixtures.streaming_server import start_server_process

REPO_ROOT = Path(__file__).resolve().parents[2]
NOWHERE = "http://127.0.0.1:9"
EXIT_STOPPED = 3


@pytest.mark.parametrize(
    ("flags", "refusal"),
    [
        (
            ["--num-prompts", str(10**12)],
            f"--num-prompts {10**12} is more than perflab bench takes (100,000 at most)",
        ),
        (["--warmup", str(10**12)], f"--warmup {10**12} is more than perflab bench takes (10,000 at most)"),
        (
            ["--input-len", str(10**9)],
            f"--input-len {10**9} is more than perflab bench takes (1,048,576 at most)",
        ),
        (
            ["--prefix-len", str(10**9)],
            f"--prefix-len {10**9} is more than perflab bench takes (1,048,576 at most)",
        ),
        (
            ["--output-len", str(10**9)],
            f"--output-len {10**9} is more than perflab bench takes (1,048,576 at most)",
        ),
        (
            ["--num-prompts", "100000", "--input-len", "1000"],
            "--num-prompts 100000 and --warmup 0 of up to 1000 tokens (--prefix-len, --input-len, "
            "--range-ratio) make 100,000,000 prompt tokens; perflab bench builds at most 67,108,864",
        ),
        (["--timeout", "nan"], "--timeout must be a positive number of seconds, at most 604800"),
        (["--ramp-up-seconds", "inf"], "--ramp-up-seconds must be between 0 and 604800"),
    ],
)
def test_flags_past_their_bounds_are_refused_naming_the_flag(
    capsys: pytest.CaptureFixture[str], flags: list[str], refusal: str
) -> None:
    code = main(["bench", "--base-url", NOWHERE, "--model", "m", *flags])
    assert code == 2
    assert capsys.readouterr().err == f"perflab bench: error: {refusal}\n"
    assert (MAX_NUM_PROMPTS, MAX_WARMUP, MAX_TOKENS_PER_PROMPT, MAX_DATASET_TOKENS) == (
        100_000,
        10_000,
        1_048_576,
        2**26,
    )


def _bench(*flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "perflab", "bench", "--model", "m", *flags],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _assert_stopped(bench: subprocess.Popen[str], signum: signal.Signals, phase: str) -> None:
    """Send ``signum`` to the bench: it must end at once, saying it stopped in ``phase``."""
    try:
        bench.send_signal(signum)
        out, err = bench.communicate(timeout=60)
    finally:
        bench.kill()
    assert bench.returncode == EXIT_STOPPED, err
    name = signal.Signals(signum).name
    assert f"stopped {phase}, before any measured request: received {name}" in err
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_the_dataset_is_built_ends_the_bench(signum: signal.Signals) -> None:
    # 20 million prompt tokens: seconds of work on any machine, so the signal lands while it is done
    bench = _bench("--base-url", NOWHERE, "--num-prompts", "20000", "--input-len", "1000", "--no-progress")
    _wait_until_it_catches(bench, signal.SIGTERM)  # its handlers go in just before the dataset is built
    _assert_stopped(bench, signum, "while preparing the dataset")


def _wait_until_it_catches(process: subprocess.Popen[str], signum: signal.Signals) -> None:
    """Wait until ``process`` has a handler for ``signum`` (its ``SigCgt`` mask in /proc), however long
    a loaded machine takes to start it."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        status = Path(f"/proc/{process.pid}/status").read_text()
        caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
        if caught >> (signum - 1) & 1:
            return
        time.sleep(0.05)
    raise AssertionError(f"the bench never caught {signum.name} (exit code {process.poll()})")


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A server that answers the first token of a request after 600 s (``/tokenize`` it does not know)."""
    process, port = start_server_process(ttft_ms=600_000)
    yield f"http://127.0.0.1:{port}"
    process.kill()
    process.wait()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_the_warm_up_ends_the_bench(silent_server: str, signum: signal.Signals) -> None:
    bench = _bench(
        "--base-url", silent_server, "--warmup", "4", "--num-prompts", "4", "--input-len", "16",
        "--output-len", "4", "--progress-json",
    )  # fmt: skip
    assert bench.stderr is not None
    # the first progress line is the warm-up's: the measured requests wait until it has ended
    next(line for line in bench.stderr if line.startswith("PERFLAB_PROGRESS"))
    _assert_stopped(bench, signum, "during the warm-up")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["sharegpt", "custom"])
def test_a_dataset_that_is_a_device_or_a_fifo_is_refused_at_once(
    unreadable_inputs: list[tuple[Path, str]], capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    for path, what in unreadable_inputs:
        code = main(
            ["bench", "--base-url", NOWHERE, "--model", "m", "--dataset", kind, "--dataset-path", str(path)]
        )
        assert code == 2
        assert capsys.readouterr().err.endswith(
            f"perflab bench: error: {path}: is {what}, not a regular file\n"
        )


def test_a_profile_past_the_bench_bounds_is_refused_before_a_run_is_stored(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(
        [
            "run",
            "--host",
            "h",
            "--engine",
            "vllm",
            "--model",
            "m",
            "--profile",
            "random:in=64,out=8,n=1000000000000",
        ]
    )
    assert code == 2
    assert capsys.readouterr().err == (
        "error: --profile 'random:in=64,out=8,n=1000000000000': num_prompts: "
        "Input should be less than or equal to 100000\n"
    )
