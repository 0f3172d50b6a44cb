"""How fast the runs page query is with many runs.

Fills a fresh database with N runs (each with two profile results and a few request records) and
prints the time of ``db.crud.list_runs`` for typical page requests, plus a claim and a GPU lock.

    python benchmarks/db_runs_page.py [--runs 10000] [--url postgresql+psycopg://…/empty_db] [--smoke]

Without ``--url`` a temporary SQLite file is used. The database must be empty (it is migrated).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from db import crud  # noqa: E402
from db import session as db_session  # noqa: E402
from db.models import ProfileResult, RequestRecord, Run, utcnow  # noqa: E402

ENGINES = ("vllm", "sglang", "trtllm", "mindie", "vllm-ascend")
HOSTS = tuple(f"node-{n:02d}" for n in range(12))


def fill(engine: sa.Engine, count: int) -> None:
    start = utcnow() - timedelta(days=30)
    runs = [
        {
            "status": "done" if n % 10 else "failed",
            "source": "perflab",
            "simulated": False,
            "host_name": HOSTS[n % len(HOSTS)],
            "accelerator": "8× H100 80GB" if n % 3 else "8× A100 80GB",
            "engine": ENGINES[n % len(ENGINES)],
            "model": f"Qwen/Qwen3-{(n % 7) * 8 + 8}B",
            "replicas": 1,
            "profiles": [{"name": "sharegpt"}],
            "serve_commands": ["vllm serve model --tensor-parallel-size 4"],
            "bench_commands": [],
            "environment": {"driver": "550.54"},
            "config": {"engine": "vllm", "extra_args": ["--x"] * 50},
            "cancel_requested": False,
            "created_at": start + timedelta(minutes=n),
        }
        for n in range(count)
    ]
    with engine.begin() as connection:
        connection.execute(sa.insert(Run), runs)
        run_ids = list(connection.execute(sa.select(Run.id).order_by(Run.id)).scalars())
        results = [
            {
                "run_id": run_id,
                "position": position,
                "profile_name": "sharegpt" if position == 0 else "long",
                "profile": {"name": "sharegpt"},
                "result": {"timeseries": [{"t": t, "output_tokens": 100} for t in range(60)]},
                "total_token_throughput": 1000.0 + (run_id * 7919) % 9000,
                "mean_tpot_ms": 10.0 + (run_id * 31) % 300,
                "mean_ttft_ms": 100.0 + (run_id * 17) % 3000,
                "completed": 1000,
                "failed": 0,
                "created_at": start,
            }
            for run_id in run_ids
            for position in (0, 1)
        ]
        connection.execute(sa.insert(ProfileResult), results)
        result_ids = list(
            connection.execute(sa.select(ProfileResult.id).where(ProfileResult.position == 0)).scalars()
        )
        records = [
            {
                "profile_result_id": result_id,
                "index": index,
                "ttft_ms": 10.0,
                "itl_ms": [1.0] * 20,
                "success": True,
            }
            for result_id in result_ids[:2000]
            for index in range(20)
        ]
        connection.execute(sa.insert(RequestRecord), records)
    if engine.dialect.name == "postgresql":
        # What autovacuum would do shortly after a bulk load.
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.exec_driver_sql("ANALYZE")


def timed(label: str, action: Callable[[], Any], repeats: int = 7) -> None:
    durations = []
    for _ in range(repeats):
        began = time.perf_counter()
        action()
        durations.append((time.perf_counter() - began) * 1000)
    print(f"{label:<58} median {statistics.median(durations):7.1f} ms   max {max(durations):7.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--url", help="an empty database (default: a temporary SQLite file)")
    parser.add_argument("--smoke", action="store_true", help="a small run that tests run: 200 runs")
    args = parser.parse_args()
    if args.smoke:
        args.runs = 200
    with tempfile.TemporaryDirectory() as directory:
        url = args.url or f"sqlite:///{Path(directory) / 'bench.db'}"
        db_session.upgrade(url)
        engine = db_session.get_engine(url)
        began = time.perf_counter()
        fill(engine, args.runs)
        print(f"{db_session.describe(url)}: {args.runs} runs stored in {time.perf_counter() - began:.1f} s")
        with db_session.new_session(engine) as session:
            timed("newest first, page 1 (50 rows + count)", lambda: crud.list_runs(session))
            timed("newest first, page 100", lambda: crud.list_runs(session, offset=4950))
            timed(
                "sorted by total token throughput",
                lambda: crud.list_runs(session, sort="total_token_throughput"),
            )
            timed(
                "sorted by mean TPOT ascending",
                lambda: crud.list_runs(session, sort="mean_tpot_ms", descending=False),
            )
            timed(
                "engine + host + status filter",
                lambda: crud.list_runs(session, engine="sglang", host=["node-01", "node-03"], status="done"),
            )
            timed("model text filter 'qwen3-16'", lambda: crud.list_runs(session, model_text="qwen3-16"))
            timed("filter choices (distinct values)", lambda: crud.run_filter_choices(session))
            crud.create_run(session, engine="vllm", model="queued-model")
            timed(
                "claim_next_run (one queued among N finished)",
                lambda: crud.claim_next_run(session, worker_id="w"),
                1,
            )
            run_id = crud.create_run(session, engine="vllm", model="m").id
            timed(
                "acquire_gpus + release_gpus (8 GPUs)",
                lambda: (
                    crud.acquire_gpus(session, host_name="h", gpu_ids=range(8), run_id=run_id, worker_id="w"),
                    crud.release_gpus(session, run_id=run_id),
                ),
            )
        db_session.dispose_engines()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
