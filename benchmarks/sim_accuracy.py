"""How exactly the bench client measures the simulator's fixed timings, and how many streams the sim carries.

Starts ``python -m perflab sim serve`` with fixed TTFT/ITL, runs ``python -m perflab bench`` against it at
several concurrencies (warm connections: as many warm-up requests as streams), and prints the measured
mean/median TTFT, TPOT, ITL and E2EL next to the injected truth, with the relative error, plus the
sim server's own CPU time. Cases: 1, 256 and 512 streams at 50 ms / 10 ms, and 1024 streams at
50 ms / 50 ms (1000+ concurrent streams); ``--smoke``, the small mode a test runs, 1 and 64 streams at
50 ms / 10 ms with two requests a stream (one for a single stream). A case whose bench fails is printed and
makes the script exit 1.

Run from the repository root: ``python benchmarks/sim_accuracy.py [--smoke]``. Prints figures only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from tests.fixtures.cpu_load import process_cpu_seconds  # noqa: E402

OUTPUT_TOKENS = 64
# (streams, TTFT ms, ITL ms, prompts)
CASES = [(1, 50.0, 10.0, 16), (256, 50.0, 10.0, 768), (512, 50.0, 10.0, 1536), (1024, 50.0, 50.0, 2048)]
SMOKE_CASES = [(1, 50.0, 10.0, 4), (64, 50.0, 10.0, 128)]


def start_sim(ttft_ms: float, itl_ms: float, log_path: Path):
    argv = [sys.executable, "-m", "perflab", "sim", "serve", "--port", "0", "--model", "sim"]
    argv += ["--fixed-ttft-ms", str(ttft_ms), "--fixed-itl-ms", str(itl_ms)]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        match = re.search(r"Uvicorn running on (http://\S+)", log_path.read_text())
        if match:
            return process, match.group(1)
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(log_path.read_text())


def run_case(concurrency: int, ttft_ms: float, itl_ms: float, prompts: int, workdir: Path) -> bool:
    """Measure one case and print its figures; False when its bench failed."""
    process, url = start_sim(ttft_ms, itl_ms, workdir / f"sim-{concurrency}.log")
    result_path = workdir / f"result-{concurrency}.json"
    try:
        cpu_before = process_cpu_seconds(process.pid)
        started = time.monotonic()
        bench = subprocess.run(
            [
                sys.executable,
                "-m",
                "perflab",
                "bench",
                "--base-url",
                url,
                "--model",
                "sim",
                "--dataset",
                "random",
                "--input-len",
                "64",
                "--output-len",
                str(OUTPUT_TOKENS),
                "--num-prompts",
                str(prompts),
                "--max-concurrency",
                str(concurrency),
                "--warmup",
                str(concurrency),
                "--save-result",
                str(result_path),
                "--no-progress",
            ],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
        )
        wall = time.monotonic() - started
        sim_cpu = process_cpu_seconds(process.pid) - cpu_before
    finally:
        process.terminate()
        process.wait(timeout=30)
    if bench.returncode != 0:
        print(f"  bench failed ({bench.returncode}): {bench.stderr.strip()[-500:]}")
        return False
    result = json.loads(result_path.read_text())
    truth = {"ttft": ttft_ms, "tpot": itl_ms, "itl": itl_ms, "e2el": ttft_ms + (OUTPUT_TOKENS - 1) * itl_ms}
    print(
        f"{concurrency} streams, TTFT {ttft_ms} ms / ITL {itl_ms} ms, {result['completed']} requests "
        f"({result['failed']} failed), {result['output_throughput']:.0f} tok/s, wall {wall:.1f} s, "
        f"sim CPU {sim_cpu:.1f} s, timing {result['timing_source']}, {result['preconnected']} "
        f"pre-connected, {result['coalesced_chunks']} token chunks shared a read"
    )
    for metric, expected in truth.items():
        mean, median = result[f"mean_{metric}_ms"], result[f"median_{metric}_ms"]
        print(
            f"  {metric:5} truth {expected:7.2f}  mean {mean:8.2f} ({(mean - expected) / expected:+.2%})  "
            f"median {median:8.2f} ({(median - expected) / expected:+.2%})"
        )
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a small run that tests run: 1 and 64 streams")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as directory:
        measured = [
            run_case(concurrency, ttft_ms, itl_ms, prompts, Path(directory))
            for concurrency, ttft_ms, itl_ms, prompts in (SMOKE_CASES if args.smoke else CASES)
        ]
    return 0 if all(measured) else 1


if __name__ == "__main__":
    raise SystemExit(main())
