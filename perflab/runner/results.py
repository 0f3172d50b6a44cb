"""Node-level results of a replicated run: the per-replica breakdown and the seeds' "×N" notation.

The benchmark spreads requests over every replica's base URL and measures node totals. For N > 1
replicas the stored result gains ``replicas`` and ``per_replica`` (requests, tokens and throughput per
base URL), and the text block ends with the per-replica figures written as the seeds write them
(``Per-replica total token throughput: 3019.19×2``), after the block's closing line so importers
read the block's node totals unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LABEL_WIDTH = 41
PER_REPLICA_FIGURES = (
    ("Per-replica total token throughput", "total_token_throughput"),
    ("Per-replica output token throughput", "output_throughput"),
    ("Per-replica request throughput", "request_throughput"),
)


def replica_breakdown(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per base URL: completed and failed requests, tokens, and output throughput over the run's duration."""
    base_urls = list(result.get("base_urls") or [])
    rows: dict[str, dict[str, Any]] = {
        url: {"base_url": url, "completed": 0, "failed": 0, "input_tokens": 0, "output_tokens": 0}
        for url in base_urls
    }
    for request in result.get("requests") or []:
        url = request.get("base_url")
        if url not in rows:
            continue
        row = rows[url]
        if request.get("success", not request.get("error")):
            row["completed"] += 1
            row["input_tokens"] += int(request.get("input_tokens") or 0)
            row["output_tokens"] += int(request.get("output_tokens") or 0)
        else:
            row["failed"] += 1
    duration = result.get("duration")
    for row in rows.values():
        row["output_throughput"] = row["output_tokens"] / duration if duration else None
    return list(rows.values())


def with_replicas(result: Mapping[str, Any], replicas: int) -> dict[str, Any]:
    """``result`` with ``replicas`` and, for N > 1, ``per_replica``."""
    extended = dict(result)
    extended["replicas"] = replicas
    if replicas > 1:
        extended["per_replica"] = replica_breakdown(result)
    return extended


def times_replicas(total: float, replicas: int) -> str:
    """A node total written per replica, e.g. ``3019.19×2`` for 6038.38 over two replicas."""
    return f"{total / replicas:.2f}×{replicas}"


def text_block(bench_text: str, result: Mapping[str, Any], replicas: int) -> str:
    """The benchmark's text block, followed for N > 1 replicas by the per-replica "×N" figures."""
    if replicas <= 1:
        return bench_text
    lines = [bench_text.rstrip("\n"), f"{'Replicas:':<{LABEL_WIDTH}}{replicas} (node totals above)"]
    for label, field in PER_REPLICA_FIGURES:
        value = result.get(field)
        if isinstance(value, (int, float)):
            lines.append(f"{label + ':':<{LABEL_WIDTH}}{times_replicas(float(value), replicas)}")
    return "\n".join(lines) + "\n"
