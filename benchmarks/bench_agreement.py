"""Do ``perflab bench`` and ``vllm bench serve`` (vLLM 0.32.0) measure the same server alike, and at
what CPU cost?

Starts a real vLLM (its CPU build, serving the tests' tiny Qwen2 model; see tests/fixtures/real_vllm.py)
unless ``--base-url`` names a running one, then runs the *same* ``vllm bench serve`` command line under
both tools, alternately (perflab, vLLM, perflab, …), ``--rounds`` times each. Prints, per metric, each
tool's median over its rounds and their difference, then each client's CPU seconds per run (user +
system of the client process and its children, from ``resource.getrusage(RUSAGE_CHILDREN)``; vLLM's
includes importing torch and loading its tokenizer, perflab's its own start-up).

Both use vLLM's definitions for the fields with vLLM's names (perflab's defaults): total input tokens
from the server's usage, peak concurrent requests per 1-second bucket.

Run from the repository root: ``python benchmarks/bench_agreement.py [--rounds 3] [--num-prompts 64]
[--smoke]``. Prints figures only.
"""

from __future__ import annotations

import argparse
import json
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from tests.fixtures.real_vllm import (  # noqa: E402
    SERVED_MODEL_NAME,
    serve_env,
    tiny_model_dir,
    tiny_vllm_url,
    vllm_bin,
)

METRICS = (
    "duration",
    "completed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "mean_e2el_ms",
    "median_e2el_ms",
    "p99_e2el_ms",
)


def bench_words(
    args: argparse.Namespace, base_url: str, model_dir: Path, result_dir: Path, name: str
) -> list[str]:
    """The ``vllm bench serve`` arguments both tools run (only the result file name differs)."""
    command = (
        f"--base-url {base_url} --model {model_dir} --served-model-name {SERVED_MODEL_NAME} "
        "--backend openai-chat --endpoint /v1/chat/completions --dataset-name random "
        f"--random-input-len {args.input_len} --random-output-len {args.output_len} "
        f"--num-prompts {args.num_prompts} --max-concurrency {args.max_concurrency} --seed 42 "
        "--temperature 0 --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,99 "
        f"--disable-tqdm --save-result --result-dir {result_dir} --result-filename {name}.json"
    )
    return shlex.split(command)


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_client(argv: list[str], log_path: Path) -> tuple[float, float]:
    """Run one client to its end; (CPU seconds, wall seconds). Raises when it fails."""
    cpu_before, started = children_cpu_s(), time.monotonic()
    with open(log_path, "wb") as log:
        finished = subprocess.run(argv, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, env=serve_env())
    wall, cpu = time.monotonic() - started, children_cpu_s() - cpu_before
    if finished.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv[:4])} … exited {finished.returncode}; see {log_path}")
    return cpu, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--num-prompts", type=int, default=64)
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--max-concurrency", type=int, default=8)
    parser.add_argument("--base-url", help="a running vLLM serving the tiny model as 'tiny'")
    parser.add_argument(
        "--smoke", action="store_true", help="a small run that tests run: one round of 8 prompts of 16 tokens"
    )
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.num_prompts, args.output_len = 1, 8, 16
    model_dir = tiny_model_dir()
    clients = {
        "perflab": [sys.executable, "-m", "perflab", "bench"],
        "vllm": [str(vllm_bin()), "bench", "serve"],
    }
    results: dict[str, list[dict]] = {name: [] for name in clients}
    costs: dict[str, list[tuple[float, float]]] = {name: [] for name in clients}
    with (
        tempfile.TemporaryDirectory(prefix="bench-agreement-") as tmp,
        tiny_vllm_url(args.base_url, Path(tmp) / "vllm-serve.log") as base_url,
    ):
        workdir = Path(tmp)
        # One unmeasured request wave first, so neither tool meets a cold server.
        run_client(
            clients["perflab"] + bench_words(args, base_url, model_dir, workdir, "warm"), workdir / "warm.log"
        )
        for round_number in range(args.rounds):
            for name, prefix in clients.items():
                label = f"{name}-{round_number}"
                words = bench_words(args, base_url, model_dir, workdir, label)
                cpu, wall = run_client(prefix + words, workdir / f"{label}.log")
                costs[name].append((cpu, wall))
                results[name].append(json.loads((workdir / f"{label}.json").read_text().splitlines()[0]))
                print(f"round {round_number + 1} {name}: {cpu:.2f} CPU s, {wall:.1f} s wall", flush=True)
        print()
        print("command (after `vllm bench serve` or `python -m perflab bench`):")
        print("  " + shlex.join(bench_words(args, base_url, model_dir, Path("DIR"), "NAME")))
    print()
    print(f"medians over {args.rounds} runs each")
    print(f"{'metric':<28}{'perflab':>14}{'vllm':>14}{'perflab/vllm':>14}")
    for metric in METRICS:
        ours = statistics.median(float(result[metric]) for result in results["perflab"])
        theirs = statistics.median(float(result[metric]) for result in results["vllm"])
        ratio = f"{(ours / theirs - 1) * 100:+.1f} %" if theirs else "—"
        print(f"{metric:<28}{ours:>14.2f}{theirs:>14.2f}{ratio:>14}")
    print()
    print(f"{'client CPU per run':<28}{'perflab':>14}{'vllm':>14}")
    for index, what in ((0, "CPU seconds (median)"), (1, "wall seconds (median)")):
        ours = statistics.median(cost[index] for cost in costs["perflab"])
        theirs = statistics.median(cost[index] for cost in costs["vllm"])
        print(f"{what:<28}{ours:>14.2f}{theirs:>14.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
