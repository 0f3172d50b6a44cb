"""``python -m perflab run`` on a simulated local host: results, failures, queueing, Ctrl-C, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import crud
from db.models import Run
from db.session import new_session
from perflab.cli import main
from perflab.runner.evidence import MIN_COMPLETED, marked, unjudged_reason
from perflab.runner.report import run_text
from tests.fixtures.runs import SimHostFactory, free_port_block, perflab_env, sized_count, write_hosts_file

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cli_env(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    hosts = [sim_host("h100", kind="local"), sim_host("a100", kind="local", accelerator="A100")]
    env = perflab_env(runs_db, write_hosts_file(tmp_path / "hosts.yaml", hosts))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def _runs(engine: Engine) -> list[Run]:
    with new_session(engine) as session:
        return crud.get_runs(session, run_ids=[row.id for row in crud.list_runs(session).rows])


def test_a_run_prints_every_profile_as_json(
    cli_env: dict[str, str], runs_db: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port_block(2)
    code = main(
        f"run --host h100 --engine vllm --model Qwen/Qwen3-8B --port {port} --replicas 2 --max-num-seqs 64 "
        "--enable-prefix-caching --env VLLM_LOGGING_LEVEL=INFO --profile random:in=64,out=8,n=10 "
        "--profile short:n=8 --json".split()
    )

    output = json.loads(capsys.readouterr().out)
    assert code == 0, output["failure_message"]
    assert output["status"] == "done" and output["replicas"] == 2
    assert output["knobs"] == "max_num_seqs=64 · enable_prefix_caching ×2"
    assert [result["profile"] for result in output["results"]] == ["random", "short"]
    completed = [result["result"]["completed"] for result in output["results"]]
    assert completed == [
        sized_count(result["result"], n) for result, n in zip(output["results"], (10, 8), strict=True)
    ]
    assert min(completed) >= MIN_COMPLETED
    assert "VLLM_LOGGING_LEVEL=INFO" in output["serve_commands"][0]
    assert "--max-num-seqs 64 --enable-prefix-caching" in output["serve_commands"][0]
    assert output["environment"]["simulated"] is True


def test_the_readmes_example_prints_a_judged_result(
    cli_env: dict[str, str], runs_db: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's ``run … --tp 2 --profile short:n=200``: the benchmark is sized to the floor (on
    local-sim, at real speed, 200 short prompts took 1.1 s: about five rounds), and the text says nothing
    is amiss; a result stored too short (as before sizing) is headed by the reason in the same text."""
    port = str(free_port_block(1))
    code = main(["run", "--host", "h100", "--engine", "vllm", "--model", "Qwen/Qwen3-14B", "--tp", "2",
                 "--port", port, "--profile", "short:n=200"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "Serving Benchmark Result" in out and "Warning" not in out
    (run,) = _runs(runs_db)
    with new_session(runs_db) as session:
        (stored,) = crud.list_profile_results(session, run_id=run.id)
        assert unjudged_reason(stored.result) is None and stored.result["rounds"]["floor_reached"]
        short = marked({"duration": 1.12, "completed": 200})
        crud.add_profile_result(
            session,
            run_id=run.id,
            profile=stored.profile,
            result=short,
            text_block="(block)",
            bench_mode=None,
        )
    assert "Warning: too short to judge: 1.1 s and 200 requests" in run_text(runs_db, run.id)


def test_a_failing_config_prints_the_reason_and_exits_1(
    cli_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["run", "--host", "a100", "--engine", "trtllm", "--model", "Qwen/Qwen3-8B-FP8",
         "--port", str(free_port_block(1)), "--profile", "short:n=5"]
    )  # fmt: skip

    captured = capsys.readouterr()
    assert code == 1
    assert "failed: TensorRT-LLM Qwen/Qwen3-8B-FP8 on a100 (defaults)" in captured.out
    assert "unsupported_hardware: TensorRT-LLM:" in captured.out
    assert "[run " in captured.err and "started engine-0" in captured.err
    (run_id,) = {
        line.split()[1].rstrip("]") for line in captured.err.splitlines() if line.startswith("[run ")
    }
    assert f"[run {run_id}] run page: http://localhost:8501/run?run={run_id}\n" in captured.err
    assert captured.out.endswith(f"Run page: http://localhost:8501/run?run={run_id}\n")


def test_queue_only_stores_the_run(
    cli_env: dict[str, str],
    runs_db: Engine,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PERFLAB_APP_URL", "http://perf.example:8501/lab/")
    code = main(
        ["run", "--host", "h100", "--engine", "sglang", "--model", "m", "--tp", "2"]
        + ["--profile", "short", "--queue"]
    )

    (run,) = _runs(runs_db)
    assert code == 0
    assert capsys.readouterr().out == f"queued run {run.id}: http://perf.example:8501/lab/run?run={run.id}\n"
    assert (run.status, run.engine, run.knobs_summary) == ("queued", "sglang", "tp=2")
    assert run.config["image"] is None


def test_an_image_is_stored_with_the_queued_config(cli_env: dict[str, str], runs_db: Engine) -> None:
    image = "lmsysorg/sglang:v0.5.3"
    code = main(f"run --host h100 --engine sglang --model m --image {image} --profile short --queue".split())

    (run,) = _runs(runs_db)
    assert code == 0 and run.config["image"] == image


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tp", "0"], "error: --tp: Input should be greater than or equal to 1"),
        (["--tp", "two"], "error: --tp 'two': invalid literal for int() with base 10: 'two'"),
        (["--gpu-ids", "0,x"], "error: --gpu-ids '0,x': expected comma-separated integers such as 0,1"),
        (
            ["--gpu-ids", "0", "--tp", "2"],
            "error: config: gpu_ids lists 1 devices but tp×dp×replicas needs 2",
        ),
        (["--env", "NOEQUALS"], "error: --env 'NOEQUALS': expected KEY=VALUE"),
        (["--speculative-config", "{bad"], "error: --speculative-config '{bad': Expecting property name"),
        (["--extra-arg=--port"], "error: vLLM: extra_args repeats --port; perflab sets it itself"),
        (["--performance-mode", "fast"], "error: vLLM: performance_mode"),
        (["--profile", "nope"], "error: --profile 'nope': 'nope' is neither a preset"),
        (["--host", "elsewhere"], "error: hosts.yaml: no host named 'elsewhere' (known hosts: h100, a100)"),
        (["--ready-timeout", "0"], "error: --ready-timeout 0: must be > 0"),
        (["--image=-v"], "error: --image: image '-v' is not an image reference such as vllm/vllm-openai"),
    ],
)
def test_bad_input_is_one_clear_line_and_stores_nothing(
    cli_env: dict[str, str],
    runs_db: Engine,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    base = {"--host": "h100", "--engine": "vllm", "--model": "Qwen/Qwen3-8B", "--profile": "short"}
    for flag in args[::2]:
        base.pop(flag, None)
    argv = ["run", *(part for pair in base.items() for part in pair), *args]

    code = main(argv)

    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(message) and err.count("\n") == 1
    assert _runs(runs_db) == []


def test_ctrl_c_cancels_the_run_and_exits_130(
    runs_db: Engine, sim_host: SimHostFactory, tmp_path: Path
) -> None:
    # A host on the wall clock (its engine still starts quickly), so that the benchmark lasts its 200 s
    # and the signal reaches it while it runs however slow the machine (at the usual time scale it is
    # over in 1 s); cancelled, it ends within a second.
    live = sim_host("live", kind="local", time_scale=1, startup_scale=200)
    env = perflab_env(runs_db, write_hosts_file(tmp_path / "live-hosts.yaml", [live]))
    process = subprocess.Popen(
        [sys.executable, "-m", "perflab"]
        + f"run --host live --engine vllm --model Qwen/Qwen3-8B --port {free_port_block(1)} "
        "--profile random:in=64,out=8,n=2000,rate=10".split(),
        cwd=REPO_ROOT,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 300  # a launch on a busy machine; the benchmark then lasts 200 s
    while not (runs := _runs(runs_db)) or runs[0].status != "benchmarking":
        assert process.poll() is None and time.monotonic() < deadline, [run.status for run in runs]
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)

    (run,) = _runs(runs_db)
    assert process.returncode == 130, (err, run.failure_class, run.failure_message)
    assert run.status == "cancelled"
    assert "cancelling: stopping the engines" in err
    assert out.startswith(f"run {run.id} cancelled: vLLM Qwen/Qwen3-8B on live")


def test_an_unusable_database_is_one_clear_line(
    cli_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PERFLAB_DATABASE_URL", "nosuchdb://somewhere/x")

    code = main(["run", "--host", "h100", "--engine", "vllm", "--model", "m", "--profile", "short"])

    assert code == 2
    assert capsys.readouterr().err == (
        "error: cannot use the database nosuchdb://somewhere/x: "
        "Can't load plugin: sqlalchemy.dialects:nosuchdb\n"
    )
