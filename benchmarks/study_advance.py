"""How long one ``advance`` of a study takes, the reconciler every worker poll runs per active study,
and how long its result takes to read, what every open study page repeats while it runs.

Staged (the default): builds a study with S stages of C candidates each and measures every run it
queues (stores a tuning and a validation result, the way the runner does) stage by stage. With the last
stage's runs queued and unmeasured, when the study has its most runs and candidates, it times
``advance`` (which then recomputes the plan and finds nothing to change), then finishes the study and
times its report.

With ``--search L``: a search over max-num-seqs × max-num-batched-tokens × parallelism with a budget of
L launches, every run measured profile by profile (screening, tuning, validation) on a synthetic
landscape with 3 % noise, the coordinator advancing between; it times ``advance`` (the search
proposes, screens, picks) and ``study_report`` (what the page, ``study show --json`` and the report
build: the plan read without proposing, the launches, the trials, importances once stopped) after
every round of runs, and the report once the study is done.

    python benchmarks/study_advance.py [--stages 6] [--candidates 6] [--search 24] [--requests 200]
        [--output-len 128] [--url postgresql+psycopg://…/db] [--smoke]

Every stored result carries what ``perflab bench`` stores beside its figures: vLLM's per-request
arrays (``input_lens``, ``output_lens``, ``ttfts``, ``itls``, ``errors``) for ``--requests`` requests of
``--output-len`` tokens each (200 × 128 by default: about 0.3 MB of JSON a result), which a study's looks
must not pay to read.

Without ``--url`` a temporary SQLite file is used. The database must be empty (it is migrated).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from db import crud  # noqa: E402
from db import session as db_session  # noqa: E402
from perflab.inventory import HostConfig, Inventory, SimulateSpec  # noqa: E402
from perflab.report.from_study import study_report  # noqa: E402
from perflab.study.coordinator import advance, create_study  # noqa: E402
from perflab.study.measure import study_runs  # noqa: E402
from perflab.study.spec import parse_spec  # noqa: E402


def _spec(stages: int, candidates: int) -> str:
    lines = [
        "name: bench",
        "model: Qwen/Qwen3-8B",
        "hosts: [h]",
        "baseline: {engine: vllm}",
        "tuning_profile: {name: t, title: T, dataset: random, input_len: 9, output_len: 9, num_prompts: 9}",
        "validation_profiles: [short]",
        "stages:",
    ]
    for stage in range(stages):
        values = ", ".join(str(1024 * (stage * candidates + index + 1)) for index in range(candidates))
        lines += [
            f"  - name: stage {stage}",
            "    dimension: max_num_batched_tokens",
            f"    candidates: [{values}]",
        ]
    return "\n".join(lines) + "\n"


def _bench_result(figures: dict[str, float], shape: tuple[int, int]) -> dict[str, object]:
    """A stored result as the bench writes it: ``figures`` and the per-request arrays of ``shape``
    (requests, output tokens each)."""
    requests, output_len = shape
    rng = random.Random(len(figures) + requests)
    return {
        **figures,
        "input_lens": [512] * requests,
        "output_lens": [output_len] * requests,
        "ttfts": [round(rng.uniform(0.05, 0.5), 6) for _ in range(requests)],
        "itls": [[round(rng.uniform(0.01, 0.03), 6) for _ in range(output_len - 1)] for _ in range(requests)],
        "errors": [""] * requests,
    }


def _measure_queued(engine, study_id: int, value: float, shape: tuple[int, int]) -> int:  # type: ignore[no-untyped-def]
    measured = 0
    with db_session.new_session(engine) as session:
        for run in study_runs(session, study_id=study_id):
            if run.status != "queued":
                continue
            for status in ("launching", "ready", "benchmarking"):
                crud.set_run_status(session, run_id=run.id, status=status)
            for position, profile in enumerate(run.profiles):
                figures = {"completed": 10, "failed": 0, "total_token_throughput": value + run.id + position}
                crud.add_profile_result(
                    session,
                    run_id=run.id,
                    profile=profile,
                    result=_bench_result(figures, shape),
                    text_block=None,
                    bench_mode=None,
                )
            crud.set_run_status(session, run_id=run.id, status="done")
            measured += 1
    return measured


SEARCH_SPEC = """
name: search bench
model: Qwen/Qwen3-8B
hosts: [h]
baseline: {{engine: vllm}}
gpus: 8
tuning_profile: {{name: t, title: T, dataset: random, input_len: 9, output_len: 9, num_prompts: 9}}
validation_profiles: [short]
stages:
  - name: Search
    search:
      knobs:
        max_num_seqs: [32, 64, 128, 256, 512]
        max_num_batched_tokens: [2048, 4096, 8192, 16384]
      parallelism: [{{tp: 1}}, {{tp: 2}}, {{tp: 4}}, {{tp: 8}}]
      budget: {{launches: {launches}}}
      screening: 0.5
      seed: 0
"""


def _value(config: dict, run_id: int, profile: str) -> float:
    seqs, tokens, tp = (
        config.get("max_num_seqs") or 256,
        config.get("max_num_batched_tokens") or 8192,
        config["tp"],
    )
    true = 1000.0 + 40.0 * tp + 0.3 * min(seqs, 64 * tp) + 0.01 * tokens
    return true * (1.0 + random.Random(f"{run_id}:{profile}").gauss(0.0, 0.03))


def _measure_profiles(engine, study_id: int, shape: tuple[int, int]) -> int:  # type: ignore[no-untyped-def]
    """Store a result for every profile of every queued run, advancing between; how many ran."""
    with db_session.new_session(engine) as session:
        queued = [run for run in study_runs(session, study_id=study_id) if run.status == "queued"]
    for run in queued:
        position = 0
        while True:
            with db_session.new_session(engine) as session:
                current = crud.require_run(session, run_id=run.id)
                if current.status == "queued":
                    for status in ("launching", "ready", "benchmarking"):
                        crud.set_run_status(session, run_id=run.id, status=status)
                if position >= len(current.profiles):
                    crud.set_run_status(session, run_id=run.id, status="done")
                    break
                profile = current.profiles[position]
                value = _value(current.config, run.id, profile["name"])
                crud.add_profile_result(
                    session,
                    run_id=run.id,
                    profile=profile,
                    result=_bench_result(
                        {"completed": 9, "failed": 0, "total_token_throughput": value}, shape
                    ),
                    text_block=None,
                    bench_mode="on-host",
                )
            position += 1
            advance(engine, study_id)
    return len(queued)


def _timed(call: Callable[[], object], repeat: int) -> list[float]:
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        timings.append(time.perf_counter() - started)
    return timings


def _staged(
    engine, inventory: Inventory, stages: int, candidates: int, repeat: int, shape: tuple[int, int]
) -> None:  # type: ignore[no-untyped-def]
    study = create_study(engine, parse_spec(_spec(stages, candidates)), inventory=inventory)
    runs = 0
    for step in range(stages):  # the baseline, then every stage but the last
        advance(engine, study.id)
        runs += _measure_queued(engine, study.id, 1000.0 + step, shape)
    advance(engine, study.id)
    timings = _timed(lambda: advance(engine, study.id), repeat)
    runs += _measure_queued(engine, study.id, 2000.0, shape)
    advance(engine, study.id)
    with db_session.new_session(engine) as session:
        started = time.perf_counter()
        study_report(session, study_id=study.id)
        report_s = time.perf_counter() - started
        status = crud.get_study(session, study_id=study.id).status
    print(f"study: {stages} stages × {candidates} candidates, {runs} runs, status {status}")
    print(
        f"advance (study in its last stage): median {statistics.median(timings) * 1000:.1f} ms, "
        f"max {max(timings) * 1000:.1f} ms"
    )
    print(f"report (no charts): {report_s * 1000:.1f} ms")


def _searched(engine, inventory: Inventory, launches: int, repeat: int, shape: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    study = create_study(engine, parse_spec(SEARCH_SPEC.format(launches=launches)), inventory=inventory)

    def read() -> None:
        with db_session.new_session(engine) as session:
            study_report(session, study_id=study.id)

    runs = 0
    advancing: list[float] = []
    reading: list[float] = []
    for _ in range(4 * launches):
        advancing += _timed(lambda: advance(engine, study.id), 1)
        reading += _timed(read, 1)
        queued = _measure_profiles(engine, study.id, shape)
        runs += queued
        with db_session.new_session(engine) as session:
            status = crud.get_study(session, study_id=study.id).status
        if status != "running" and not queued:
            break
    finished = _timed(read, repeat)
    print(f"search study: budget {launches} launches, {runs} runs, status {status}")
    print(
        f"advance while it runs (proposes, screens, picks): "
        f"median {statistics.median(advancing) * 1000:.1f} ms, max {max(advancing) * 1000:.1f} ms"
    )
    print(
        f"study_report while it runs (a page render): median {statistics.median(reading) * 1000:.1f} ms, "
        f"max {max(reading) * 1000:.1f} ms"
    )
    print(f"study_report once done: median {statistics.median(finished) * 1000:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stages", type=int, default=6)
    parser.add_argument("--candidates", type=int, default=6)
    parser.add_argument("--search", type=int, metavar="LAUNCHES", help="time a search study of this budget")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--requests", type=int, default=200, help="requests of each stored result")
    parser.add_argument("--output-len", type=int, default=128, help="output tokens of each request")
    parser.add_argument("--url")
    parser.add_argument(
        "--smoke", action="store_true", help="a small run that tests run: 2 stages of 2 candidates, 2 repeats"
    )
    args = parser.parse_args()
    if args.smoke:
        args.stages, args.candidates, args.repeat, args.requests = 2, 2, 2, 20
    url = args.url or f"sqlite:///{tempfile.mkdtemp(prefix='perflab-bench-')}/study.db"
    db_session.upgrade(url)
    engine = db_session.get_engine(url)
    host = HostConfig(name="h", transport="local", simulate=SimulateSpec(accelerator="H100", count=8))
    inventory = Inventory(Path("hosts.yaml"), (host,))
    shape = (args.requests, args.output_len)
    print(f"database: {db_session.describe(url)}; each result with {args.requests} × {args.output_len} ITLs")
    if args.search:
        _searched(engine, inventory, args.search, args.repeat, shape)
    else:
        _staged(engine, inventory, args.stages, args.candidates, args.repeat, shape)


if __name__ == "__main__":
    main()
