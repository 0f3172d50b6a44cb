"""The real vLLM fixture: the CPU build reports its version and serves the tiny model over the OpenAI API."""

from __future__ import annotations

import json
import subprocess
import urllib.request

import pytest

from tests.fixtures.real_vllm import RealVllmServer, require_real_vllm, vllm_bin

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(900)]


def test_version_is_reported_with_the_cpu_suffix() -> None:
    require_real_vllm()
    result = subprocess.run([str(vllm_bin()), "--version"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "0.32.0+cpu"


def test_serves_the_tiny_model_with_its_chat_template(real_vllm_server: RealVllmServer) -> None:
    with urllib.request.urlopen(real_vllm_server.base_url + "/v1/models", timeout=30) as response:
        models = json.load(response)
    assert [model["id"] for model in models["data"]] == ["tiny"]
    body = json.dumps(
        {
            "model": "tiny",
            "messages": [{"role": "user", "content": "hello"}],
            "max_tokens": 8,
            "stream": False,
        }
    ).encode()
    request = urllib.request.Request(
        real_vllm_server.base_url + "/v1/chat/completions",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        answer = json.load(response)
    assert answer["usage"]["completion_tokens"] >= 1
    assert answer["usage"]["prompt_tokens"] > 1
