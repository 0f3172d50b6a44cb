"""Per-turn and per-session figures of a session workload, from its request records.

- ``ttft_by_turn_ms``: for each turn index (0 = the first), how many of its requests succeeded and
  their mean, median, p90 and p99 TTFT in ms — how time to first token grows (or, with a prefix
  cache, does not) as the history grows.
- ``sessions``: how many were sent and completed (every turn succeeded), mean turns sent per session,
  the duration of completed sessions (first turn sent → last token of the last turn; mean, median,
  p90, p99 in ms, think times included), and, with goodput SLOs, ``goodput`` — completed sessions per
  second of the run whose every turn met every SLO (``metrics.meets_slos``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from perflab.bench.metrics import meets_slos, percentile
from perflab.bench.records import RequestRecord


def _stats_ms(values_s: Sequence[float]) -> Dict[str, float]:
    ordered = sorted(values_s)
    if not ordered:
        return {"mean": 0.0, "median": 0.0, "p90": 0.0, "p99": 0.0}
    return {
        "mean": 1000.0 * sum(ordered) / len(ordered),
        "median": 1000.0 * percentile(ordered, 50.0),
        "p90": 1000.0 * percentile(ordered, 90.0),
        "p99": 1000.0 * percentile(ordered, 99.0),
    }


def ttft_by_turn(records: Sequence[RequestRecord]) -> List[Dict[str, Any]]:
    """TTFT statistics of each turn index over the successful requests."""
    by_turn: Dict[int, List[float]] = {}
    for record in records:
        if record.success and record.turn is not None and record.ttft_s is not None:
            by_turn.setdefault(record.turn, []).append(record.ttft_s)
    return [
        {
            "turn": turn,
            "requests": len(values),
            **{f"{name}_ttft_ms": value for name, value in _stats_ms(values).items()},
        }
        for turn, values in sorted(by_turn.items())
    ]


def session_summary(
    records: Sequence[RequestRecord],
    planned_turns: Mapping[int, int],
    duration_s: float,
    slos_ms: Optional[Dict[str, float]],
) -> Dict[str, Any]:
    """The ``sessions`` figures; ``planned_turns`` gives each sent session's number of turns."""
    turns: Dict[int, List[RequestRecord]] = {}
    for record in records:
        if record.session is not None:
            turns.setdefault(record.session, []).append(record)
    complete = {
        session: sent
        for session, sent in turns.items()
        if len(sent) == planned_turns.get(session, -1) and all(record.success for record in sent)
    }
    durations = [
        max(record.end_s for record in sent) - min(record.start_s for record in sent)
        for sent in complete.values()
    ]
    summary: Dict[str, Any] = {
        "count": len(turns),
        "completed": len(complete),
        "mean_turns": sum(len(sent) for sent in turns.values()) / len(turns) if turns else 0.0,
        "duration_ms": _stats_ms(durations),
        "goodput": None,
    }
    if slos_ms:
        good = sum(1 for sent in complete.values() if all(meets_slos(record, slos_ms) for record in sent))
        summary["goodput"] = good / duration_s if duration_s > 0 else 0.0
    return summary
