"""Benchmarking a ready run: every profile (every point of a load-curve sweep) against all replicas.

Every benchmark is sized to be judged (:mod:`perflab.runner.evidence`): its workload is sent again, in
rounds of fresh prompts, until it has measured the floor's seconds (of the engine's time) and requests.

Each benchmark runs on the host next to the engines (:func:`perflab.remote.bench.run_remote_bench`,
requests spread over every replica's URL; forwarded from the app's machine when the host's Python
cannot run it), streams its progress into ``run.progress`` and stores its
result with its per-request records as soon as it ends, so a later failure keeps earlier results;
the benchmark in flight is recorded first (:mod:`perflab.runner.bench_record`), so a run that ends
early keeps its partial result too. A sweep stores one result per point and, with
``stop_when_flat``, stops once output throughput stops rising. After each benchmark the engines must
still be alive, else the run fails ``engine_died`` (a bench that saw its engine go away stops early).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perflab.engines import EngineAdapter
from perflab.profiles import BenchmarkProfile
from perflab.remote import process as rp
from perflab.remote.bench import RemoteBenchFailed, run_remote_bench
from perflab.runner import live
from perflab.runner.bench_record import (
    BenchClock,
    bench_entry,
    store_bench_result,
    sweep_label,
    with_sample_window,
)
from perflab.runner.errors import INFRASTRUCTURE_FAILURES, RunFailed
from perflab.runner.evidence import floor_args
from perflab.runner.launch import Replica
from perflab.runner.logs import failure_of
from perflab.runner.store import RunStore
from perflab.transport.base import Transport
from perflab.transport.errors import CommandTimeout, ConnectionLost, FileTooLarge

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
    dataset_files: Callable[[BenchmarkProfile, list[str]], dict[str, Path]]
    record_bench: Callable[[dict[str, Any] | None], None]
    # Seconds on the clock of the run's samples (the sampler's), to place each result's window on it.
    sample_clock: Callable[[], float] | None = None
    # What the benchmark sends requests to (default: every replica; a disaggregated run's router).
    targets: Sequence[Replica] | None = None
    # Whether running engines' logs are read after each benchmark for failures that leave them running
    # (a disaggregated decode worker that cannot reach its prefill worker).
    watch_logs: bool = False
    # Why the benchmarks time simulated engines by the wall clock (``--wall-clock``), None when they may
    # be timed by the simulator's clock.
    wall_clock_note: str | None = None

    @property
    def bench_targets(self) -> Sequence[Replica]:
        return self.targets if self.targets is not None else self.replicas


def _check_engines(ctx: BenchContext, during: str) -> None:
    for replica in ctx.replicas:
        state = rp.process_state(ctx.transport, replica.process)
        if state.running and ctx.watch_logs:
            info = ctx.adapter.classify_failure(rp.tail_log(ctx.transport, replica.process, 400))
            if info is not None and info.failure_class in INFRASTRUCTURE_FAILURES:
                raise RunFailed(
                    info.failure_class, f"{replica.name}: {info.message} (while benchmarking {during})"
                )
        if not state.running:
            log = rp.tail_log(ctx.transport, replica.process, 400)
            failure = failure_of(ctx.adapter, replica.name, log, state.exit_status)
            if failure.failure_class == "crash":
                failure = RunFailed("engine_died", f"{failure.message} (while benchmarking {during})")
            raise failure


def bench_command(args: Sequence[str], replicas: Sequence[Replica], files: dict[str, Path]) -> str:
    """The benchmark as a command line, with the replicas' base URLs on the host and the dataset file
    by its name (the bench reads the copy uploaded to the host's datasets directory)."""
    targets = [part for replica in replicas for part in ("--base-url", f"http://127.0.0.1:{replica.port}")]
    named = [part for flag, path in files.items() for part in (flag, path.name)]
    return shlex.join(["perflab", "bench", *targets, *args, *named])


def _run_point(
    ctx: BenchContext, point: BenchmarkProfile, point_index: int, label: dict[str, Any]
) -> dict[str, Any]:
    tracked = live.ProfileProgress(point.num_prompts)
    ctx.on_progress({**label, **tracked.started()})
    notes: list[str] = []
    files = ctx.dataset_files(point, notes)
    args = [
        *without_flags(point.bench_args(base_urls=["-"], model=ctx.model), _ADDED_BY_REMOTE),
        *floor_args(ctx.transport.host.time_scale),
    ]
    if ctx.wall_clock_note is not None:
        args.append("--wall-clock")
        notes.append(ctx.wall_clock_note)
    shown = bench_command(args, ctx.bench_targets, files)
    ctx.store.update(bench_commands=[*ctx.store.load().bench_commands, shown])
    name = f"bench-{label['profile_index']}-{point_index}"
    ctx.record_bench(bench_entry(name, label["profile_index"], point_index))

    clock = BenchClock(ctx.sample_clock) if ctx.sample_clock else None

    def progress(values: dict[str, Any]) -> None:
        if clock is not None:
            clock.seen(values)
        ctx.interrupt()
        ctx.on_progress({**label, **tracked.line(values)})

    try:
        bench = run_remote_bench(
            ctx.transport,
            args,
            ports=[replica.port for replica in ctx.bench_targets],
            run_key=ctx.run_key,
            name=name,
            timeout=ctx.timeout_s,
            files=files,
            on_progress=progress,
        )
    except RemoteBenchFailed as exc:
        _check_engines(ctx, point.name)
        raise RunFailed("bench_failed", str(exc)) from None
    except FileTooLarge as exc:
        raise RunFailed(
            "bench_failed", f"the benchmark '{point.name}' left a result perflab will not read: {exc}"
        ) from None
    except ConnectionLost:
        raise RunFailed(
            "connection_lost",
            f"the connection to host '{ctx.transport.host.name}' dropped while benchmarking '{point.name}'",
        ) from None
    except CommandTimeout:
        raise RunFailed(
            "timeout", f"the benchmark '{point.name}' ran longer than {ctx.timeout_s:g} s and was stopped"
        ) from None
    measured = with_sample_window(bench.result, clock.offset if clock is not None else None)
    result = store_bench_result(
        ctx.store,
        point=point,
        sweep_point=label.get("sweep_point"),
        result={**measured, "notes": [*notes, *(measured.get("notes") or [])]} if notes else measured,
        bench_text=bench.text_block,
        bench_mode=bench.mode,
        replicas=len(ctx.bench_targets),
        time_scale=ctx.transport.host.time_scale,
    )
    ctx.record_bench(None)
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
            sweep_point = sweep_label(profile, point_index)
            if sweep_point is not None:
                label["sweep_point"] = sweep_point
            result = _run_point(ctx, point, point_index, label)
            stored += 1
            throughput = result.get("output_throughput")
            if profile.sweep is not None and profile.sweep.stop_when_flat:
                if sweep_is_flat(best, throughput, flat_gain):
                    break
                best = max(best or 0.0, throughput or 0.0)
    return stored
