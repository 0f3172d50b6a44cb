"""How long one ``advance`` of a study takes, the reconciler every worker poll runs per active study.

Builds a study with S stages of C candidates each and measures every run it queues (stores a tuning and
a validation result, the way the runner does) stage by stage. With the last stage's runs queued and
unmeasured, when the study has its most runs and candidates, it times ``advance`` (which then
recomputes the plan and finds nothing to change), then finishes the study and times its report.

    python benchmarks/study_advance.py [--stages 6] [--candidates 6] [--url postgresql+psycopg://…/empty_db]

Without ``--url`` a temporary SQLite file is used. The database must be empty (it is migrated).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
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


def _measure_queued(engine, study_id: int, value: float) -> int:  # type: ignore[no-untyped-def]
    measured = 0
    with db_session.new_session(engine) as session:
        for run in study_runs(session, study_id=study_id):
            if run.status != "queued":
                continue
            for status in ("launching", "ready", "benchmarking"):
                crud.set_run_status(session, run_id=run.id, status=status)
            for position, profile in enumerate(run.profiles):
                result = {"completed": 10, "failed": 0, "total_token_throughput": value + run.id + position}
                crud.add_profile_result(
                    session,
                    run_id=run.id,
                    profile=profile,
                    result=result,
                    text_block=None,
                    bench_mode=None,
                )
            crud.set_run_status(session, run_id=run.id, status="done")
            measured += 1
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stages", type=int, default=6)
    parser.add_argument("--candidates", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--url")
    args = parser.parse_args()
    url = args.url or f"sqlite:///{tempfile.mkdtemp(prefix='perflab-bench-')}/study.db"
    db_session.upgrade(url)
    engine = db_session.get_engine(url)
    host = HostConfig(name="h", transport="local", simulate=SimulateSpec(accelerator="H100", count=8))
    inventory = Inventory(Path("hosts.yaml"), (host,))
    study = create_study(engine, parse_spec(_spec(args.stages, args.candidates)), inventory=inventory)
    runs = 0
    for step in range(args.stages):  # the baseline, then every stage but the last
        advance(engine, study.id)
        runs += _measure_queued(engine, study.id, 1000.0 + step)
    advance(engine, study.id)
    timings = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        advance(engine, study.id)
        timings.append(time.perf_counter() - started)
    runs += _measure_queued(engine, study.id, 2000.0)
    advance(engine, study.id)
    with db_session.new_session(engine) as session:
        started = time.perf_counter()
        study_report(session, study_id=study.id)
        report_s = time.perf_counter() - started
        status = crud.get_study(session, study_id=study.id).status
    print(f"database: {db_session.describe(url)}")
    print(f"study: {args.stages} stages × {args.candidates} candidates, {runs} runs, status {status}")
    print(
        f"advance (study in its last stage): median {statistics.median(timings) * 1000:.1f} ms, "
        f"max {max(timings) * 1000:.1f} ms"
    )
    print(f"report (no charts): {report_s * 1000:.1f} ms")


if __name__ == "__main__":
    main()
