"""How close a search stage gets to a joint space's optimum, and with how many launches (simulated).

The space: vLLM serving Llama-3.1-70B on one simulated 8×H100 node, 4 max-num-seqs × 4
max-num-batched-tokens × 4 parallelism layouts (TP1 ×8, TP2 ×4, TP4 ×2, TP8, replicas filling the node)
= 64 configurations. The layouts interact with the batching knobs through KV-cache capacity (a wider
batch needs the memory a larger prefill chunk takes), and TP1 runs out of memory loading the weights,
so 16 cells are infeasible.

Each cell is evaluated through the simulator's own memory plan and step-cost model
(:func:`perflab.sim.perfmodel.plan_memory`, :class:`perflab.sim.perfmodel.PerfModel`) for a saturated
workload of 1024-token prompts and 128-token outputs, in steady state: the batch is the smallest of
max-num-seqs and what the KV cache holds, one step carries each decoding sequence's token plus the
prefill tokens that keep the batch full, capped by max-num-batched-tokens. Measuring every cell once
gives the optimum. The search is driven by the same code a study uses (:mod:`perflab.study.search`:
proposals, deduplication, infeasible cells, screening with the pruner, the noise-aware final pick with
re-measurements counted as launches). Noise, when on, is added here at the measurement level: every
full measurement is multiplied by 1 + N(0, CV), a screening (a quarter of the prompts) by
1 + N(0, 2·CV).

The greedy staged study is :func:`perflab.study.study_plan.plan_study` with the seeds' stage order
(parallelism, then max-num-seqs, then max-num-batched-tokens) from TP8 with max-num-seqs 256 and
max-num-batched-tokens 8192 (vLLM's H100 default), noise off.

Run from the repository root: ``python benchmarks/search_efficiency.py [--trials 20]``. Prints each
trial's launches and gap, and as its last line one JSON object with the summary.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perflab.engines.config import EngineConfig  # noqa: E402
from perflab.sim.deployment import Knobs, resolve_deployment  # noqa: E402
from perflab.sim.failures import EngineFailure  # noqa: E402
from perflab.sim.hardware import find_accelerator  # noqa: E402
from perflab.sim.perfmodel import PerfModel, plan_memory  # noqa: E402
from perflab.study.budget import fill_budget  # noqa: E402
from perflab.study.configs import build_config, config_fields  # noqa: E402
from perflab.study.search import Observation, Trial, final_pick, promising, step, with_outcomes  # noqa: E402
from perflab.study.search_space import SearchSpec  # noqa: E402
from perflab.study.spec import StageSpec  # noqa: E402
from perflab.study.study_plan import plan_study  # noqa: E402
from perflab.study.types import Measurement, Rules  # noqa: E402

MODEL = "meta-llama/Llama-3.1-70B-Instruct"
GPUS = 8
INPUT_TOKENS, OUTPUT_TOKENS = 1024, 128
PROMPTS = 1000
START_S = 180.0  # loading a 70B model and capturing graphs
SEQS = (64, 128, 256, 512)
BATCHED = (2048, 4096, 8192, 16384)
LAYOUTS = ({"tp": 1}, {"tp": 2}, {"tp": 4}, {"tp": 8})
OBJECTIVES = ("total_token_throughput",)
MIN_GAIN_PCT = 1.0
BASE = {"engine": "vllm", "model": MODEL, "max_model_len": 4096}
SEARCH = {
    "knobs": {"max_num_seqs": list(SEQS), "max_num_batched_tokens": list(BATCHED)},
    "parallelism": list(LAYOUTS),
    "budget": {"launches": 11},
    "screening": 0.25,
    "startup_trials": 5,
}


def throughput(config: EngineConfig) -> float:
    """Steady-state total tokens/s of the node (raises EngineFailure where the engine would fail)."""
    knobs = Knobs(config.model)
    knobs.tp = config.tp
    knobs.max_num_seqs = config.max_num_seqs
    knobs.max_num_batched_tokens = config.max_num_batched_tokens
    knobs.max_model_len = config.max_model_len
    deployment = resolve_deployment("vllm", knobs, find_accelerator("H100"))
    memory = plan_memory(deployment)
    batch = min(deployment.max_num_seqs, memory.kv_tokens // (INPUT_TOKENS + OUTPUT_TOKENS))
    if batch < 1:
        raise EngineFailure("vllm", ["ValueError: the KV cache holds no whole request"])
    per_request = 1.0 + INPUT_TOKENS / OUTPUT_TOKENS  # prefill tokens per decoded token, plus it
    tokens = min(batch * per_request, deployment.max_num_batched_tokens)
    decoding = tokens / per_request
    prefill = tokens - decoding
    context = INPUT_TOKENS + OUTPUT_TOKENS / 2.0
    pairs = decoding * context + prefill * INPUT_TOKENS / 2.0
    seconds = PerfModel(deployment).step_seconds(
        int(tokens), pairs, decoding * context + prefill * INPUT_TOKENS / 2.0, int(decoding), int(decoding)
    )
    return tokens / seconds * config.replicas


def build(params: dict[str, Any], spec: SearchSpec) -> EngineConfig:
    changes = {**spec.changes(params), "replicas": 1}
    return fill_budget(build_config(BASE, changes, gpus_per_node=GPUS), GPUS)


@dataclass
class Cell:
    config: EngineConfig
    value: float | None  # None: the engine fails to start it


def grid(spec: SearchSpec) -> dict[str, Cell]:
    cells = {}
    for seqs, batched, layout in itertools.product(SEQS, BATCHED, LAYOUTS):
        config = build(
            {"max_num_seqs": seqs, "max_num_batched_tokens": batched, "parallelism": f"TP{layout['tp']}"},
            spec,
        )
        try:
            value: float | None = throughput(config)
        except EngineFailure:
            value = None
        cells[config.fingerprint()] = Cell(config, value)
    return cells


class Bench:
    """Measurements with optional noise; counts launches and GPU-hours."""

    def __init__(self, cells: dict[str, Cell], cv: float, rng: random.Random) -> None:
        self.cells, self.cv, self.rng = cells, cv, rng
        self.launches = 0
        self.gpu_hours = 0.0

    def _noisy(self, value: float, cv: float) -> float:
        return value * (1.0 + self.rng.gauss(0.0, cv)) if cv else value

    def _hours(self, fingerprint: str, fraction: float) -> float:
        cell = self.cells[fingerprint]
        busy = PROMPTS * fraction * (INPUT_TOKENS + OUTPUT_TOKENS) / cell.value if cell.value else 0.0
        return (START_S + busy) / 3600.0 * cell.config.gpus_needed

    def launch(self, fingerprint: str, screening: float | None) -> float | None:
        """Start the configuration: its screening value (full without screening), None if it fails."""
        self.launches += 1
        cell = self.cells[fingerprint]
        if cell.value is None:
            self.gpu_hours += START_S / 3600.0 * cell.config.gpus_needed
            return None
        self.gpu_hours += self._hours(fingerprint, screening or 1.0)
        return self._noisy(cell.value, 2.0 * self.cv if screening else self.cv)

    def full(self, fingerprint: str, fraction: float) -> float:
        """The full profile on the same launch (the prompts the screening did not send)."""
        self.gpu_hours += (
            self._hours(fingerprint, 1.0 - fraction)
            - START_S / 3600.0 * self.cells[fingerprint].config.gpus_needed
        )
        return self._noisy(self.cells[fingerprint].value, self.cv)


def search(cells: dict[str, Cell], seed: int, cv: float) -> tuple[float, int, float]:
    """One seeded search: the recommended configuration's true value, launches, GPU-hours."""
    spec = SearchSpec.model_validate({**SEARCH, "seed": seed, "noise_cv_pct": cv * 100})
    bench = Bench(cells, cv, random.Random(seed * 7919 + 1))
    seen: dict[str, Observation] = {}
    trials: list[Trial] = []
    while True:
        trials = with_outcomes(trials, seen)
        result = step(
            spec,
            OBJECTIVES,
            trials,
            lambda params: build(params, spec),
            gpu_hours=bench.gpu_hours,
            min_gain_pct=MIN_GAIN_PCT,
        )
        trials = list(result.trials)
        if result.stop:
            break
        for trial in result.proposed:
            screened = bench.launch(trial.fingerprint, spec.screening)
            if screened is None:
                seen[trial.fingerprint] = Observation("infeasible", note="engine failed to start")
                continue
            seen[trial.fingerprint] = Observation("screened", screening=screened)
            if promising(spec, OBJECTIVES, with_outcomes(trials, seen), trial.number):
                value = bench.full(trial.fingerprint, spec.screening)
                seen[trial.fingerprint] = Observation("complete", screened, (value,), (value,))
            else:
                seen[trial.fingerprint] = Observation("pruned", screening=screened)
    while True:
        trials = with_outcomes(trials, seen)
        pick = final_pick(spec, OBJECTIVES, trials, rules=Rules(min_gain=MIN_GAIN_PCT / 100))
        if not pick.remeasure:
            break
        for number in pick.remeasure:
            fingerprint = trials[number].fingerprint
            bench.launch(fingerprint, None)
            value = bench._noisy(cells[fingerprint].value, cv)
            old = seen[fingerprint]
            seen[fingerprint] = Observation("complete", old.screening, old.values, (*old.samples, value))
    chosen = cells[pick.trial.fingerprint].value if pick.trial else 0.0
    return chosen, bench.launches, bench.gpu_hours


def greedy(cells: dict[str, Cell]) -> tuple[float, int]:
    """The staged study (noise off): its final configuration's value and launches."""
    baseline = build_config(
        BASE, {"tp": 8, "max_num_seqs": 256, "max_num_batched_tokens": 8192}, gpus_per_node=GPUS
    )
    stages = [
        StageSpec.model_validate(
            {"name": "Parallelism", "candidates": [{"tp": tp, "replicas": "fill"} for tp in (1, 2, 4)]}
        ),
        StageSpec.model_validate(
            {"name": "Max num seqs", "dimension": "max_num_seqs", "candidates": [64, 128, 512]}
        ),
        StageSpec.model_validate(
            {
                "name": "Batched tokens",
                "dimension": "max_num_batched_tokens",
                "candidates": [2048, 4096, 16384],
            }
        ),
    ]
    measured: dict[str, Measurement] = {}
    while True:
        plan = plan_study(
            baseline=baseline,
            stages=stages,
            measurements=measured,
            rules=Rules(min_gain=MIN_GAIN_PCT / 100),
            gpus_per_node=GPUS,
        )
        if not plan.wanted:
            break
        for config in plan.wanted:
            value = throughput_or_none(config)
            state = "measured" if value is not None else "failed"
            measured[config.fingerprint()] = Measurement(
                state, 0, value, 1.0 if value else None, finished=True
            )
    return plan.best.value, len(measured)


def throughput_or_none(config: EngineConfig) -> float | None:
    fields = config_fields(config)
    try:
        return throughput(EngineConfig.model_validate(fields))
    except EngineFailure:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    args = parser.parse_args()
    spec = SearchSpec.model_validate(SEARCH)
    cells = grid(spec)
    feasible = {key: cell for key, cell in cells.items() if cell.value is not None}
    optimum = max(cell.value for cell in feasible.values())
    best = max(feasible.values(), key=lambda cell: cell.value).config
    print(
        f"space: {len(cells)} configurations, {len(cells) - len(feasible)} infeasible; "
        f"optimum {optimum:.1f} tok/s (TP{best.tp} ×{best.replicas}, max-num-seqs {best.max_num_seqs}, "
        f"max-num-batched-tokens {best.max_num_batched_tokens})"
    )
    within_2 = sum(1 for cell in feasible.values() if cell.value >= optimum * 0.98)
    print(f"cells within 2% of the optimum: {within_2}")
    summary: dict[str, Any] = {"space_size": len(cells), "trials": args.trials}
    for name, cv in (("noise off", 0.0), ("run CV 2%", 0.02)):
        gaps, fractions, hours = [], [], []
        for seed in range(args.trials):
            value, launches, gpu_hours = search(cells, seed, cv)
            gap = (1.0 - value / optimum) * 100.0
            gaps.append(gap)
            fractions.append(launches / len(cells))
            hours.append(gpu_hours)
            print(
                f"{name} seed {seed:2d}: {launches:2d} launches, {gpu_hours:5.1f} GPU-hours, gap {gap:5.2f}%"
            )
        rate = sum(1 for gap in gaps if gap <= 2.0) / len(gaps)
        print(
            f"{name}: within 2% in {rate * 100:.0f}% of trials, "
            f"mean launches {statistics.mean(fractions) * len(cells):.1f} "
            f"({statistics.mean(fractions) * 100:.1f}% of the grid), mean gap {statistics.mean(gaps):.2f}%, "
            f"mean {statistics.mean(hours):.1f} GPU-hours"
        )
        key = "" if cv == 0.0 else "_noise"
        summary[f"within_2pct_rate{key}"] = rate
        summary[f"mean_launch_fraction{key}"] = round(statistics.mean(fractions), 4)
        summary[f"mean_gap_pct{key}"] = round(statistics.mean(gaps), 3)
    greedy_value, greedy_launches = greedy(cells)
    summary["greedy_gap_pct"] = round((1.0 - greedy_value / optimum) * 100.0, 3)
    summary["greedy_launches"] = greedy_launches
    print(f"greedy staged study: {greedy_launches} launches, gap {summary['greedy_gap_pct']:.2f}%")
    summary["grid_gpu_hours"] = round(
        sum(
            Bench(cells, 0.0, random.Random(0))._hours(key, 1.0)
            if cell.value
            else START_S / 3600 * cell.config.gpus_needed
            for key, cell in cells.items()
        ),
        1,
    )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
