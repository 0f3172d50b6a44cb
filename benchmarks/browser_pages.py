"""How long the Run, Runs, Launch, Compare, Study and Datasets pages take to settle in Debian's chromium.

Fills one fresh SQLite file with what the other page benchmarks use: 1,000 runs as
``bench_runs_page.py`` stores them (the Runs page), one finished run with 1,000 request records,
engine and accelerator samples as ``run_page.py`` stores it (the Run page), and compares that run with
two of the others. Adds two studies of the new-study form's stages on the simulated host, their runs
measured as the runner stores results (one finished: the Study page; one with a run benchmarking: the
Study page while it runs, its live lines polled), and a stored dataset of 1,000 prompts (the Datasets
page). Then starts ``streamlit run app.py`` on it (no in-app worker) and opens each page in headless
chromium (``/usr/bin/chromium``) at 1024 × 768:

- first view: a fresh browser context (a new session: the server's per-session state is new, its
  cached reads are kept as in a running app that someone else already looked at);
- repeat view: the same page reloaded in that context.

A page has settled when the app is connected, its script has finished, no element is still a
loading skeleton and every chart drawn so far has its canvas or SVG; the figure is the browser's own
clock from the start of the navigation to that moment (``performance.now()``). ``--repeat`` times
each, printing the median and the spread, with the machine's CPU count and load, then the medians as
one JSON line. ``--smoke`` is the small mode (50 runs, 100 request records, no warm-up, one view of
each), to check the benchmark works.

    python benchmarks/browser_pages.py [--repeat 5] [--width 1024] [--height 768] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import sqlalchemy as sa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_runs_page  # noqa: E402
import run_page  # noqa: E402

from db import crud  # noqa: E402
from db import session as db_session  # noqa: E402
from db.models import Run  # noqa: E402
from perflab.datasets import parse_upload, store_dataset  # noqa: E402
from perflab.inventory import load_inventory  # noqa: E402
from perflab.study.coordinator import advance, create_study  # noqa: E402
from perflab.study.measure import study_runs  # noqa: E402
from perflab.study.views import spec_from_form, stages_template  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-dev-shm-usage"]
RUNS = 1000
RECORDS = 1000
SMOKE_RUNS = 50
SMOKE_RECORDS = 100
DATASET_PROMPTS = 1000
STUDY_ROUNDS = 40
START_TIMEOUT_S = 90.0
SETTLE_TIMEOUT_MS = 120_000
# The script-state attribute reads "notRunning" before the first run starts: each page is also
# waited for by a text only its drawn content holds.
SETTLED_JS = """
(marker) => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  if (!document.body.innerText.includes(marker)) return false;
  if (document.querySelector('[data-testid="stSkeleton"]')) return false;
  for (const chart of document.querySelectorAll('[data-testid="stVegaLiteChart"]')) {
    if (!chart.querySelector('canvas, svg')) return false;
  }
  return performance.now();
}
"""


def _study_spec(name: str):  # type: ignore[no-untyped-def]
    """The new-study form's default stages on the simulated host, tuned on the throughput preset."""
    return spec_from_form(
        name=name,
        model="Qwen/Qwen3-8B",
        hosts=["local-sim"],
        engine="vllm",
        tuning_profile="throughput",
        validation_profiles=["long", "medium", "short"],
        stages_yaml=stages_template("stages", "Qwen/Qwen3-8B", 8),
        objective="total_token_throughput",
        scale=1.0,
        min_success_pct=100.0,
        min_gain_pct=1.0,
    )


def _throughput(config: dict[str, object], run_id: int, profile: str) -> float:
    """A landscape in which SGLang, FP8 and TP2 pay, with seeded 3 % noise per run and profile."""
    true = 9000.0 * (1.15 if config.get("engine") == "sglang" else 1.0)
    true *= 1.1 if str(config.get("model", "")).endswith("FP8") else 1.0
    true *= 1.05 if config.get("tp") == 2 else 1.0
    return true * (1.0 + random.Random(f"{run_id}:{profile}").gauss(0.0, 0.03))


def _measure(engine, run: Run, records: int) -> None:  # type: ignore[no-untyped-def]
    """Store a result per profile of a queued run, as the runner does, and end it done."""
    with db_session.new_session(engine) as session:
        for status in ("launching", "ready", "benchmarking"):
            crud.set_run_status(session, run_id=run.id, status=status)
        for profile in run.profiles:
            result = {
                **run_page._result(records),
                "total_token_throughput": _throughput(run.config or {}, run.id, profile["name"]),
            }
            crud.add_profile_result(
                session, run_id=run.id, profile=profile, result=result, text_block=None, bench_mode="on-host"
            )
        crud.set_run_status(session, run_id=run.id, status="done")


def fill_study(url: str, hosts: Path, *, running: bool, records: int) -> int:
    """A study of the form's stages, its runs measured round by round until it is done (``running``:
    until its second stage, whose first run is left benchmarking); its id."""
    engine = db_session.get_engine(url)
    study = create_study(
        engine, _study_spec("running" if running else "finished"), inventory=load_inventory(hosts)
    )
    for _ in range(STUDY_ROUNDS):
        advance(engine, study.id)
        with db_session.new_session(engine) as session:
            status = crud.get_study(session, study_id=study.id).status
            queued = [run for run in study_runs(session, study_id=study.id) if run.status == "queued"]
        if status == "done" or not queued:
            break
        if running and any("Quantization" in (run.label or "") for run in queued):
            with db_session.new_session(engine) as session:
                for status in ("launching", "ready", "benchmarking"):
                    crud.set_run_status(session, run_id=queued[0].id, status=status)
                history = [[float(t), 10.0 * t, 0.0, 64.0, 2.8 * 10 * t, 10.0 * t] for t in range(120)]
                progress = {
                    "profile": "throughput",
                    "done": 1190,
                    "failed": 0,
                    "total": 2000,
                    "in_flight": 64,
                    "elapsed_s": 119.0,
                    "history": history,
                }
                crud.heartbeat_run(session, run_id=queued[0].id, progress=progress)
            break
        for run in queued:
            _measure(engine, run, records)
    return study.id


def fill_dataset(url: str, prompts: int) -> int:
    """A stored JSON lines dataset of ``prompts`` prompts; its id."""
    content = "".join(
        json.dumps({"prompt": f"Question {index}: " + "explain the KV cache " * (index % 40 + 1)}) + "\n"
        for index in range(prompts)
    ).encode()
    with db_session.session_scope(db_session.get_engine(url)) as session:
        dataset, _ = store_dataset(
            session, parse_upload("questions.jsonl", content), content, name="questions"
        )
        return int(dataset.id)


def fill(url: str, hosts: Path, *, runs: int, records: int) -> dict[str, str]:
    """Store the benchmark's data in ``url``; the page paths to open, by page name."""
    bench_runs_page.fill(url, runs)
    big = run_page.fill(url, records)
    engine = db_session.get_engine(url)
    with engine.connect() as connection:
        others = list(connection.execute(sa.select(Run.id).where(Run.status == "done").limit(2)).scalars())
    finished = fill_study(url, hosts, running=False, records=records)
    running = fill_study(url, hosts, running=True, records=records)
    fill_dataset(url, DATASET_PROMPTS)
    return {
        "Run": f"/run?run={big}",
        "Runs": "/",
        "Launch": "/launch",
        "Compare": f"/compare?compare={big},{others[0]},{others[1]}",
        "Study": f"/study?study={finished}",
        "Study (running)": f"/study?study={running}",
        "Datasets": "/datasets",
    }


def stored_runs(url: str) -> int:
    """How many runs the database holds (the Runs page says "… of N")."""
    with db_session.get_engine(url).connect() as connection:
        return int(connection.execute(sa.select(sa.func.count()).select_from(Run)).scalar_one())


def markers(runs: int) -> dict[str, str]:
    """A text only each page's drawn content holds, by page name (``runs``: how many are stored)."""
    return {
        "Run": "Serving Benchmark Result",
        "Runs": f"of {runs} · page",
        "Launch": "Serve command",
        "Compare": "Ranked by",
        "Study": "Summary of Optimization Options",
        "Study (running)": "Summary of Optimization Options",
        "Datasets": "Preview",
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_app(folder: Path, url: str, hosts: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``streamlit run app.py`` on a free loopback port, waited for until healthy."""
    port = free_port()
    env = {
        **os.environ,
        "PERFLAB_DATABASE_URL": url,
        "PERFLAB_HOSTS": str(hosts),
        "PERFLAB_APP_WORKER": "0",
        "PERFLAB_AUTH": "",
    }
    argv = [
        sys.executable, "-m", "streamlit", "run", "app.py", "--server.address", "127.0.0.1",
        "--server.port", str(port), "--server.headless", "true", "--server.fileWatcherType", "none",
    ]  # fmt: skip
    log = (folder / "app.log").open("wb")
    process = subprocess.Popen(
        argv, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(base + "/_stcore/health", timeout=2):
                return process, base
        except OSError:
            time.sleep(0.2)
    os.killpg(process.pid, signal.SIGTERM)
    raise SystemExit("the app did not start:\n" + (folder / "app.log").read_text())


def settled_ms(page, marker: str) -> float:  # type: ignore[no-untyped-def]
    """Milliseconds from the navigation's start until the page has settled."""
    handle = page.wait_for_function(SETTLED_JS, arg=marker, timeout=SETTLE_TIMEOUT_MS, polling=50)
    return float(handle.json_value())


def measure(
    base: str,
    paths: dict[str, str],
    marks: dict[str, str],
    repeat: int,
    viewport: dict[str, int],
    *,
    warm_up: bool = True,
) -> dict[str, dict[str, list[float]]]:
    """Seconds to settled per page: first views (a fresh context each) and repeat views (a reload),
    after each page was opened once (``warm_up``: the server's imports and cached reads, the browser's
    cache)."""
    from playwright.sync_api import sync_playwright

    figures: dict[str, dict[str, list[float]]] = {name: {"first": [], "repeat": []} for name in paths}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        warm = browser.new_context(viewport=viewport).new_page()
        for name, path in paths.items() if warm_up else ():
            warm.goto(base + path)
            print(
                f"warming {name}: {settled_ms(warm, marks[name]) / 1000:.2f} s", file=sys.stderr, flush=True
            )
        warm.context.close()
        for _ in range(repeat):
            for name, path in paths.items():
                context = browser.new_context(viewport=viewport)
                page = context.new_page()
                page.goto(base + path, wait_until="commit")
                figures[name]["first"].append(settled_ms(page, marks[name]) / 1000)
                page.reload(wait_until="commit")
                figures[name]["repeat"].append(settled_ms(page, marks[name]) / 1000)
                context.close()
        browser.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--height", type=int, default=768)
    parser.add_argument("--smoke", action="store_true", help="a small mode: fewer runs and records, one view")
    args = parser.parse_args()
    if not os.path.exists(CHROMIUM) or shutil.which("chromium") is None:
        raise SystemExit("Debian's chromium is needed (/usr/bin/chromium)")
    runs, records = (SMOKE_RUNS, SMOKE_RECORDS) if args.smoke else (RUNS, RECORDS)
    repeat = 1 if args.smoke else args.repeat
    with tempfile.TemporaryDirectory(prefix="perflab-browser-pages-") as name:
        folder = Path(name)
        url = f"sqlite:///{folder / 'pages.db'}"
        hosts = folder / "hosts.yaml"
        hosts.write_text(run_page.HOSTS_YAML.format(workdir=folder / "work"))
        paths = fill(url, hosts, runs=runs, records=records)
        process, base = start_app(folder, url, hosts)
        try:
            viewport = {"width": args.width, "height": args.height}
            figures = measure(
                base, paths, markers(stored_runs(url)), repeat, viewport, warm_up=not args.smoke
            )
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(
        f"time to settled in chromium at {args.width}×{args.height}, {os.cpu_count()} CPUs, "
        f"load average {load} (SQLite; Run: {records:,} request records; Runs: {runs:,} runs and the "
        "others'; Study: the form's stages, finished and running; Datasets: 1,000 prompts):"
    )
    for name, views in figures.items():
        for view, times in views.items():
            print(
                f"  {name:<16} {view:<7} median {statistics.median(times):.2f} s"
                f"  (min {min(times):.2f}, max {max(times):.2f}, n={len(times)})"
            )
    summary = {
        "viewport": [args.width, args.height],
        "cpus": os.cpu_count(),
        "load_average": [round(value, 2) for value in os.getloadavg()],
        "median_s": {
            name: {view: round(statistics.median(times), 3) for view, times in views.items()}
            for name, views in figures.items()
        },
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
