"""Simulated hosts measure the model, not the machine: quiet and loaded figures, and the launch CV under load.

1. Prefix caching at time scale 5 on a shared-prefix workload (4 groups of prompts sharing a 1,536-token
   prefix, sent at 200 requests/s): for caching on and off, a fresh ``sim serve`` is benchmarked quietly
   and with every CPU kept busy, timed by the simulator's clock and, for contrast, by the wall clock
   (``--wall-clock``, how the bench timed simulators before). Printed: output throughput, mean TTFT and
   TPOT, the gain caching brings, and the offline simulator's for the same send times.
2. Launches: vLLM started again and again on a noise-free simulated host (time scale 5, prefix caching
   off so every benchmark meets the same engine) with every CPU busy, one closed-loop benchmark per
   launch and clock: the coefficient of variation of the launches' output throughputs. A host
   configured without noise should show none.

Every figure line gives the 1-minute load average when it was measured; the last line is a JSON
object of the headline figures. ``--smoke``: a smaller workload and 3 launches (the same output).
Run from the repository root: ``python benchmarks/sim_clock.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from perflab.bench import BenchOptions, run_benchmark  # noqa: E402
from perflab.bench.traffic import build_schedule  # noqa: E402
from tests.fixtures.cpu_load import busy_cpus  # noqa: E402
from tests.fixtures.sim_server import SimServerFactory  # noqa: E402
from tests.fixtures.sim_workloads import (  # noqa: E402
    ACCELERATOR,
    MODEL,
    offline_run,
    shared_prefix_prompts,
    write_custom_dataset,
)
from tests.sim.conftest import SimHost, free_port  # noqa: E402

SCALE = 5.0
RATE = 200.0
OUTPUT_LEN = 32
CLOCKS = {"simulated": False, "wall": True}


def load_average() -> float:
    return os.getloadavg()[0]


def bench(urls: list[str], wall_clock: bool, **options: Any) -> dict[str, Any]:
    return run_benchmark(
        BenchOptions(base_urls=urls, model=MODEL, progress="none", wall_clock=wall_clock, **options)
    )


def caching_figures(workdir: Path, per_group: int) -> dict[str, float]:
    """Section 1; returns the headline figures."""
    prompts = shared_prefix_prompts(groups=4, prefix_words=1536, per_group=per_group)
    options = {
        "dataset": "custom",
        "dataset_path": str(write_custom_dataset(workdir / "prompts.jsonl", prompts, OUTPUT_LEN)),
        "num_prompts": len(prompts),
        "request_rate": RATE,
    }
    schedule = build_schedule(len(prompts), RATE)
    offline = {
        caching: offline_run(prompts, schedule, OUTPUT_LEN, caching, SCALE)[1] for caching in (True, False)
    }
    print(
        f"1. prefix caching, {len(prompts)} requests at {RATE:g}/s, {MODEL} on {ACCELERATOR}, time scale "
        f"{SCALE:g}; offline simulator: on {offline[True]:.0f} tok/s, off {offline[False]:.0f} tok/s, "
        f"gain {offline[True] / offline[False]:.2f}x"
    )
    throughput: dict[tuple[str, str, bool], float] = {}
    factory = SimServerFactory(workdir)
    try:
        for load in ("quiet", "loaded"):
            for clock, wall_clock in CLOCKS.items():
                for caching in (True, False):
                    url = factory(
                        model=MODEL, accelerator=ACCELERATOR, time_scale=SCALE, enable_prefix_caching=caching
                    )
                    if load == "loaded":
                        with busy_cpus():
                            result = bench([url], wall_clock, **options)
                    else:
                        result = bench([url], wall_clock, **options)
                    throughput[(load, clock, caching)] = result["output_throughput"]
                    print(
                        f"   {load:6} {clock:9} caching {'on ' if caching else 'off'}  "
                        f"{result['output_throughput']:9.1f} tok/s  TTFT {result['mean_ttft_ms']:8.3f} ms  "
                        f"TPOT {result['mean_tpot_ms']:7.4f} ms  ({result['timing_source']}, load average "
                        f"{load_average():.2f})"
                    )
                gain = throughput[(load, clock, True)] / throughput[(load, clock, False)]
                print(f"   {load:6} {clock:9} gain of caching {gain:.2f}x")
    finally:
        factory.stop_all()
    simulated = [
        (throughput[("loaded", "simulated", c)], throughput[("quiet", "simulated", c)]) for c in (True, False)
    ]
    return {
        "offline_caching_gain": offline[True] / offline[False],
        "simulated_caching_gain_loaded": throughput[("loaded", "simulated", True)]
        / throughput[("loaded", "simulated", False)],
        "wall_caching_gain_loaded": throughput[("loaded", "wall", True)]
        / throughput[("loaded", "wall", False)],
        "simulated_quiet_vs_loaded_max_rel_diff": max(
            abs(loaded / quiet - 1.0) for loaded, quiet in simulated
        ),
    }


def launch_figures(workdir: Path, launches: int) -> dict[str, float]:
    """Section 2; returns the launch CVs (%) by clock."""
    host = SimHost(
        workdir / "simhome",
        {"accelerator": ACCELERATOR, "count": 1, "time_scale": SCALE, "startup_scale": 1000.0},
    )
    options = {"input_len": 1024, "output_len": 64, "num_prompts": 64, "max_concurrency": 16, "warmup": 4}
    throughputs: dict[str, list[float]] = {clock: [] for clock in CLOCKS}
    print(f"2. {launches} launches of vLLM on a noise-free simulated host, every CPU busy")
    try:
        with busy_cpus():
            for launch in range(launches):
                port = free_port()
                argv = ["vllm", "serve", MODEL, "--host", "127.0.0.1", "--port", str(port)]
                engine = host.start([*argv, "--no-enable-prefix-caching"])
                engine.wait_for(r"Application startup complete\.", timeout=120.0)
                for clock, wall_clock in CLOCKS.items():
                    result = bench([f"http://127.0.0.1:{port}"], wall_clock, **options)
                    throughputs[clock].append(result["output_throughput"])
                    print(
                        f"   launch {launch} {clock:9} {result['output_throughput']:9.1f} tok/s "
                        f"(load average {load_average():.2f})"
                    )
                engine.terminate()
    finally:
        host.stop_all()
    cvs = {
        clock: 100.0 * statistics.pstdev(values) / statistics.mean(values)
        for clock, values in throughputs.items()
    }
    for clock, cv in cvs.items():
        print(f"   launch CV by the {clock} clock: {cv:.3f} %")
    return {f"launch_cv_pct_{clock}": cv for clock, cv in cvs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=8)
    parser.add_argument("--per-group", type=int, default=24, help="prompts per shared prefix (4 groups)")
    parser.add_argument("--smoke", action="store_true", help="a small run (12 prompts a group, 3 launches)")
    args = parser.parse_args()
    if args.smoke:
        args.launches, args.per_group = 3, 12
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load_average():.2f}")
    with tempfile.TemporaryDirectory() as directory:
        workdir = Path(directory)
        figures = caching_figures(workdir, args.per_group)
        figures.update(launch_figures(workdir, args.launches))
    print(json.dumps({name: round(value, 6) for name, value in figures.items()}))


if __name__ == "__main__":
    main()
