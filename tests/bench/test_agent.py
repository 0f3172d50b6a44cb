"""The agent zipapp: a deterministic build that runs ``bench`` and ``sim`` on a bare python3 ≥ 3.9."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from perflab.agent import build_agent
from tests.fixtures.streaming_server import Script

PYENV_39 = Path("/root/.pyenv/versions/3.9.18/bin/python3.9")
DATA = Path(__file__).resolve().parents[1] / "data" / "bench"
SYSTEM_PYTHON = Path("/usr/bin/python3")


def python39():
    """A working Python 3.9 interpreter (pyenv's, or one on PATH); skip when the machine has none."""
    for candidate in (str(PYENV_39), shutil.which("python3.9")):
        if (
            candidate
            and Path(candidate).exists()
            and subprocess.run(
                [candidate, "-c", "import sys; assert sys.version_info[:2] == (3, 9)"], capture_output=True
            ).returncode
            == 0
        ):
            return candidate
    pytest.skip("no Python 3.9 interpreter on this machine")


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    return build_agent(tmp_path_factory.mktemp("agent"))


@pytest.fixture(scope="module")
def bare_python39(tmp_path_factory):
    """A fresh Python 3.9 virtualenv without pip and with an empty site-packages."""
    env = tmp_path_factory.mktemp("py39") / "venv"
    subprocess.run([python39(), "-m", "venv", "--without-pip", str(env)], check=True)
    interpreter = env / "bin" / "python"
    probe = subprocess.run(
        [str(interpreter), "-c", "import importlib.util as u; print(u.find_spec('httpx'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.strip() == "None"
    return interpreter


def test_build_is_deterministic_and_content_addressed(agent, tmp_path):
    again = build_agent(tmp_path / "other")
    assert again.name == agent.name and again.read_bytes() == agent.read_bytes()
    assert re.fullmatch(r"perflab-agent-[0-9a-f]{16}\.pyz", agent.name)
    assert build_agent(agent.parent) == agent
    assert agent.read_bytes().startswith(b"#!/usr/bin/env python3\n")
    assert os.access(agent, os.X_OK)


def test_archive_holds_bench_sim_and_only_the_needed_dependencies(agent):
    names = zipfile.ZipFile(agent).namelist()
    for required in (
        "__main__.py",
        "perflab/__init__.py",
        "perflab/cli.py",
        "perflab/bench/cli.py",
        "perflab/bench/datasets/sharegpt.py",
        "perflab/sim/cli.py",
        "httpx/__init__.py",
        "idna/__init__.py",
        "licenses/httpx/LICENSE.md",
    ):
        assert required in names
    assert not [name for name in names if name.endswith(".pyc") or "__pycache__" in name]
    assert not [name for name in names if name.split("/")[0] in ("httpcore", "anyio", "h11", "certifi")]
    perflab_files = [name for name in names if name.startswith("perflab/")]
    assert all(
        name in ("perflab/__init__.py", "perflab/cli.py")
        or name.startswith(("perflab/bench/", "perflab/sim/"))
        for name in perflab_files
    )


def run_agent(interpreter, agent, *argv, timeout=120):
    return subprocess.run(
        [str(interpreter), str(agent), *argv], capture_output=True, text=True, timeout=timeout, cwd="/"
    )


def bench_against(interpreter, agent, base_url, tmp_path, *dataset_args, model="scripted-model"):
    result_file = tmp_path / "result.json"
    argv = [
        "bench",
        "--base-url",
        base_url,
        "--model",
        model,
        "--num-prompts",
        "16",
        "--max-concurrency",
        "4",
    ]
    argv += list(dataset_args) or ["--input-len", "16"]
    argv += ["--output-len", "6", "--save-result", str(result_file), "--progress-json"]
    completed = run_agent(interpreter, agent, *argv)
    assert completed.returncode == 0, completed.stderr
    assert "Serving Benchmark Result" in completed.stdout
    assert "PERFLAB_PROGRESS" in completed.stderr
    return json.loads(result_file.read_text())


@pytest.mark.parametrize(
    "dataset_args, output_tokens",
    [
        ((), 16 * 6),
        (("--dataset", "sharegpt", "--dataset-path", str(DATA / "sharegpt_small.json")), 16 * 6),
        # prompts.csv gives output_len 32, none (→ --output-len 6) and 5, reused in that order
        (("--dataset", "custom", "--dataset-path", str(DATA / "prompts.csv")), 5 * (32 + 6 + 5) + 32),
    ],
    ids=["random", "sharegpt", "custom"],
)
def test_bench_runs_on_bare_python39(
    agent, bare_python39, scripted_server, tmp_path, dataset_args, output_tokens
):
    server = scripted_server(Script(ttft_s=0.01, itl_s=0.002))
    result = bench_against(bare_python39, agent, server.base_url, tmp_path, *dataset_args)
    assert (result["completed"], result["failed"], result["total_output_tokens"]) == (16, 0, output_tokens)
    assert len(server.completions) == 16


@pytest.mark.skipif(not SYSTEM_PYTHON.exists(), reason="no system python3")
def test_bench_runs_on_the_system_python3(agent, scripted_server, tmp_path):
    server = scripted_server(Script(ttft_s=0.01, itl_s=0.002))
    result = bench_against(SYSTEM_PYTHON, agent, server.base_url, tmp_path)
    assert (result["completed"], result["failed"]) == (16, 0)


def test_sim_and_bench_from_the_agent_on_python39(agent, bare_python39, tmp_path):
    log_path = tmp_path / "sim.log"
    with open(log_path, "wb") as log:
        sim = subprocess.Popen(
            [
                str(bare_python39),
                str(agent),
                "sim",
                "serve",
                "--port",
                "0",
                "--model",
                "sim-model",
                "--fixed-ttft-ms",
                "100",
                "--fixed-itl-ms",
                "2",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        match = None
        while match is None and time.monotonic() < deadline and sim.poll() is None:
            time.sleep(0.05)
            match = re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", log_path.read_text())
        assert match, log_path.read_text()
        result = bench_against(bare_python39, agent, match.group(1), tmp_path, model="sim-model")
        assert (result["completed"], result["failed"]) == (16, 0)
        # The simulator's injected 100 ms, measured (it may write up to 0.1 ms early); how much later the
        # tokens come depends on the machine's load.
        assert 99.0 <= result["mean_ttft_ms"] <= result["mean_e2el_ms"]
    finally:
        sim.terminate()
        sim.wait(10)


def test_agent_refuses_other_commands(agent):
    completed = run_agent(sys.executable, agent, "worker")
    assert completed.returncode == 2 and "usage:" in completed.stderr
