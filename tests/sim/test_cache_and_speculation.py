"""The simulator's prefix cache and speculative decoding as the engines expose them: the cache resets
(vLLM's dev-mode ``POST /reset_prefix_cache``, SGLang's ``/flush_cache``), the counters the bench reads,
and a KV cache whose size decides how much of the shared prefixes stays cached."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time

from perflab.sim.deployment import Knobs, resolve_deployment
from perflab.sim.hardware import find_accelerator
from perflab.sim.offline import RequestSpec, simulate
from tests.sim.sse_client import chat_payload, request


def _call(url: str, path: str, method: str = "POST", payload: object = None) -> tuple[int, bytes]:
    result = asyncio.run(request(url, path, payload, method))
    return result.status, result.body


def _metric(url: str, *names: str) -> float:
    """The sum of every sample of the ``names`` metrics, read from one ``/metrics`` answer."""
    text = _call(url, "/metrics", "GET")[1].decode()
    return sum(
        float(value)
        for name in names
        for value in re.findall(rf"^{re.escape(name)}{{[^}}]*}} (\S+)$", text, re.M)
    )


RUNNING_METRICS = ("vllm:num_requests_running", "sglang:num_running_reqs")


def _while_streaming(url: str, probe):
    """``probe()`` called while a long request streams from ``url``: once the engine's own gauge
    counts it running, however long a loaded machine takes to get it there."""

    def stream() -> None:
        asyncio.run(request(url, "/v1/chat/completions", chat_payload("sim-model", "hi", 100)))

    thread = threading.Thread(target=stream)
    thread.start()
    deadline = time.monotonic() + 30
    while _metric(url, *RUNNING_METRICS) < 1:
        assert thread.is_alive() and time.monotonic() < deadline, "the request never ran"
        time.sleep(0.02)
    try:
        return probe()
    finally:
        thread.join(20)


def test_vllm_serves_its_reset_only_in_dev_mode(sim_server, monkeypatch) -> None:
    plain = sim_server(fixed_ttft_ms=300, fixed_itl_ms=20)
    assert _call(plain, "/reset_prefix_cache")[0] == 404
    monkeypatch.setenv("VLLM_SERVER_DEV_MODE", "1")
    dev = sim_server(fixed_ttft_ms=300, fixed_itl_ms=20)
    assert _call(dev, "/reset_prefix_cache") == (200, b'{"success": true}')
    assert _call(dev, "/reset_prefix_cache", "GET")[0] == 405
    busy = _while_streaming(dev, lambda: _call(dev, "/reset_prefix_cache"))
    assert busy == (200, b'{"success": false}')  # blocks still held by a running request


def test_sglang_flushes_when_idle_and_waits_up_to_its_timeout(sim_server) -> None:
    url = sim_server(fixed_ttft_ms=300, fixed_itl_ms=20, engine="sglang")
    status, body = _call(url, "/flush_cache")
    assert status == 200 and body.startswith(b"Cache flushed.\n")
    assert _call(url, "/flush_cache", "GET")[0] == 200
    assert _while_streaming(url, lambda: _call(url, "/flush_cache?timeout=0")) == (
        400,
        b"Flush cache failed.\n",
    )
    assert _while_streaming(url, lambda: _call(url, "/flush_cache?timeout=30"))[0] == 200  # once idle
    assert _call(url, "/flush_cache?timeout=-1")[0] == 422


def test_cached_tokens_and_speculative_counters_under_the_engines_names(sim_server) -> None:
    sglang = sim_server(engine="sglang", model="Qwen/Qwen3-8B", accelerator="H100", time_scale=50)
    payload = chat_payload("Qwen/Qwen3-8B", " ".join(["shared"] * 200), 4)
    for _ in range(2):
        assert _call(sglang, "/v1/chat/completions", payload=payload)[0] == 200
    assert _metric(sglang, "sglang:cached_tokens_total") > 0
    assert _metric(sglang, "sglang:prompt_tokens_total") == 400
    plain = sim_server(model="Qwen/Qwen3-8B", accelerator="H100", time_scale=50)
    assert "vllm:spec_decode" not in _call(plain, "/metrics", "GET")[1].decode()
    spec = sim_server(
        model="Qwen/Qwen3-8B",
        accelerator="H100",
        time_scale=50,
        speculative_config=json.dumps({"method": "eagle3", "num_speculative_tokens": 3}),
    )
    assert _call(spec, "/v1/chat/completions", payload=chat_payload("Qwen/Qwen3-8B", "draft", 64))[0] == 200
    drafts = _metric(spec, "vllm:spec_decode_num_drafts_total")
    accepted = _metric(spec, "vllm:spec_decode_num_accepted_tokens_total")
    per_position = [
        float(value)
        for value in re.findall(
            r'^vllm:spec_decode_num_accepted_tokens_per_pos_total\{position="\d"[^}]*} (\S+)$',
            _call(spec, "/metrics", "GET")[1].decode(),
            re.M,
        )
    ]
    assert drafts > 0 and _metric(spec, "vllm:spec_decode_num_draft_tokens_total") <= 3 * drafts
    assert len(per_position) == 3 and sum(per_position) == accepted
    assert per_position == sorted(per_position, reverse=True)  # a later draft is kept only after the earlier


def _hit_rate(mem_fraction: float) -> float:
    """Hit rate of 48 prompts over 16 shared 6k-token prefixes, sent in three waves."""
    dep = resolve_deployment(
        "vllm", _knobs(mem_fraction=mem_fraction, max_model_len=8192), find_accelerator("H100")
    )
    requests = [
        RequestSpec(2.0 * wave, 6400, 8, [1000 * group + token for token in range(6000)] + list(range(400)))
        for wave in range(3)
        for group in range(16)
    ]
    return simulate(dep, requests)[1].prefix_hit_rate


def _knobs(**values: object) -> Knobs:
    knobs = Knobs("Qwen/Qwen3-8B")
    for name, value in values.items():
        setattr(knobs, name, value)
    return knobs


def test_a_smaller_kv_cache_keeps_less_of_the_shared_prefixes() -> None:
    roomy, tight = _hit_rate(0.9), _hit_rate(0.3)
    assert roomy > 0.6  # the second and third waves find their prefixes
    assert tight < roomy - 0.2
