"""How long a run's start scans a host's workdir for leftover processes, against the workdir's history.

Every run start looks for processes earlier runs left alive (``perflab.remote.process.scan_leftovers``,
``LEFTOVERS`` in ``perflab/remote/scripts.py``). This fills a fresh local workdir with ``--runs``
finished runs' pid files as an earlier perflab left them (one default 8-replica study leaves about 215),
plus ``--live`` engines of unfinished runs, and times on the local transport:

- the first scan, which indexes the pid files written before the index began and drops the finished;
- a later scan, which reads the index only (the cost of every run start from then on);
- the same later scan after ``--runs`` more runs that started and were stopped as runs are.

Each line prints the pid files on disk, the processes the scan examined and its wall seconds (median of
``--repeat``); the last line is JSON. ``--smoke`` is the small mode a test runs: 20 runs, 1 live engine,
1 scan each.

    python benchmarks/leftover_scan.py [--runs 300] [--live 2] [--repeat 5] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from perflab.inventory import HostConfig  # noqa: E402
from perflab.remote import process as rp  # noqa: E402
from perflab.transport import Transport, open_transport  # noqa: E402

# What a finished run leaves in its run dir: the pid file of a process long gone, its exit status, its log.
FINISHED_RUNS = r"""
runs=$1; count=$2; prefix=$3; i=0
while [ "$i" -lt "$count" ]; do
  mkdir -p "$runs/$prefix-$i" && printf '999999%s\n1\n' "$i" > "$runs/$prefix-$i/engine-0.pid"
  echo 0 > "$runs/$prefix-$i/engine-0.exit" && : > "$runs/$prefix-$i/engine-0.log"
  i=$((i + 1))
done
"""


def _finished(transport: Transport, count: int, prefix: str) -> None:
    runs = f"{transport.workdir}/{rp.RUNS_DIR}"
    transport.run(
        ["sh", "-c", FINISHED_RUNS, "finished-runs", runs, str(count), prefix], timeout=600, check=True
    )


def _timed_scan(transport: Transport, repeat: int) -> tuple[int, float]:
    """The processes a scan examines and the median wall seconds of ``repeat`` scans."""
    seconds, examined = [], 0
    for _ in range(repeat):
        started = time.perf_counter()
        examined = rp.scan_leftovers(transport).examined
        seconds.append(time.perf_counter() - started)
    return examined, statistics.median(seconds)


def _pid_files(transport: Transport) -> int:
    return len(list(Path(transport.workdir, rp.RUNS_DIR).glob("*/*.pid")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--live", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="small mode: --runs 20 --live 1 --repeat 1")
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.live, args.repeat = 20, 1, 1
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="perflab-leftovers-") as workdir:
        host = HostConfig(name="scan-bench", transport="local", workdir=workdir)
        with open_transport(host) as transport:
            _finished(transport, args.runs, "old")
            live = [
                rp.start_detached(transport, ["sleep", "600"], run_key=f"live-{index}", name="engine-0")
                for index in range(args.live)
            ]
            try:
                started = time.perf_counter()
                first = rp.scan_leftovers(transport).examined
                figures["first scan"] = {"examined": first, "seconds": time.perf_counter() - started}
                examined, seconds = _timed_scan(transport, args.repeat)
                figures["later scan"] = {"examined": examined, "seconds": seconds}
                for index in range(args.runs):
                    rp.stop(
                        transport,
                        rp.start_detached(transport, ["true"], run_key=f"new-{index}", name="engine-0"),
                    )
                examined, seconds = _timed_scan(transport, args.repeat)
                figures[f"after {args.runs} more runs"] = {"examined": examined, "seconds": seconds}
                pid_files = _pid_files(transport)
            finally:
                for process in live:
                    rp.stop(transport, process, grace_s=1)
    for name, figure in figures.items():
        print(f"{name:>24}: {pid_files if 'more' in name else args.runs + args.live} pid files, "
              f"{figure['examined']:.0f} examined, {figure['seconds'] * 1000:.1f} ms")  # fmt: skip
    print(json.dumps({"runs": args.runs, "live": args.live, **figures}))


if __name__ == "__main__":
    main()
