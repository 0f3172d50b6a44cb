"""How long the Run page takes to render a finished run with 1,000 request records, and where the time goes.

Fills a fresh SQLite file with one finished run as the worker stores it: one profile result with its
summary and per-second series, 1,000 request records (128 output tokens each, so 127 inter-token
gaps per record), engine samples and accelerator samples for 8 GPUs over two minutes. Then renders
``/run?run=ID`` with Streamlit's AppTest (the server side of a page view: the script run, the data it
reads and the charts it builds, not the browser's drawing):

- first render: every cached read forgotten before each render, as for the first viewer after the
  run finished (the database engine stays open, as in a running app);
- warm render: the same page again with the caches kept (a second viewer, a rerun);

``--repeat`` times each, printing the median and the spread. ``--profile`` prints the 25 functions
with the most cumulative time in one first render.

    python benchmarks/run_page.py [--records 1000] [--repeat 5] [--profile] [--smoke]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import sqlalchemy as sa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from db import session as db_session  # noqa: E402
from db.models import ProfileResult, RequestRecord, Run, RunSample, utcnow  # noqa: E402

PROFILE = {
    "name": "throughput",
    "title": "Throughput Profile",
    "dataset": "random",
    "input_len": 1024,
    "output_len": 128,
    "num_prompts": 1000,
    "request_rate": 1000.0,
    "max_concurrency": 512,
}
DURATION_S = 120
GPUS = 8
OUTPUT_TOKENS = 128
HOSTS_YAML = """\
hosts:
  - name: local-sim
    transport: local
    workdir: {workdir}
    simulate:
      accelerator: H100
      count: 8
"""


def _result(records: int) -> dict[str, object]:
    """A summary shaped like the bench's (every field the text block needs)."""
    output = records * OUTPUT_TOKENS
    return {
        "backend": "openai",
        "endpoint_type": "completions",
        "model_id": "Qwen/Qwen3-8B",
        "tokenizer_id": "Qwen/Qwen3-8B",
        "num_prompts": records,
        "request_rate": 1000.0,
        "burstiness": 1.0,
        "max_concurrency": 512,
        "duration": float(DURATION_S),
        "completed": records,
        "failed": 0,
        "total_input_tokens": records * 1024,
        "total_output_tokens": output,
        "request_throughput": records / DURATION_S,
        "request_goodput": None,
        "output_throughput": output / DURATION_S,
        "total_token_throughput": (records * 1152) / DURATION_S,
        "max_output_tokens_per_s": 2 * output / DURATION_S,
        "max_concurrent_requests": 512,
        **{
            f"{kind}_{metric}_ms": value
            for metric, value in (("ttft", 250.0), ("tpot", 20.0), ("itl", 19.0), ("e2el", 2800.0))
            for kind in ("mean", "median", "p99", "std")
        },
        "percentiles": [99.0],
        "timeseries": [
            {"t": t, "output_tokens": output // DURATION_S, "requests_in_flight": 512}
            for t in range(DURATION_S)
        ],
    }


def fill(url: str, records: int) -> int:
    """Migrate ``url`` and store one finished run with ``records`` request records; its id."""
    db_session.upgrade(url)
    engine = db_session.get_engine(url)
    now = utcnow()
    started = now - timedelta(seconds=DURATION_S + 60)
    with engine.begin() as connection:
        run_id = connection.execute(
            sa.insert(Run).returning(Run.id),
            {
                "status": "done",
                "source": "perflab",
                "simulated": True,
                "host_name": "local-sim",
                "accelerator": "NVIDIA H100 80GB HBM3",
                "engine": "vllm",
                "model": "Qwen/Qwen3-8B",
                "knobs_summary": "tp=1",
                "replicas": 1,
                "config": {"engine": "vllm", "model": "Qwen/Qwen3-8B", "tp": 1, "extra_args": [], "env": {}},
                "profiles": [PROFILE],
                "serve_commands": ["vllm serve Qwen/Qwen3-8B --port 8000"],
                "bench_commands": [
                    "perflab bench --base-url http://127.0.0.1:8000 --model Qwen/Qwen3-8B --dataset random"
                ],
                "environment": {"driver": "570.172.08", "engine_version": "0.11.0"},
                "log_tail": "INFO engine ready\n" * 50,
                "cancel_requested": False,
                "created_at": started,
                "launching_at": started,
                "ready_at": started + timedelta(seconds=50),
                "benchmarking_at": started + timedelta(seconds=55),
                "finished_at": now,
                "heartbeat_at": now,
            },
        ).scalar_one()
        result_id = connection.execute(
            sa.insert(ProfileResult).returning(ProfileResult.id),
            {
                "run_id": run_id,
                "position": 0,
                "profile_name": PROFILE["name"],
                "profile": PROFILE,
                "result": _result(records),
                "completed": records,
                "failed": 0,
                "created_at": now,
            },
        ).scalar_one()
        connection.execute(
            sa.insert(RequestRecord),
            [
                {
                    "profile_result_id": result_id,
                    "index": i,
                    "start_s": i * DURATION_S / records,
                    "ttft_ms": 200.0 + (i * 37) % 400,
                    "e2el_ms": 2500.0 + (i * 53) % 900,
                    "itl_ms": [18.0 + ((i + k) % 7) for k in range(OUTPUT_TOKENS - 1)],
                    "input_tokens": 1024,
                    "output_tokens": OUTPUT_TOKENS,
                    "success": True,
                    "error": None,
                    "base_url": "http://127.0.0.1:8000",
                }
                for i in range(records)
            ],
        )
        samples = [
            {
                "run_id": run_id,
                "t_s": float(t),
                "source": "engine",
                "values": {"running": 256, "waiting": 10, "kv_cache_usage": 0.7},
            }
            for t in range(0, DURATION_S, 2)
        ] + [
            {
                "run_id": run_id,
                "t_s": float(t),
                "source": "accelerator",
                "values": {
                    "gpu": gpu,
                    "utilization_pct": 90,
                    "memory_used_mib": 70000,
                    "memory_total_mib": 81559,
                },
            }
            for t in range(0, DURATION_S, 2)
            for gpu in range(GPUS)
        ]
        connection.execute(sa.insert(RunSample), samples)
    return run_id


def render(run_id: int):  # type: ignore[no-untyped-def]
    """One render of the run page; returns the AppTest after checking it drew the run."""
    from streamlit.testing.v1 import AppTest

    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=300).run()
    app.switch_page("pages/run.py")
    app.query_params["run"] = str(run_id)
    started = time.perf_counter()
    app.run()
    elapsed = time.perf_counter() - started
    if app.exception or not any("Serving Benchmark Result" in block.proto.body for block in app.get("html")):
        raise SystemExit(f"the run page did not render: {app.exception}")
    return elapsed


def print_profile(action: Callable[[], object]) -> None:
    """Run ``action`` with the page scripts it starts profiled (they run in Streamlit's script thread,
    which a profiler started here would not see) and print the 25 costliest calls."""
    from streamlit.runtime.scriptrunner import script_runner

    profiler = cProfile.Profile()
    original = script_runner.ScriptRunner._run_script

    def profiled(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        profiler.enable()
        try:
            return original(self, *args, **kwargs)
        finally:
            profiler.disable()

    script_runner.ScriptRunner._run_script = profiled  # type: ignore[method-assign]
    try:
        action()
    finally:
        script_runner.ScriptRunner._run_script = original  # type: ignore[method-assign]
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="print where one first render spends its time")
    parser.add_argument("--smoke", action="store_true", help="a small run that tests run: 50 records, once")
    args = parser.parse_args()
    if args.smoke:
        args.records, args.repeat = 50, 1

    import streamlit as st

    with tempfile.TemporaryDirectory(prefix="perflab-run-page-") as folder:
        url = f"sqlite:///{folder}/bench.db"
        hosts = Path(folder) / "hosts.yaml"
        hosts.write_text(HOSTS_YAML.format(workdir=Path(folder) / "work"))
        os.environ.update(PERFLAB_DATABASE_URL=url, PERFLAB_HOSTS=str(hosts), PERFLAB_APP_WORKER="0")
        run_id = fill(url, args.records)
        st.cache_data.clear()
        render(run_id)  # imports, the database engine, Altair's schema: what a running app has loaded
        first, warm = [], []
        for _ in range(args.repeat):
            st.cache_data.clear()
            first.append(render(run_id))
            warm.append(render(run_id))
        print(f"run page, finished run with {args.records} request records (AppTest, server side):")
        for name, times in (("first render", first), ("warm render", warm)):
            print(
                f"  {name:<13} median {statistics.median(times):.2f} s"
                f"  (min {min(times):.2f}, max {max(times):.2f}, n={len(times)})"
            )
        if args.profile:
            st.cache_data.clear()
            print_profile(lambda: render(run_id))


if __name__ == "__main__":
    main()
