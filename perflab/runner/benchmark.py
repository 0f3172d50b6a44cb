"""Benchmarking a ready run: every profile (every point of a load-curve sweep) against all replicas.

Each benchmark runs on the host next to the engines (:func:`perflab.remote.bench.run_remote_bench`,
requests spread over every replica's URL), streams its progress into ``run.progress`` and stores its
result with its per-request records as soon as it ends, so a later failure keeps earlier results. A
sweep stores one result per point and, with ``stop_when_flat``, stops once output throughput stops
rising. After each benchmark the engines must still be alive, else the run fails ``engine_died``.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perflab.engines import EngineAdapter
from perflab.profiles import BenchmarkProfile
from perflab.remote import process as rp
from perflab.remote.bench import RemoteBenchFailed, run_remote_bench
from perflab.runner import results
from perflab.runner.errors import RunFailed
from perflab.runner.launch import Replica
from perflab.runner.logs import failure_of
from perflab.runner.store import RunStore
from perflab.transport.base import Transport

# Flags run_remote_bench adds itself (targets) or replaces with the uploaded file.
_ADDED_BY_REMOTE = ("--base-url", "--dataset-path")


def without_flags(args: Sequence[str], flags: Sequence[str]) -> list[str]:
    """``args`` without each ``flag value`` pair of ``flags``."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in flags:
            skip = True
        else:
            kept.append(arg)
    return kept


def sweep_is_flat(best: float | None, current: float | None, min_gain: float) -> bool:
    """True when ``current`` throughput is not at least ``min_gain`` above the best point before it."""
    return best is not None and current is not None and current < best * (1.0 + min_gain)


def profile_json(profile: BenchmarkProfile) -> dict[str, Any]:
    """The profile as stored (an infinite request rate as ``"Infinity"``, valid in any JSON column)."""
    return json.loads(profile.model_dump_json())


@dataclass
class BenchContext:
    """What every benchmark of one run shares."""

    transport: Transport
    adapter: EngineAdapter
    store: RunStore
    run_key: str
    model: str
    replicas: Sequence[Replica]
    timeout_s: float
    interrupt: Callable[[], None]
    on_progress: Callable[[dict[str, Any]], None]
    dataset_files: Callable[[BenchmarkProfile], dict[str, Path]]


def _check_engines(ctx: BenchContext, during: str) -> None:
    for replica in ctx.replicas:
        state = rp.process_state(ctx.transport, replica.process)
        if not state.running:
            log = rp.tail_log(ctx.transport, replica.process, 400)
            failure = failure_of(ctx.adapter, replica.name, log, state.exit_status)
            if failure.failure_class == "crash":
                failure = RunFailed("engine_died", f"{failure.message} (while benchmarking {during})")
            raise failure


def bench_command(args: Sequence[str], replicas: Sequence[Replica]) -> str:
    """The benchmark as a command line, with the replicas' base URLs on the host."""
    targets = [part for replica in replicas for part in ("--base-url", f"http://127.0.0.1:{replica.port}")]
    return shlex.join(["perflab", "bench", *targets, *args])


def _run_point(
    ctx: BenchContext, point: BenchmarkProfile, name: str, label: dict[str, Any]
) -> dict[str, Any]:
    files = ctx.dataset_files(point)
    args = without_flags(point.bench_args(base_urls=["-"], model=ctx.model), _ADDED_BY_REMOTE)
    ctx.store.update(bench_commands=[*ctx.store.load().bench_commands, bench_command(args, ctx.replicas)])

    def progress(values: dict[str, Any]) -> None:
        ctx.interrupt()
        ctx.on_progress({**label, **values})

    try:
        bench = run_remote_bench(
            ctx.transport,
            args,
            ports=[replica.port for replica in ctx.replicas],
            run_key=ctx.run_key,
            name=name,
            timeout=ctx.timeout_s,
            files=files,
            on_progress=progress,
        )
    except RemoteBenchFailed as exc:
        _check_engines(ctx, point.name)
        raise RunFailed("bench_failed", str(exc)) from None
    count = len(ctx.replicas)
    result = results.with_replicas(bench.result, count)
    ctx.store.add_result(
        profile=profile_json(point),
        result=result,
        text_block=results.text_block(bench.text_block, result, count),
        bench_mode=bench.mode,
        sweep_point=label.get("sweep_point"),
    )
    _check_engines(ctx, point.name)
    return result


def still_listed(ctx: BenchContext, profile: BenchmarkProfile) -> bool:
    """Whether the run still lists ``profile``: a study drops the validation profiles of a run whose
    configuration can no longer win."""
    return any(stored.get("name") == profile.name for stored in ctx.store.load().profiles)


def run_profiles(ctx: BenchContext, profiles: Sequence[BenchmarkProfile], *, flat_gain: float) -> int:
    """Benchmark every profile in order; returns how many results were stored."""
    stored = 0
    for index, profile in enumerate(profiles):
        if index and not still_listed(ctx, profile):
            continue
        points = profile.sweep_points()
        best: float | None = None
        for point_index, point in enumerate(points):
            ctx.interrupt()
            label: dict[str, Any] = {
                "profile": profile.name,
                "profile_index": index,
                "profiles": len(profiles),
            }
            if profile.sweep is not None:
                label["sweep_point"] = {
                    "kind": profile.sweep.kind,
                    "value": profile.sweep.values[point_index],
                    "index": point_index,
                    "points": len(points),
                }
            ctx.on_progress({**label, "done": 0, "failed": 0, "total": point.num_prompts})
            result = _run_point(ctx, point, f"bench-{index}-{point_index}", label)
            stored += 1
            throughput = result.get("output_throughput")
            if profile.sweep is not None and profile.sweep.stop_when_flat:
                if sweep_is_flat(best, throughput, flat_gain):
                    break
                best = max(best or 0.0, throughput or 0.0)
    return stored
