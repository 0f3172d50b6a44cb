"""perflab.sim ships inside the agent zipapp to hosts with only python3 ≥ 3.9 and no other perflab package."""

from __future__ import annotations

import ast
import asyncio
import os
import subprocess
import time

import pytest

from tests.sim.conftest import REPO_ROOT, free_port
from tests.sim.sse_client import chat_payload, request

SIM_ROOT = REPO_ROOT / "perflab" / "sim"
PYTHON39 = "/root/.pyenv/versions/3.9.18/bin/python3.9"
SOURCES = sorted(SIM_ROOT.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(SIM_ROOT)))
def test_parses_as_python39_with_stdlib_and_sim_imports_only(path):
    source = path.read_text()
    tree = ast.parse(source, feature_version=(3, 9))
    assert source.startswith('"""'), "every module starts with a docstring"
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            if name.startswith("perflab"):
                assert name.startswith("perflab.sim"), f"{path.name} imports {name}"
            else:
                assert name.split(".")[0] in __import__("sys").stdlib_module_names | {"tokenizers"}, name
    assert (
        any(isinstance(node, ast.ImportFrom) and node.module == "__future__" for node in tree.body)
        or path.name == "__init__.py"
        and len(tree.body) == 1
    )


@pytest.mark.skipif(not os.path.exists(PYTHON39), reason="no Python 3.9 interpreter on this machine")
def test_sim_serves_under_python39(tmp_path):
    log = tmp_path / "sim.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                PYTHON39,
                "-m",
                "perflab",
                "sim",
                "serve",
                "--port",
                "0",
                "--model",
                "m",
                "--fixed-ttft-ms",
                "5",
                "--fixed-itl-ms",
                "2",
            ],
            cwd=REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        port = None
        for _ in range(500):
            text = log.read_text()
            if "Uvicorn running on" in text:
                port = int(text.split("http://127.0.0.1:")[1].split(" ")[0])
                break
            assert process.poll() is None, text
            time.sleep(0.02)
        result = asyncio.run(
            request(f"http://127.0.0.1:{port}", "/v1/chat/completions", chat_payload("m", "hi", 6))
        )
        assert result.usage["completion_tokens"] == 6
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0


@pytest.mark.skipif(not os.path.exists(PYTHON39), reason="no Python 3.9 interpreter on this machine")
def test_engine_and_smi_shims_run_under_python39(sim_host):
    host = sim_host("H100", 2, python=PYTHON39)
    assert "python3.9" in (host.home / "bin" / "vllm").read_text()
    port = free_port()
    engine = host.start(["vllm", "serve", "Qwen/Qwen3-8B", "--host", "127.0.0.1", "--port", str(port)])
    engine.wait_for(r"Application startup complete\.")
    payload = chat_payload("Qwen/Qwen3-8B", "hello from an old python", 5)
    result = asyncio.run(request(f"http://127.0.0.1:{port}", "/v1/chat/completions", payload))
    assert result.usage["completion_tokens"] == 5
    used = host.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"]).stdout.split()
    assert int(used[0]) > 0 and used[1] == "0"
    assert engine.terminate() == 0
