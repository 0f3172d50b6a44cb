"""benchmarks/sim_vs_seeds.py in its small mode: every seed's blocks set up on simulated hosts, the
per-block table and a last JSON line; every seed's baseline command starts on its own hardware."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_seed_comparison_runs_and_every_baseline_starts():
    result = subprocess.run(
        [sys.executable, "benchmarks/sim_vs_seeds.py", "--smoke"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    summary = json.loads(lines[-1])
    assert summary["smoke"] is True and summary["blocks"] == 10  # two blocks of each of the five seeds
    assert summary["baselines_refused"] == 0 and summary["blocks_refused"] == 0
    assert summary["held_out_seeds"] and not set(summary["held_out_seeds"]) & set(summary["fitted_seeds"])
    for name in ("held_out_median_abs_err_throughput", "held_out_median_abs_err_tpot", "max_ratio"):
        assert summary[name] >= 0
    per_seed = summary["per_seed"]
    assert sorted(per_seed) == sorted(summary["held_out_seeds"] + summary["fitted_seeds"])
    assert max(figures["max_ratio"] for figures in per_seed.values()) == summary["max_ratio"]
    rows = [line for line in lines if line[:3].isdigit() and ("held-out" in line or "fitted" in line)]
    assert len(rows) == 10
    # The seeds' recorded launch failures fail on the simulated engines with the real messages.
    assert (
        "real 'RuntimeError: Unsupported SM version for FP8 block scaling GEMM'; simulated 'RuntimeError: "
        "Unsupported SM version for FP8 block scaling GEMM'" in result.stdout
    )


def test_guidellm_blocks_arrive_at_the_profiles_constant_rate_and_vllm_bench_blocks_at_once():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import sim_vs_seeds

    seeds = {path.name[:3]: sim_vs_seeds.load_seed(path) for path in sorted(sim_vs_seeds.SEEDS.glob("*.txt"))}
    guidellm = sim_vs_seeds.workload(seeds["002"].blocks[0], 0.1)
    assert [spec.arrival for spec in guidellm[:3]] == [0.0, 0.001, 0.002]
    assert guidellm[-1].arrival == (len(guidellm) - 1) / 1000
    assert {spec.arrival for spec in sim_vs_seeds.workload(seeds["003"].blocks[0], 0.1)} == {0.0}


def test_the_ascend_engines_decode_at_the_step_cost_fitted_on_seed_004_at_concurrency_4():
    """Four requests at a time leave each decode step to the engine's own step cost, which seed 004's two
    ShareGPT batch-4 blocks measure: vLLM-Ascend (TPOT 122.7 ms) and MindIE (25.4 ms)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import sim_vs_seeds

    seed = sim_vs_seeds.load_seed(next(sim_vs_seeds.SEEDS.glob("004_*.txt")))
    blocks = [block for block in seed.blocks if block.result.get("max_concurrency") == 4]
    assert sorted(block.command.split()[0] for block in blocks) == ["mindie", "vllm"]
    for block in blocks:
        outcome = sim_vs_seeds.run_block(seed, block, 0.2)
        assert 0.9 < outcome.tpot < 1.1, (block.command, outcome.tpot)


def test_a_measurement_reprinted_in_a_seed_is_compared_once_on_the_seeds_engine_version():
    """Seed 002 prints its ShareGPT baseline and optimized runs twice (under their option and again under
    "Other Benchmark Cases"); each counts once. Its vLLM v0.17.1 reaches the simulated deployment."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import sim_vs_seeds

    seed = sim_vs_seeds.load_seed(next(sim_vs_seeds.SEEDS.glob("002_*.txt")))
    measurements = [(block.command, json.dumps(block.result, sort_keys=True)) for block in seed.blocks]
    assert len(measurements) == len(set(measurements))
    again = {block.label: line for block, line in seed.repeated}
    assert again == {"ShareGPT · Baseline": 9, "ShareGPT · Optimized": 9}
    baseline = "vllm serve Qwen/Qwen3.5-35B-A3B --reasoning-parser=qwen3 --max-model-len=32768"
    assert baseline in seed.baselines  # a reprinted baseline still names the seed's baseline command
    assert seed.facts.engine_versions["vllm"] == "v0.17.1"
    assert sim_vs_seeds.deployment_of(seed, baseline).gdn_mixed_chunks
