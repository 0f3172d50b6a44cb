"""How long the Runs page takes to render with 10 runs and with 10 000 runs.

Fills two fresh SQLite files (bulk inserts of realistic rows: a run with its config, profiles,
commands and environment, a profile result with headline columns and a per-second series, and a few
request records each), then renders the app's default page (the Runs page, plus the sidebar) with
Streamlit's AppTest: once to warm up, then ``--repeat`` times per scenario, the two sizes taking
turns so both see the same machine load, and prints the median of each and their ratio. The
scenarios are the default view (newest first), sorting by total token throughput, and an engine
filter with a model search.

    python benchmarks/bench_runs_page.py [--small 10] [--large 10000] [--repeat 7] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from db import session as db_session  # noqa: E402
from db.models import ProfileResult, RequestRecord, Run, utcnow  # noqa: E402

ENGINES = ("vllm", "sglang", "trtllm", "mindie", "vllm-ascend")
HOSTS = tuple(f"node-{n:02d}" for n in range(12))
MODELS = ("Qwen/Qwen3-8B", "Qwen/Qwen3-14B", "Qwen/Qwen3-32B", "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8")
PROFILE = {
    "name": "sharegpt",
    "title": "ShareGPT",
    "dataset": "sharegpt",
    "num_prompts": 1000,
    "request_rate": "Infinity",
}
RECORDS_PER_RUN = 5


def _run_row(n: int, start: object) -> dict[str, object]:
    engine = ENGINES[n % len(ENGINES)]
    model = MODELS[n % len(MODELS)]
    tp = (1, 2, 4, 8)[n % 4]
    return {
        "status": "done" if n % 10 else "failed",
        "source": "imported" if n % 7 == 0 else "perflab",
        "simulated": n % 3 == 0,
        "host_name": HOSTS[n % len(HOSTS)],
        "accelerator": "NVIDIA H100 80GB HBM3" if n % 3 else "NVIDIA A100-SXM4-80GB",
        "engine": engine,
        "model": model,
        "knobs_summary": f"tp={tp}" + (" · kv_cache_dtype=fp8" if n % 5 == 0 else ""),
        "replicas": 2 if n % 11 == 0 else 1,
        "label": f"stage {n % 9} candidate {n % 13}",
        "config": {"engine": engine, "model": model, "tp": tp, "extra_args": [], "env": {}, "replicas": 1},
        "profiles": [PROFILE],
        "serve_commands": [f"vllm serve {model} -tp {tp}"],
        "bench_commands": ["perflab bench --base-url http://127.0.0.1:8000 --model m --dataset sharegpt"],
        "environment": {"host": HOSTS[n % len(HOSTS)], "driver": "570.172.08", "engine_version": "0.11.0"},
        "cancel_requested": False,
        "created_at": start + timedelta(minutes=n),  # type: ignore[operator]
        "finished_at": start + timedelta(minutes=n, seconds=90),  # type: ignore[operator]
        "failure_class": None if n % 10 else "oom",
    }


def _result_row(run_id: int, start: object) -> dict[str, object]:
    throughput = 1000.0 + (run_id * 7919) % 9000
    return {
        "run_id": run_id,
        "position": 0,
        "profile_name": "sharegpt",
        "profile": PROFILE,
        "result": {
            "completed": 1000,
            "failed": 0,
            "total_token_throughput": throughput,
            "timeseries": [{"t": t, "output_tokens": 100 + t, "requests_in_flight": 64} for t in range(60)],
        },
        "completed": 1000,
        "failed": 0,
        "success_rate": 1.0,
        "duration": 90.0,
        "total_token_throughput": throughput,
        "output_throughput": throughput / 2,
        "request_throughput": throughput / 400,
        "mean_ttft_ms": 100.0 + (run_id * 17) % 3000,
        "mean_tpot_ms": 10.0 + (run_id * 31) % 300,
        "mean_itl_ms": 9.0 + (run_id * 29) % 200,
        "p99_ttft_ms": 400.0 + (run_id * 13) % 9000,
        "created_at": start,
    }


def fill(url: str, count: int) -> None:
    """Migrate ``url`` and insert ``count`` runs with their results and records."""
    db_session.upgrade(url)
    engine = db_session.get_engine(url)
    start = utcnow() - timedelta(days=30)
    with engine.begin() as connection:
        connection.execute(sa.insert(Run), [_run_row(n, start) for n in range(count)])
        run_ids = list(connection.execute(sa.select(Run.id).order_by(Run.id)).scalars())
        connection.execute(sa.insert(ProfileResult), [_result_row(run_id, start) for run_id in run_ids])
        result_ids = list(connection.execute(sa.select(ProfileResult.id)).scalars())
        records = [
            {
                "profile_result_id": result_id,
                "index": i,
                "ttft_ms": 100.0 + i,
                "e2el_ms": 900.0 + i,
                "itl_ms": [8.0] * 20,
                "input_tokens": 200,
                "output_tokens": 21,
                "success": True,
            }
            for result_id in result_ids
            for i in range(RECORDS_PER_RUN)
        ]
        connection.execute(sa.insert(RequestRecord), records)


def open_app(url: str) -> Any:
    """The app rendered once against ``url`` (imports and caches warmed up)."""
    from streamlit.testing.v1 import AppTest

    os.environ["PERFLAB_DATABASE_URL"] = url
    os.environ["PERFLAB_APP_WORKER"] = "0"
    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=120).run()
    if app.exception:
        raise SystemExit(f"the Runs page failed: {app.exception[0].value}")
    return app


def _render_s(app: Any, url: str) -> float:
    os.environ["PERFLAB_DATABASE_URL"] = url
    started = time.perf_counter()
    app.run()
    return time.perf_counter() - started


def time_pages(urls: dict[int, str], repeat: int) -> dict[str, dict[int, float]]:
    """Median render time (s) per scenario and size; the sizes take turns, so both see the same load."""
    apps = {count: open_app(url) for count, url in urls.items()}
    timings: dict[str, dict[int, float]] = {}
    for scenario, prepare in SCENARIOS.items():
        samples: dict[int, list[float]] = {count: [] for count in urls}
        for count, app in apps.items():
            os.environ["PERFLAB_DATABASE_URL"] = urls[count]
            prepare(app)
            app.run()
        for _ in range(repeat):
            for count, app in apps.items():
                samples[count].append(_render_s(app, urls[count]))
        timings[scenario] = {count: statistics.median(values) for count, values in samples.items()}
    return timings


def _default(app: Any) -> None:
    return None


def _sort(app: Any) -> None:
    app.selectbox(key="runs_sort").select("Total tok/s")


def _filter(app: Any) -> None:
    app.multiselect(key="runs_engine").select("sglang")
    app.text_input(key="runs_model").input("qwen3-14")


SCENARIOS: dict[str, Callable[[Any], None]] = {
    "default view": _default,
    "sort by total tok/s": _sort,
    "engine filter + model search": _filter,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=10)
    parser.add_argument("--large", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--smoke", action="store_true", help="a small run that tests run: 5 and 50 runs, once"
    )
    args = parser.parse_args()
    if args.smoke:
        args.small, args.large, args.repeat = 5, 50, 1
    with tempfile.TemporaryDirectory(prefix="perflab-runs-page-") as folder:
        urls: dict[int, str] = {}
        for count in (args.small, args.large):
            urls[count] = f"sqlite:///{Path(folder) / f'runs-{count}.db'}"
            started = time.perf_counter()
            fill(urls[count], count)
            print(f"filled {count} runs in {time.perf_counter() - started:.1f} s")
        results = time_pages(urls, args.repeat)
    print(f"\nRuns page render time, median of {args.repeat} (AppTest, SQLite):")
    print(f"{'scenario':<32}{args.small:>10} runs{args.large:>10} runs{'ratio':>9}")
    for scenario, by_size in results.items():
        small, large = by_size[args.small], by_size[args.large]
        print(f"{scenario:<32}{small * 1000:>11.1f} ms{large * 1000:>11.1f} ms{large / small:>8.2f}×")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
