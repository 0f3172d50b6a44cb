"""Where a run keeps its benchmarks: each result as it ends, and the one in flight when the run ends
early.

Before a benchmark starts, ``run.remote_state["bench"]`` names it (process name, profile and sweep
point); it is removed once its result is stored. When the run ends early — cancelled, failed, the
connection dropped, the worker or the app killed — the recorded bench is stopped with the engines (it
then writes the result over the requests that had ended, marked ``partial``) and
:func:`store_in_flight` stores the result it left: that partial one, or the complete one of a bench
that had finished on the host before its result was read back. A result already stored (the runner
stored it and died before dropping the record) is not stored twice.
"""

from __future__ import annotations

import json
import logging
import math
import posixpath
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from perflab.bench.progress import CLOCK_KEY
from perflab.bench.report import CLOCK_WINDOW_KEY, nothing_sent
from perflab.cost.figures import WINDOW_KEY
from perflab.profiles import BenchmarkProfile
from perflab.remote.bench import BenchProcess, find_bench
from perflab.runner import evidence, results
from perflab.runner.store import RunStore, point_key
from perflab.transport.base import Transport
from perflab.transport.errors import FileTooLarge

logger = logging.getLogger(__name__)

BENCH_KEY = "bench"


def profile_json(profile: BenchmarkProfile) -> dict[str, Any]:
    """The profile as stored (an infinite request rate as ``"Infinity"``, valid in any JSON column)."""
    return json.loads(profile.model_dump_json())


def sweep_label(profile: BenchmarkProfile, point_index: int) -> dict[str, Any] | None:
    """Which point of the profile's sweep this is (None without a sweep)."""
    if profile.sweep is None:
        return None
    return {
        "kind": profile.sweep.kind,
        "value": profile.sweep.values[point_index],
        "index": point_index,
        "points": len(profile.sweep.values),
    }


def bench_entry(name: str, profile_index: int, point_index: int) -> dict[str, Any]:
    """The ``remote_state["bench"]`` record of the benchmark about to start."""
    return {"name": name, "profile_index": profile_index, "point_index": point_index}


def recorded_bench(transport: Transport, remote_state: Mapping[str, Any]) -> BenchProcess | None:
    """The benchmark the record says is in flight, if it was started (its pid file exists on the host,
    or on this machine for a forwarded one)."""
    entry = remote_state.get(BENCH_KEY)
    if not entry:
        return None
    return find_bench(transport, remote_state["run_key"], entry["name"])


def _seconds(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


class BenchClock:
    """Where the bench process's clock stands on the samples' clock (``sample_clock``), from its
    progress lines: each carries ``clock_s``, the bench's clock when it was written, and is stamped on
    the samples' clock when it arrives. Arrival is never before writing, so the smallest difference is
    the offset, late by the quickest line's transit (milliseconds), never by a slow one's."""

    def __init__(self, sample_clock: Callable[[], float]) -> None:
        self._sample_clock = sample_clock
        self.offset: float | None = None

    def seen(self, progress: Mapping[str, Any]) -> None:
        """Stamp one progress line as it arrives."""
        arrived = self._sample_clock()
        written = _seconds(progress.get(CLOCK_KEY))
        if written is not None:
            offset = arrived - written
            self.offset = offset if self.offset is None else min(self.offset, offset)


def with_sample_window(result: Mapping[str, Any], offset: float | None) -> Mapping[str, Any]:
    """The result with its benchmark window on the samples' clock, ``sample_window_s: [start, end]``:
    the bench's own first send and last receive (``bench_clock_window_s``, on its clock) moved by
    ``offset`` (:class:`BenchClock`). Without either there is no window, and no energy figure."""
    window = result.get(CLOCK_WINDOW_KEY)
    if offset is None or not isinstance(window, (list, tuple)) or len(window) != 2:
        return result
    start, end = (_seconds(edge) for edge in window)
    if start is None or end is None or not end > start:
        return result
    return {**result, WINDOW_KEY: [round(start + offset, 3), round(end + offset, 3)]}


def store_bench_result(
    store: RunStore,
    *,
    point: BenchmarkProfile,
    sweep_point: Mapping[str, Any] | None,
    result: Mapping[str, Any],
    bench_text: str,
    bench_mode: str | None,
    replicas: int,
    time_scale: float = 1.0,
) -> dict[str, Any]:
    """Store one benchmark's result (node totals with the per-replica breakdown, marked when it is too
    short to judge on a host running ``time_scale`` times faster than real time); returns it."""
    stored = evidence.marked(results.with_replicas(result, replicas), time_scale)
    store.add_result(
        profile=profile_json(point),
        result=stored,
        text_block=results.text_block(bench_text, stored, replicas),
        bench_mode=bench_mode,
        sweep_point=sweep_point,
    )
    return stored


def _read_json(transport: Transport, path: str) -> dict[str, Any] | None:
    try:
        value = json.loads(transport.read_text(path))
    except FileNotFoundError:
        return None
    except (ValueError, FileTooLarge) as exc:
        logger.warning("%s on host '%s' is not a benchmark result: %s", path, transport.host.name, exc)
        return None
    return value if isinstance(value, dict) else None


def _read_text(transport: Transport, path: str) -> str:
    try:
        return transport.read_text(path)
    except (FileNotFoundError, FileTooLarge):
        return ""


def store_in_flight(
    transport: Transport, store: RunStore, remote_state: dict[str, Any], profiles: Sequence[Mapping[str, Any]]
) -> bool:
    """Store the result the recorded bench left in its run dir (on the host, or on this machine when it
    was forwarded; call after it was stopped) — partial when it was stopped, complete when it had
    finished before its result was read back — and drop the record; False when there was no bench in
    flight, it left no result (or one of requests none of which reached the engine: the bench failed),
    or its result is stored already."""
    bench = recorded_bench(transport, remote_state)
    if bench is None:
        return False
    entry = remote_state[BENCH_KEY]
    where, directory = bench.transport, bench.process.run_dir
    result = _read_json(where, posixpath.join(directory, f"{entry['name']}.json"))
    if result is None or (not result.get("partial") and nothing_sent(result)):
        return False
    profile = BenchmarkProfile.model_validate(profiles[entry["profile_index"]])
    point_index = int(entry["point_index"])
    if point_key(profile.name, sweep_label(profile, point_index)) in store.stored_points():
        remote_state.pop(BENCH_KEY)
        return False
    store_bench_result(
        store,
        point=profile.sweep_points()[point_index],
        sweep_point=sweep_label(profile, point_index),
        result=result,
        bench_text=_read_text(where, posixpath.join(directory, f"{entry['name']}.txt")),
        bench_mode=bench.mode,
        replicas=max(len(remote_state.get("processes", [])), 1),
        time_scale=transport.host.time_scale,
    )
    remote_state.pop(BENCH_KEY)
    return True
