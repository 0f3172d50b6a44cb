"""How often do study decisions keep a candidate that is not better, and miss one that is?

Seeded simulated studies with the simulator's noise model (:class:`perflab.sim.noise.NoiseModel`,
run CV 2 %, launch CV 1 % by default). Each study has a baseline and four one-candidate stages whose
true gains over the best so far are 0, +2, +5 and +10 % in a seeded random order; a measured value is
the true value × the simulator's speed factor of that launch and run, so the truth is known. Each study
is decided twice from the same draws:

- **single-shot** (the old rule): one launch, one run per configuration; a candidate is kept when its
  value beats the best so far by ``min_gain_pct``;
- **new rule**: :func:`perflab.study.verdict.judge` on launch means (``repeats`` runs per launch), with
  the spread measured once beforehand on a calibration configuration (``CALIBRATION`` launches, reused
  by every study as a study reuses the spread of its host, model and engine); an ``undecided`` call
  measures both configurations again, alternating A B A B, until ``max_n`` launches of the candidate.

GPU time counts, per launch, the engine start and warm-up (``--launch-s``) plus ``--run-s`` per
benchmark run. It prints keep rates and GPU time per true gain and rule, then one JSON line:
``studies``, ``false_keep_rate`` (true gain 0, new rule), ``true_keep_rate`` (+5 %, new rule),
``gpu_time_ratio`` (new ÷ single-shot), ``single_shot_false_keep_rate`` and the rest.

``gpu_time_floor_ratio`` is what no fixed-size rule can undercut: to keep a +5 % candidate 95 % of the
time with an interval at the study's confidence above ``min_gain_pct``, the difference of its mean and
its reference's needs a standard error of at most (5 − min gain) ÷ (z of the interval + z₀.₉₅). The floor
is the cheapest launches × runs for those two configurations that reach it, plus one launch and one run
for each other configuration, over single-shot's one launch and one run for every configuration.

    python benchmarks/study_noise.py --studies 400 --seed 1
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perflab.sim.noise import NoiseModel  # noqa: E402
from perflab.study.noise import Spread, estimate_spread  # noqa: E402
from perflab.study.verdict import judge  # noqa: E402

GAINS_PCT = (0.0, 2.0, 5.0, 10.0)
CALIBRATION = 30  # launches of the configuration whose spread every study reuses


@dataclass
class Bench:
    """Draws measurements from the noise model and counts the GPU time they cost."""

    noise: NoiseModel
    launch_s: float
    run_s: float
    launches: int = 0
    gpu_s: float = 0.0

    def launch(self, true_value: float, runs: int) -> list[float]:
        """One launch of a configuration with true value ``true_value``: its ``runs`` values."""
        number = self.launches
        self.launches += 1
        self.gpu_s += self.launch_s + runs * self.run_s
        return [true_value * self.noise.speed(number, run) for run in range(runs)]


@dataclass
class Tally:
    kept: dict[float, int] = field(default_factory=lambda: defaultdict(int))
    seen: dict[float, int] = field(default_factory=lambda: defaultdict(int))
    outcomes: dict[tuple[float, str], int] = field(default_factory=lambda: defaultdict(int))
    gpu_s: float = 0.0


def single_shot_study(bench: Bench, gains: list[float], min_gain_pct: float, tally: Tally) -> None:
    best_true = 100.0
    best_value = bench.launch(best_true, 1)[0]
    for gain in gains:
        true = best_true * (1 + gain / 100)
        value = bench.launch(true, 1)[0]
        kept = value > best_value * (1 + min_gain_pct / 100)
        tally.seen[gain] += 1
        tally.kept[gain] += kept
        tally.outcomes[(gain, "better" if kept else "not_better")] += 1
        if kept:
            best_true, best_value = true, value


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def new_rule_study(
    bench: Bench, gains: list[float], args: argparse.Namespace, spread: Spread, tally: Tally
) -> None:
    prior = spread.per_launch_cv_pct(args.repeats)

    def measure(true: float) -> float:
        return mean(bench.launch(true, args.repeats))

    best_true = 100.0
    best = [measure(best_true) for _ in range(args.relaunches)]
    for gain in gains:
        true = best_true * (1 + gain / 100)
        candidate = [measure(true) for _ in range(args.relaunches)]
        while True:
            verdict = judge(
                candidate,
                best,
                higher_is_better=True,
                min_gain_pct=args.min_gain_pct,
                confidence=args.confidence,
                max_n=args.max_n,
                prior_cv_pct=prior,
                prior_df=spread.df,
            )
            if verdict.outcome != "undecided":
                break
            best.append(measure(best_true))  # A B A B: the reference again, then the candidate
            candidate.append(measure(true))
        tally.seen[gain] += 1
        tally.outcomes[(gain, verdict.outcome)] += 1
        if verdict.outcome == "better":
            tally.kept[gain] += 1
            best_true, best = true, candidate


def gpu_time_floor(args: argparse.Namespace, true_gain_pct: float = 5.0) -> float:
    """The least GPU time of a study, over single-shot's, for any fixed-size rule that keeps a
    ``true_gain_pct`` candidate 95 % of the time (see the module docstring)."""
    quantile = stats.norm.ppf(1 - (1 - args.confidence) / 2) + stats.norm.ppf(0.95)
    target_variance = ((true_gain_pct - args.min_gain_pct) / quantile) ** 2
    one_launch = args.launch_s + args.run_s
    designs = [  # (variance of a configuration's mean, its GPU time) per launches × runs per launch
        (
            (args.launch_cv_pct**2 + args.run_cv_pct**2 / runs) / launches,
            launches * (args.launch_s + runs * args.run_s),
        )
        for launches in range(1, 41)
        for runs in range(1, 41)
    ]
    pair = min(
        candidate_cost + reference_cost
        for candidate_variance, candidate_cost in designs
        for reference_variance, reference_cost in designs
        if candidate_variance + reference_variance <= target_variance
    )
    configurations = 1 + len(GAINS_PCT)
    return (pair + (configurations - 2) * one_launch) / (configurations * one_launch)


def calibrate(noise: NoiseModel, args: argparse.Namespace) -> Spread:
    bench = Bench(noise, args.launch_s, args.run_s, launches=10**6)  # launches apart from the studies'
    spread = estimate_spread([bench.launch(100.0, max(args.repeats, 2)) for _ in range(CALIBRATION)])
    assert spread is not None
    return spread


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--run-cv-pct", type=float, default=2.0)
    parser.add_argument("--launch-cv-pct", type=float, default=1.0)
    parser.add_argument("--min-gain-pct", type=float, default=1.0)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--relaunches", type=int, default=1)
    parser.add_argument("--max-n", type=int, default=6)
    parser.add_argument("--launch-s", type=float, default=120.0, help="engine start + warm-up, s")
    parser.add_argument("--run-s", type=float, default=60.0, help="one run of the tuning profile, s")
    args = parser.parse_args()

    order = random.Random(args.seed)
    single, new = Tally(), Tally()
    spread = None
    for study in range(args.studies):
        noise = NoiseModel(args.run_cv_pct, args.launch_cv_pct, seed=args.seed * 100_003 + study)
        spread = spread or calibrate(noise, args)
        gains = list(GAINS_PCT)
        order.shuffle(gains)
        for rule, tally in ((single_shot_study, single), (new_rule_study, new)):
            bench = Bench(noise, args.launch_s, args.run_s)
            if rule is single_shot_study:
                single_shot_study(bench, gains, args.min_gain_pct, tally)
            else:
                new_rule_study(bench, gains, args, spread, tally)
            tally.gpu_s += bench.gpu_s

    print(
        f"{args.studies} studies, noise run CV {args.run_cv_pct} %, launch CV {args.launch_cv_pct} %, "
        f"min gain {args.min_gain_pct} %, new rule: {args.repeats} runs per launch, "
        f"{args.relaunches} launch(es) first, up to {args.max_n}; spread {spread.text()}"
    )
    print(f"{'true gain':>10} {'rule':>12} {'kept':>7} {'outcomes':<50}")
    for gain in GAINS_PCT:
        for name, tally in (("single-shot", single), ("new", new)):
            rate = tally.kept[gain] / tally.seen[gain]
            outcomes = ", ".join(
                f"{outcome} {count}" for (g, outcome), count in sorted(tally.outcomes.items()) if g == gain
            )
            print(f"{gain:>+9.0f}% {name:>12} {rate:>7.1%} {outcomes:<50}")
    print(
        f"GPU time: single-shot {single.gpu_s / 3600:.1f} h, new {new.gpu_s / 3600:.1f} h "
        f"({args.launch_s:g} s per launch + {args.run_s:g} s per run)"
    )
    floor = gpu_time_floor(args)
    print(f"Floor for any fixed-size rule meeting 95 % keeps at +5 %: {floor:.2f}× single-shot's GPU time")
    summary = {
        "studies": args.studies,
        "candidates_per_gain": new.seen[0.0],
        "false_keep_rate": round(new.kept[0.0] / new.seen[0.0], 4),
        "true_keep_rate": round(new.kept[5.0] / new.seen[5.0], 4),
        "keep_rate_2pct": round(new.kept[2.0] / new.seen[2.0], 4),
        "keep_rate_10pct": round(new.kept[10.0] / new.seen[10.0], 4),
        "gpu_time_ratio": round(new.gpu_s / single.gpu_s, 3),
        "gpu_time_floor_ratio": round(floor, 3),
        "single_shot_false_keep_rate": round(single.kept[0.0] / single.seen[0.0], 4),
        "single_shot_true_keep_rate": round(single.kept[5.0] / single.seen[5.0], 4),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
