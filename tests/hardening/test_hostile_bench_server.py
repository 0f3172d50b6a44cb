"""``perflab bench`` against hostile servers, each a real process on loopback: every request ends with
a bounded failure naming the bound, the bench process stays below 600 MB and writes its result."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.fixtures.bounded import RSS_LIMIT_KB, run_measured

pytestmark = pytest.mark.timeout(120)


def bench_against(base_url: str, tmp_path: Path, *extra: str) -> tuple[dict, str, int]:
    """Run ``python -m perflab bench`` to the end; (result JSON, output, peak RSS in KiB)."""
    result_file = tmp_path / "result.json"
    argv = [
        sys.executable, "-m", "perflab", "bench", "--base-url", base_url, "--model", "m",
        "--num-prompts", "2", "--input-len", "4", "--output-len", "8",
        "--save-result", str(result_file), "--no-progress", *extra,
    ]  # fmt: skip
    _, peak_kb = run_measured(argv, tmp_path / "out.txt")
    output = (tmp_path / "out.txt").read_text()
    assert "Traceback" not in output, output[-2000:]
    return json.loads(result_file.read_text()), output, peak_kb


@pytest.mark.parametrize(
    ("mode", "reason", "message"),
    [
        ("endless_error", "http_500", "HTTP 500"),
        ("endless_event", "invalid_response", "one SSE event exceeded 8 MiB without ending"),
        ("deep_json", "invalid_response", "nested deeper than the JSON parser's limit"),
        ("endless_stream", "invalid_response", "more than 32 text chunks"),
        ("huge_usage", "invalid_response", "usage completion_tokens 1.000e+30 is outside [0, 10000000]"),
        ("negative_usage", "invalid_response", "usage completion_tokens -500 is outside [0, 10000000]"),
    ],
)
def test_each_request_ends_bounded_with_a_reason(hostile, tmp_path, mode, reason, message):
    result, output, peak_kb = bench_against(hostile(mode), tmp_path)
    assert result["completed"] == 0 and result["failure_reasons"] == {reason: 2}
    errors = [record["error"] for record in result["requests"]]
    assert all(message in error for error in errors), errors
    assert peak_kb < RSS_LIMIT_KB
    assert "Output token throughput" in output
