"""CPU seconds a ``python -m perflab`` command costs, start to exit: help, the list commands, a queued run.

Each command runs ``--repeat`` times in a fresh interpreter; its CPU time (user + system, read from the
child's own resource usage, so the machine's other load hardly moves it) and wall time are the medians.
The list commands read a fresh SQLite database made for the purpose (``db upgrade`` first) and the
checkout's hosts.yaml; ``run --queue`` stores a queued run there (nothing executes it). ``--repo`` points
at another checkout of perflab (its own ``perflab`` package and hosts.yaml), to compare two versions.
Each line prints a command's CPU and wall seconds; the last line is JSON, with the load average (1 min)
at the start and at the end.

    python benchmarks/cli_start.py [--repeat 5] [--repo DIR] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def commands(hosts_file: Path) -> dict[str, list[str]]:
    """The commands measured, by the name printed: argv after ``python -m perflab``."""
    hosts = str(hosts_file)
    return {
        "--help": ["--help"],
        "study --help": ["study", "--help"],
        "run --help": ["run", "--help"],
        "hosts --help": ["hosts", "--help"],
        "report --help": ["report", "--help"],
        "worker --help": ["worker", "--help"],
        "hosts list": ["hosts", "--file", hosts, "list"],
        "study list": ["study", "list"],
        "run --queue": [
            "run",
            "--hosts",
            hosts,
            "--host",
            "local-sim",
            "--engine",
            "vllm",
            "--model",
            "Qwen/Qwen3-8B",
            "--profile",
            "short",
            "--queue",
        ],
    }


def timed(argv: list[str], *, repo: Path, env: dict[str, str]) -> tuple[float, float]:
    """CPU seconds (user + system) and wall seconds of one ``python -m perflab argv`` in ``repo``."""
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "perflab", *argv],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert child.stderr is not None
    errors = child.stderr.read()
    _pid, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if child.returncode != 0:
        raise SystemExit(f"perflab {' '.join(argv)} exited {child.returncode}: {errors.decode()[-2000:]}")
    return usage.ru_utime + usage.ru_stime, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--repo", type=Path, default=REPO, help="the perflab checkout to measure")
    parser.add_argument("--smoke", action="store_true", help="each command once")
    args = parser.parse_args()
    repeat = 1 if args.smoke else args.repeat
    repo = args.repo.resolve()
    figures: dict[str, dict[str, float]] = {}
    load_at_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="perflab-cli-start-") as scratch:
        env = {
            **os.environ,
            "PERFLAB_DATABASE_URL": f"sqlite:///{Path(scratch) / 'perflab.db'}",
            "PERFLAB_APP_WORKDIR": str(Path(scratch) / "app"),
            "PERFLAB_SPOOL_DIR": str(Path(scratch) / "spool"),
        }
        env.pop("PERFLAB_HOSTS", None)
        timed(["db", "upgrade"], repo=repo, env=env)
        for name, argv in commands(repo / "hosts.yaml").items():
            runs = [timed(argv, repo=repo, env=env) for _ in range(repeat)]
            cpu = statistics.median(run[0] for run in runs)
            wall = statistics.median(run[1] for run in runs)
            figures[name] = {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3)}
            print(f"{name:>14}: {cpu:5.2f} s CPU  {wall:5.2f} s wall  (median of {repeat})", flush=True)
    load = {"start": round(load_at_start, 2), "end": round(os.getloadavg()[0], 2)}
    print(json.dumps({"repo": str(repo), "repeat": repeat, "load_avg_1m": load, "commands": figures}))


if __name__ == "__main__":
    main()
