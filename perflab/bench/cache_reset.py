"""Emptying the servers' prefix caches before the measured requests (``--flush-cache``, SGLang's name).

Each server is asked in turn through the endpoints the engines serve for it (checked in their source):

- vLLM 0.32/0.33: ``POST /reset_prefix_cache`` → ``{"success": bool}`` (false while blocks are still
  held, e.g. by running requests). vLLM registers it only when the server runs with
  ``VLLM_SERVER_DEV_MODE=1`` (``vllm/entrypoints/serve/dev/cache/api_router.py``); otherwise it is 404.
- SGLang 0.5.23: ``POST /flush_cache?timeout=S`` → 200, or 400 with its reason when requests are still
  running or waiting after ``S`` seconds (``sglang/srt/entrypoints/http_server.py``).

An endpoint a server does not serve (404/405) is skipped for the next; the result's ``cache_reset``
says what was done and, when nothing could be, why — the benchmark then relies on its fresh prompts
(another seed) alone.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Sequence, Tuple

from perflab.bench.serverapi import ServerUnavailable, server_call

VLLM_RESET = "/reset_prefix_cache"
SGLANG_FLUSH = "/flush_cache"
NOT_SERVED = (
    f"the server serves neither POST {VLLM_RESET} (vLLM registers it only with VLLM_SERVER_DEV_MODE=1) "
    f"nor POST {SGLANG_FLUSH} (SGLang)"
)
NOT_ASKED = "not asked (--flush-cache)"


def _answer(path: str, status: int, body: bytes) -> Tuple[bool, str]:
    """Whether ``path`` emptied the cache, and the server's reason when it did not."""
    text = body.decode("utf-8", "replace").strip()
    if path == VLLM_RESET and status == 200:
        try:
            success = json.loads(body).get("success", True)
        except (ValueError, AttributeError, RecursionError):
            success = True
        return bool(
            success
        ), "" if success else "vLLM answered success: false (blocks still held by requests)"
    if status == 200:
        return True, ""
    return False, f"POST {path} answered HTTP {status}: {text[:200]}"


def reset_one(base_url: str, headers: Dict[str, str], timeout_s: float) -> Tuple[str, str]:
    """``(method, "")`` once the server's prefix cache is empty, else ``("", reason)``."""
    for path in (VLLM_RESET, f"{SGLANG_FLUSH}?timeout={timeout_s:g}"):
        try:
            status, body = server_call(base_url, "POST", path, headers, b"", timeout=timeout_s + 30.0)
        except ServerUnavailable as exc:
            return "", f"POST {path} failed: {exc}"
        if status in (404, 405):
            continue
        done, reason = _answer(path.split("?")[0], status, body)
        return (f"POST {path.split('?')[0]}", "") if done else ("", reason)
    return "", NOT_SERVED


def reset_prefix_caches(
    base_urls: Sequence[str], headers: Dict[str, str], timeout_s: float
) -> Dict[str, Any]:
    """Reset every server's prefix cache; the result's ``cache_reset`` record."""
    methods: List[str] = []
    reasons: List[str] = []
    for base_url in base_urls:
        method, reason = reset_one(base_url, headers, timeout_s)
        if method:
            methods.append(method)
        elif reason not in reasons:
            reasons.append(reason)
    done = len(methods) == len(base_urls)
    return {
        "requested": True,
        "done": done,
        "method": methods[0] if methods else None,
        "reason": None if done else "; ".join(reasons),
    }


def not_requested() -> Dict[str, Any]:
    """The ``cache_reset`` record of a benchmark that did not ask for one."""
    return {"requested": False, "done": False, "method": None, "reason": NOT_ASKED}
