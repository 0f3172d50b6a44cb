"""How often does a study made from the new-study defaults keep a candidate that is not better, miss one
that is, and what does its published gain say?

Seeded simulated studies with the simulator's noise model (:class:`perflab.sim.noise.NoiseModel`): each
has a baseline and four one-candidate stages whose true gains over the best so far are 0, the study's
minimum gain, +5 and +10 % in a seeded random order. A candidate adds its own ``--seed=k`` to the best
configuration's arguments, so a configuration's true value is 100 × the product of (1 + gain) over the
stages whose candidate it carries; a measured launch value is that × the launch's speed factor × the mean
of its runs' factors. Every decision goes through the planner the coordinator uses
(:func:`perflab.study.study_plan.plan_study` with :func:`perflab.study.progress.study_rules` and
:func:`perflab.study.noise.study_spread`): the loop only measures what the plan wants and asks again.

Scenarios (run CV %, launch CV %): (2, 1), (5, 3), (2, 8), each on a fresh host (no spread to reuse),
and ``reused``: studied at (5, 3) with the spread measured by an earlier study at (2, 1) offered for
reuse — the case where reusing it blindly keeps no-gain candidates. The spread each study reuses is one
such earlier study's own, measured through the same code.

GPU time counts, per launch, the engine start and warm-up (``--launch-s``) plus ``--run-s`` per benchmark
run; ``gpu_time_ratio`` is over single-shot's (one launch and one run per configuration). The published
gain of a kept candidate is its gain adjusted for selection; ``kept_gain_bias_pct`` is the mean of
published − true over kept +5 % and +10 % candidates at (2, 1). ``detectable_gain_pct`` is the smallest
gain each study could have kept 80 % of the time at the spread it measured (the mean over studies).

It prints a table per scenario and, last, one JSON line.

    python benchmarks/study_noise.py            # the defaults: 400 studies per scenario
    python benchmarks/study_noise.py --studies 100 --seed 3
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perflab.engines.config import EngineConfig  # noqa: E402
from perflab.sim.noise import NoiseModel  # noqa: E402
from perflab.study.decide import detectable_gain  # noqa: E402
from perflab.study.noise import ReusedSpread, study_spread  # noqa: E402
from perflab.study.progress import study_rules  # noqa: E402
from perflab.study.spec import StudySpec, spec_from_data  # noqa: E402
from perflab.study.study_plan import plan_study  # noqa: E402
from perflab.study.types import Measurement, StudyPlan  # noqa: E402

SCENARIOS: dict[str, tuple[float, float]] = {"(2, 1)": (2.0, 1.0), "(5, 3)": (5.0, 3.0), "(2, 8)": (2.0, 8.0)}
REUSED = "reused"  # studied at (5, 3), offered the spread of an earlier study at (2, 1)


def default_spec(gains: list[float]) -> StudySpec:
    """A spec with the new-study form's decision defaults and one stage per true gain."""
    stages = [
        {
            "name": f"stage {index}",
            "candidates": [{"label": f"+{gain:g} %", "extra_args": [f"--seed={index}"]}],
        }
        for index, gain in enumerate(gains, start=1)
    ]
    return spec_from_data(
        {
            "name": "noise",
            "model": "Qwen/Qwen3-8B",
            "hosts": ["sim"],
            "baseline": {"engine": "vllm"},
            "tuning_profile": "sharegpt",
            "stages": stages,
        }
    )


def true_value(config: EngineConfig, gains: list[float]) -> float:
    """100 × (1 + gain) for every stage whose candidate the configuration carries."""
    value = 100.0
    for index, gain in enumerate(gains, start=1):
        if f"--seed={index}" in config.extra_args:
            value *= 1.0 + gain / 100.0
    return value


@dataclass
class Lab:
    """Measures launches with the noise model and counts their GPU time."""

    noise: NoiseModel
    repeats: int
    launch_s: float
    run_s: float
    launches: int = 0
    gpu_s: float = 0.0

    def launch(self, truth: float) -> float:
        number = self.launches
        self.launches += 1
        self.gpu_s += self.launch_s + self.repeats * self.run_s
        runs = [truth * self.noise.speed(number, run) for run in range(self.repeats)]
        return statistics.fmean(runs)


def run_study(
    gains: list[float], lab: Lab, reused: ReusedSpread | None = None, max_steps: int = 200
) -> tuple[StudyPlan, StudySpec, float | None, ReusedSpread | None]:
    """One study to its end; returns its final plan, spec, detectable gain and the spread it offers."""
    spec = default_spec(gains)
    baseline = spec.baseline_config(1, 1)
    values: dict[str, list[float]] = {}
    configs: dict[str, EngineConfig] = {}
    for _ in range(max_steps):
        spread = study_spread(list(values.values()), reused)
        rules = study_rules(spec, spread)
        measured = {
            fingerprint: Measurement(
                "measured", 1, statistics.fmean(found), 1.0, finished=True, values=tuple(found)
            )
            for fingerprint, found in values.items()
        }
        plan = plan_study(baseline=baseline, stages=spec.stages, measurements=measured, rules=rules, gpus=1)
        if plan.status != "running" or not plan.wanted:
            break
        for config in plan.wanted:
            fingerprint = config.fingerprint()
            configs[fingerprint] = config
            values.setdefault(fingerprint, []).append(lab.launch(true_value(config, gains)))
    else:
        raise RuntimeError("a study did not end within its step bound")
    detectable = detectable_gain(rules)
    offered = None
    if spread.measured_cv_pct is not None:
        offered = ReusedSpread(spread.measured_cv_pct, spread.measured_df, study_id=0)
    return plan, spec, detectable, offered


@dataclass
class Tally:
    seen: Counter = field(default_factory=Counter)
    kept: Counter = field(default_factory=Counter)
    outcomes: Counter = field(default_factory=Counter)
    bias: dict[float, list[float]] = field(default_factory=dict)
    detectable: list[float] = field(default_factory=list)
    gpu_s: float = 0.0
    single_shot_gpu_s: float = 0.0

    def add(self, plan: StudyPlan, gains: list[float], detectable: float | None) -> None:
        if detectable is not None:
            self.detectable.append(detectable)
        for stage in plan.stages:
            gain = gains[stage.index - 1]
            candidate = stage.candidates[0]
            self.seen[gain] += 1
            verdict = candidate.verdict
            outcome = (
                candidate.decision if verdict is None or candidate.decision == "winner" else verdict.outcome
            )
            self.outcomes[(gain, outcome)] += 1
            if candidate.decision == "winner":
                self.kept[gain] += 1
                published = verdict.published_gain_pct if verdict is not None else None
                if published is not None:
                    self.bias.setdefault(gain, []).append(published - gain)

    def rate(self, gain: float) -> float:
        return self.kept[gain] / self.seen[gain] if self.seen[gain] else 0.0


def simulate(name: str, args: argparse.Namespace, gains_order: random.Random) -> Tally:
    run_cv, launch_cv = SCENARIOS.get(name, (5.0, 3.0))
    tally = Tally()
    gains_all = [0.0, args.min_gain_pct, 5.0, 10.0]
    for study in range(args.studies):
        seed = args.seed * 1_000_003 + study
        reused = None
        if name == REUSED:
            earlier_lab = Lab(NoiseModel(2.0, 1.0, seed=seed + 500_000_000), 1, args.launch_s, args.run_s)
            *_, reused = run_study(list(gains_all), earlier_lab)
        gains = list(gains_all)
        gains_order.shuffle(gains)
        lab = Lab(NoiseModel(run_cv, launch_cv, seed=seed), 1, args.launch_s, args.run_s)
        plan, _, detectable, _ = run_study(gains, lab, reused)
        tally.add(plan, gains, detectable)
        tally.gpu_s += lab.gpu_s
        tally.single_shot_gpu_s += (1 + len(gains)) * (args.launch_s + args.run_s)
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=400, help="studies per scenario")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--min-gain-pct", type=float, default=1.0, help="the form's default")
    parser.add_argument("--launch-s", type=float, default=120.0, help="engine start + warm-up, s")
    parser.add_argument("--run-s", type=float, default=60.0, help="one run of the tuning profile, s")
    parser.add_argument("--only", choices=[*SCENARIOS, REUSED], action="append", help="these scenarios alone")
    args = parser.parse_args()

    tallies: dict[str, Tally] = {}
    for name in args.only or (*SCENARIOS, REUSED):
        tallies[name] = simulate(name, args, random.Random(args.seed))
    gains = [0.0, args.min_gain_pct, 5.0, 10.0]
    print(
        f"{args.studies} studies per scenario from the new-study defaults "
        f"(min gain {args.min_gain_pct:g} %); "
        f"{args.launch_s:g} s per launch + {args.run_s:g} s per run"
    )
    print(f"{'scenario':>9} {'true gain':>9} {'kept':>7} {'bias':>7}  outcomes")
    for name, tally in tallies.items():
        for gain in gains:
            bias = tally.bias.get(gain)
            bias_text = f"{statistics.fmean(bias):+.2f}" if bias else "—"
            outcomes = ", ".join(
                f"{outcome} {count}" for (g, outcome), count in sorted(tally.outcomes.items()) if g == gain
            )
            print(f"{name:>9} {gain:>+8.0f}% {tally.rate(gain):>7.1%} {bias_text:>7}  {outcomes}")
        ratio = tally.gpu_s / tally.single_shot_gpu_s
        detectable = statistics.fmean(tally.detectable) if tally.detectable else float("nan")
        print(f"{name:>9} GPU time {ratio:.2f}× single-shot; detectable gain {detectable:.1f} % (mean)")
    quiet = tallies.get("(2, 1)") or next(iter(tallies.values()))
    kept_bias = [value for gain in (5.0, 10.0) for value in quiet.bias.get(gain, [])]
    summary = {
        "studies": args.studies,
        "min_gain_pct": args.min_gain_pct,
        "false_keep_rate_max": round(max(tally.rate(0.0) for tally in tallies.values()), 4),
        "threshold_keep_rate_max": round(max(tally.rate(args.min_gain_pct) for tally in tallies.values()), 4),
        "keep_rate_10pct": round(quiet.rate(10.0), 4),
        "gpu_time_ratio": round(quiet.gpu_s / quiet.single_shot_gpu_s, 3),
        "kept_gain_bias_pct": round(statistics.fmean(kept_bias), 3) if kept_bias else None,
        "scenarios": {
            name: {
                "keep_rates": {f"{gain:+g}": round(tally.rate(gain), 4) for gain in gains},
                "gpu_time_ratio": round(tally.gpu_s / tally.single_shot_gpu_s, 3),
                "detectable_gain_pct": round(statistics.fmean(tally.detectable), 2)
                if tally.detectable
                else None,
            }
            for name, tally in tallies.items()
        },
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
