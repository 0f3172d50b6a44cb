"""One call to a server outside the measured requests: its metrics, a cache reset, its model list.

``server_call(base_url, method, path, headers)`` sends one request over a fresh connection and
returns the status and at most ``MAX_ANSWER_BYTES`` of the body; ``ServerUnavailable`` says why there
was no answer (connection refused, timeout, an answer past the bound), without the URL, which the
caller names.
"""

from __future__ import annotations

import http.client
import urllib.parse
from typing import Dict, Optional, Tuple

# The most of an answer read (a /metrics page is tens of KiB; a 1 M-token /tokenize answer ~8 MiB).
MAX_ANSWER_BYTES = 16 * 1024 * 1024
CALL_TIMEOUT_S = 30.0


class ServerUnavailable(Exception):
    """The server gave no usable answer."""


def server_call(
    base_url: str,
    method: str,
    path: str,
    headers: Dict[str, str],
    body: Optional[bytes] = None,
    timeout: float = CALL_TIMEOUT_S,
) -> Tuple[int, bytes]:
    """``(status, body)`` of ``method path`` on the server at ``base_url``."""
    parts = urllib.parse.urlsplit(base_url)
    secure = parts.scheme == "https"
    factory = http.client.HTTPSConnection if secure else http.client.HTTPConnection
    conn = factory(parts.hostname or "127.0.0.1", parts.port or (443 if secure else 80), timeout=timeout)
    try:
        conn.request(method, parts.path.rstrip("/") + path, body, headers)
        response = conn.getresponse()
        data = response.read(MAX_ANSWER_BYTES + 1)
    except (OSError, http.client.HTTPException) as exc:
        raise ServerUnavailable(str(exc) or type(exc).__name__) from exc
    finally:
        conn.close()
    if len(data) > MAX_ANSWER_BYTES:
        raise ServerUnavailable(f"answer longer than {MAX_ANSWER_BYTES // (1024 * 1024)} MiB")
    return response.status, data
