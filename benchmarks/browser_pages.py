"""How long the Run, Runs, Launch and Compare pages take to settle in Debian's chromium.

Fills one fresh SQLite file with what the other page benchmarks use: 1,000 runs as
``bench_runs_page.py`` stores them (the Runs page), one finished run with 1,000 request records,
engine and accelerator samples as ``run_page.py`` stores it (the Run page), and compares that run with
two of the others. Then starts ``streamlit run app.py`` on it (no in-app worker) and opens each page
in headless chromium (``/usr/bin/chromium``) at 1024 × 768:

- first view: a fresh browser context (a new session: the server's per-session state is new, its
  cached reads are kept as in a running app that someone else already looked at);
- repeat view: the same page reloaded in that context.

A page has settled when the app is connected, its script has finished, no element is still a
loading skeleton and every chart drawn so far has its canvas or SVG; the figure is the browser's own
clock from the start of the navigation to that moment (``performance.now()``). ``--repeat`` times
each, printing the median and the spread, with the machine's CPU count and load.

    python benchmarks/browser_pages.py [--repeat 5] [--width 1024] [--height 768]
"""

from __future__ import annotations

import argparse
import os
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

from db import session as db_session  # noqa: E402
from db.models import Run  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-dev-shm-usage"]
RUNS = 1000
RECORDS = 1000
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


def fill(url: str) -> dict[str, str]:
    """Store the benchmark's data in ``url``; the page paths to open, by page name."""
    bench_runs_page.fill(url, RUNS)
    big = run_page.fill(url, RECORDS)
    engine = db_session.get_engine(url)
    with engine.connect() as connection:
        others = list(connection.execute(sa.select(Run.id).where(Run.status == "done").limit(2)).scalars())
    return {
        "Run": f"/run?run={big}",
        "Runs": "/",
        "Launch": "/launch",
        "Compare": f"/compare?compare={big},{others[0]},{others[1]}",
    }


MARKERS = {
    "Run": "Serving Benchmark Result",
    "Runs": f"of {RUNS + 1}",
    "Launch": "Serve command",
    "Compare": "Ranked by",
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_app(folder: Path, url: str) -> tuple[subprocess.Popen[bytes], str]:
    """``streamlit run app.py`` on a free loopback port, waited for until healthy."""
    port = free_port()
    hosts = folder / "hosts.yaml"
    hosts.write_text(run_page.HOSTS_YAML.format(workdir=folder / "work"))
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
    base: str, paths: dict[str, str], repeat: int, viewport: dict[str, int]
) -> dict[str, dict[str, list[float]]]:
    """Seconds to settled per page: first views (a fresh context each) and repeat views (a reload)."""
    from playwright.sync_api import sync_playwright

    figures: dict[str, dict[str, list[float]]] = {name: {"first": [], "repeat": []} for name in paths}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        warm = browser.new_context(viewport=viewport).new_page()
        for name, path in paths.items():  # the server's imports and cached reads, the browser's cache
            warm.goto(base + path)
            settled_ms(warm, MARKERS[name])
        warm.context.close()
        for _ in range(repeat):
            for name, path in paths.items():
                context = browser.new_context(viewport=viewport)
                page = context.new_page()
                page.goto(base + path, wait_until="commit")
                figures[name]["first"].append(settled_ms(page, MARKERS[name]) / 1000)
                page.reload(wait_until="commit")
                figures[name]["repeat"].append(settled_ms(page, MARKERS[name]) / 1000)
                context.close()
        browser.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--height", type=int, default=768)
    args = parser.parse_args()
    if not os.path.exists(CHROMIUM) or shutil.which("chromium") is None:
        raise SystemExit("Debian's chromium is needed (/usr/bin/chromium)")
    with tempfile.TemporaryDirectory(prefix="perflab-browser-pages-") as name:
        folder = Path(name)
        url = f"sqlite:///{folder / 'pages.db'}"
        paths = fill(url)
        process, base = start_app(folder, url)
        try:
            figures = measure(base, paths, args.repeat, {"width": args.width, "height": args.height})
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(
        f"time to settled in chromium at {args.width}×{args.height}, {os.cpu_count()} CPUs, "
        f"load average {load} (SQLite; Run: {RECORDS:,} request records; Runs: {RUNS + 1:,} runs):"
    )
    for name, views in figures.items():
        for view, times in views.items():
            print(
                f"  {name:<8} {view:<7} median {statistics.median(times):.2f} s"
                f"  (min {min(times):.2f}, max {max(times):.2f}, n={len(times)})"
            )


if __name__ == "__main__":
    main()
