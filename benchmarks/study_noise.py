"""How often does a study made from the new-study defaults keep a change that is not better, miss one that
is, change its mind, and how far is its published gain from the truth — under noise it was tuned on and
noise it was not?

Seeded studies, each decided by the planner the coordinator uses, driven offline
(:class:`perflab.study.replay.Replay`: ``study_spread → study_rules → plan_study``, every record the
plan stores kept and read back as the coordinator does), on a model of a host's noise: a launch's
value is the configuration's true value × the host's drift at that launch × a launch factor × the mean
of its runs' factors. Designs (a candidate adds its own ``--seed=…`` to the best configuration's
arguments, so a configuration's true value is 100 × the product of (1 + gain) over the candidates it
carries):

- ``one-stage``: one stage of one candidate (true gain 0, ``min_gain_pct``, +5 or +10 %: as many studies
  of each as of the other designs);
- ``four-stage``: four one-candidate stages with those four gains in a seeded random order;
- ``five-candidate``: one stage of five candidates, true gains 0, ``min_gain_pct``, 3, +5 and +10 %;
- ``four no-op``: four stages of no gain — how often a study recommends a change when none helps;
- ``at detectable``: one stage of one candidate whose true gain is 0.8, 1 and 1.2 × the detectable gain
  the design states at the host's true spread (where its real 80 %-power point lies);
- ``faster``: one stage of three candidates 20, 37 and 49 % faster than the baseline (a quarter as many
  studies), whose benchmarks are sized as the runner sizes them
  (:func:`perflab.runner.evidence.sized_benchmark`): the baseline's one pass of the tuning profile
  (``--per-round`` prompts) lasts ``--round-s`` seconds of the engine's time, a launch ``v`` times as
  fast lasts ``1/v`` of that; ``censored_faster`` is the share of candidates at least 20 % faster than
  the baseline of which some launch's benchmark would still be too short to judge.

Scenarios (run CV %, launch CV %) — tuned on: (2, 1), (3, 2), (1, 5), (8, 1), ``t3`` (3, 2) with
Student-t launch noise on 3 df, ``drift`` (2, 1) with +1 %/launch, ``reused 3× quieter`` (3, 2) offered a
spread of a third of the true CV on 20 df; held out (never used to choose anything): (5, 3), (2, 8),
``outliers`` (3, 2) with 5 % of launches 15 % slower, ``warm-up`` (2, 1) whose first launches are up to
8 % slower, ``slowing`` (2, 1) with −1 %/launch, ``reused 1.5× quieter`` (3, 2), ``reused alike`` (3, 2)
offered its own spread on 20 df, and a ``three-candidate`` stage of true gains 3, 7 and 10 %.

Figures per scenario and design: keep rates by true gain; the published gain of kept +5 % and +10 %
candidates less the truth (``bias``: the mean over kept candidates of the published gain's expectation
over the noise of the confirmation launches, given everything before them — the confirmation launches
take part in no decision, so this has the published gain's mean and a far smaller spread; ``raw`` is the
mean of the published figures themselves, with its standard error); stage decisions that changed once
made (``flips``) and launches of a candidate after it was stopped; the false-change rate of four no-op
stages; the share of candidates at least 20 % faster than the baseline whose benchmark the evidence
floor would censor (``censored_faster``); GPU time against single-shot (one launch and one run per
configuration; a launch costs ``--launch-s`` plus ``--run-s`` per run); the detectable gain stated at the
end of studies that kept nothing and of studies that kept something.

The last line is JSON: the acceptance figures over the scenarios tuned on (keep rates at 0 and at the
minimum gain over each scenario's candidates of all designs, and by design), then the same over the
held-out scenarios. ``python benchmarks/study_noise.py`` (default 300 studies per scenario and design,
the one-stage design four times as many), ``--smoke`` (a few dozen studies that print the same figures, in
under a minute), ``--only NAME``, ``--jobs N`` (scenarios at once, the same figures).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perflab.engines.config import EngineConfig  # noqa: E402
from perflab.runner.evidence import sized_benchmark  # noqa: E402
from perflab.study.confirm import fresh_gain  # noqa: E402
from perflab.study.decide import detectable_gain  # noqa: E402
from perflab.study.noise import ReusedSpread, StudySpread  # noqa: E402
from perflab.study.progress import study_rules  # noqa: E402
from perflab.study.replay import Replay  # noqa: E402
from perflab.study.spec import StudySpec, spec_from_data  # noqa: E402
from perflab.study.types import CandidatePlan, StudyPlan  # noqa: E402


@dataclass(frozen=True)
class Scenario:
    """A host's noise: run and launch CV (%), the launch factor's tails, a drift of speed over the
    study's launches, and a spread offered for reuse (its CV as a fraction of the true one, its df)."""

    run_cv: float
    launch_cv: float
    tails: str = "normal"  # normal (log-normal), t3 (Student-t, 3 df), outliers (5 % 15 % slower)
    drift: str = "none"  # none, rising (+1 %/launch), falling (−1 %/launch), warm-up
    reused: tuple[float, int] | None = None
    held_out: bool = False

    @property
    def cv_pct(self) -> float:
        """The CV of one launch's value (one run per launch)."""
        return math.sqrt(self.run_cv**2 + self.launch_cv**2)

    def drift_factor(self, launch: int) -> float:
        if self.drift == "rising":
            return 1.0 + 0.01 * launch
        if self.drift == "falling":
            return 1.0 / (1.0 + 0.01 * launch)
        if self.drift == "warm-up":
            return 1.0 - 0.08 * math.exp(-launch / 3.0)
        return 1.0

    def noise(self, rng: np.random.Generator) -> float:
        """One launch's noise factor (launch × run, mean about 1)."""
        return float(self.noises(rng, ()))

    def noises(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        """Launch noise factors (launch × run, mean about 1), ``shape`` of them at once."""
        run = np.exp(_sigma(self.run_cv) * rng.standard_normal(shape))
        if self.tails == "t3":
            launch = np.maximum(1.0 + self.launch_cv / 100.0 * rng.standard_t(3, shape) / math.sqrt(3.0), 0.2)
        else:
            launch = np.exp(_sigma(self.launch_cv) * rng.standard_normal(shape))
            if self.tails == "outliers":
                launch = np.where(rng.random(shape) < 0.05, launch * 0.85, launch)
        return launch * run


def _sigma(cv_pct: float) -> float:
    return math.sqrt(math.log(1.0 + (cv_pct / 100.0) ** 2))


SCENARIOS: dict[str, Scenario] = {
    "(2, 1)": Scenario(2.0, 1.0),
    "(3, 2)": Scenario(3.0, 2.0),
    "(1, 5)": Scenario(1.0, 5.0),
    "(8, 1)": Scenario(8.0, 1.0),
    "t3": Scenario(3.0, 2.0, tails="t3"),
    "drift": Scenario(2.0, 1.0, drift="rising"),
    "reused 3× quieter": Scenario(3.0, 2.0, reused=(1 / 3, 20)),
    "(5, 3)": Scenario(5.0, 3.0, held_out=True),
    "(2, 8)": Scenario(2.0, 8.0, held_out=True),
    "outliers": Scenario(3.0, 2.0, tails="outliers", held_out=True),
    "warm-up": Scenario(2.0, 1.0, drift="warm-up", held_out=True),
    "slowing": Scenario(2.0, 1.0, drift="falling", held_out=True),
    "reused 1.5× quieter": Scenario(3.0, 2.0, reused=(1 / 1.5, 20), held_out=True),
    "reused alike": Scenario(3.0, 2.0, reused=(1.0, 20), held_out=True),
}
DETECTABLE_AT = ("(2, 1)", "(3, 2)", "(1, 5)", "(8, 1)")
DETECTABLE_FACTORS = (0.8, 1.0, 1.2)
FASTER_GAINS = (20.0, 37.0, 49.0)
BASELINE_VALUE = 100.0


def stage_spec(stages: Sequence[Sequence[float]], min_gain_pct: float) -> StudySpec:
    """A spec with the new-study form's decision defaults and the given stages of true gains."""
    return spec_from_data(
        {
            "name": "noise",
            "model": "Qwen/Qwen3-8B",
            "hosts": ["sim"],
            "baseline": {"engine": "vllm"},
            "tuning_profile": "sharegpt",
            "min_gain_pct": min_gain_pct,
            "stages": [
                {
                    "name": f"stage {index}",
                    "candidates": [
                        {"label": f"{gain:+g} %", "extra_args": [f"--seed={index}.{position}"]}
                        for position, gain in enumerate(gains)
                    ],
                }
                for index, gains in enumerate(stages, start=1)
            ],
        }
    )


def true_value(config: EngineConfig, stages: Sequence[Sequence[float]]) -> float:
    """100 × (1 + gain) for every candidate the configuration carries."""
    value = BASELINE_VALUE
    for index, gains in enumerate(stages, start=1):
        for position, gain in enumerate(gains):
            if f"--seed={index}.{position}" in config.extra_args:
                value *= 1.0 + gain / 100.0
    return value


@dataclass
class Host:
    """Launches on one host: each launch's value, its drift and noise, and the GPU time spent."""

    scenario: Scenario
    stages: Sequence[Sequence[float]]
    rng: np.random.Generator
    launch_s: float
    run_s: float
    round_s: float = 6.5
    per_round: int = 100
    launches: int = 0
    slots: dict[str, list[int]] = field(default_factory=dict)
    faster: set[str] = field(default_factory=set)
    censored: set[str] = field(default_factory=set)

    def measure(self, config: EngineConfig) -> float:
        slot = self.launches
        self.launches += 1
        fingerprint = config.fingerprint()
        self.slots.setdefault(fingerprint, []).append(slot)
        truth = true_value(config, self.stages)
        value = truth * self.scenario.drift_factor(slot) * self.scenario.noise(self.rng)
        if truth >= 1.2 * BASELINE_VALUE:
            self.faster.add(fingerprint)
            if sized_benchmark(self.round_s * BASELINE_VALUE / value, self.per_round).too_short is not None:
                self.censored.add(fingerprint)
        return value

    @property
    def gpu_s(self) -> float:
        return self.launches * (self.launch_s + self.run_s)


@dataclass
class Watch:
    """Every decision as first made, to count those that change later, and launches after a stop."""

    first: dict[tuple, object] = field(default_factory=dict)
    flips: int = 0
    after_stop: int = 0
    stopped: set[str] = field(default_factory=set)

    def __call__(self, plan: StudyPlan) -> None:
        for stage in plan.stages:
            self._seen(
                ("stage", stage.index), (stage.decided, stage.winner.fingerprint if stage.winner else None)
            )
            for candidate in stage.candidates:
                if candidate.decision is not None:
                    self._seen(("candidate", stage.index, candidate.position), candidate.decision)
                    if candidate.decision not in ("winner",):
                        self.stopped.add(candidate.fingerprint or "")
        confirmation = plan.confirmation
        if confirmation is not None and confirmation.measured:
            self._seen(("recommendation",), plan.best.fingerprint)
        self.after_stop += sum(1 for config in plan.wanted if config.fingerprint() in self.stopped)

    def _seen(self, key: tuple, value: object) -> None:
        if key[0] == "stage" and not value[0]:  # type: ignore[index]
            return
        if key in self.first and self.first[key] != value:
            self.flips += 1
        self.first.setdefault(key, value)


@dataclass
class Tally:
    """What the studies of one scenario and design showed."""

    seen: Counter = field(default_factory=Counter)
    kept: Counter = field(default_factory=Counter)
    bias: dict[float, list[float]] = field(default_factory=dict)
    raw: dict[float, list[float]] = field(default_factory=dict)
    gpu_s: float = 0.0
    single_shot_s: float = 0.0
    studies: int = 0
    changes: int = 0
    flips: int = 0
    after_stop: int = 0
    stated: dict[bool, list[float]] = field(default_factory=dict)
    faster: int = 0
    censored: int = 0

    def rate(self, gain: float) -> float:
        return self.kept[gain] / self.seen[gain] if self.seen[gain] else math.nan

    def mean_bias(self, gain: float) -> float | None:
        found = self.bias.get(gain)
        return statistics.fmean(found) if found else None


def expected_published(
    scenario: Scenario,
    host: Host,
    plan: StudyPlan,
    stage_index: int,
    cv_pct: float,
    rng: np.random.Generator,
    draws: int,
) -> float | None:
    """The kept stage's published gain, as the plan computes it at the study's spread ``cv_pct``,
    averaged over ``draws`` fresh draws of its confirmation launches' noise (same configurations, same
    launch positions): its expectation given everything before."""
    confirmation = plan.confirmation
    stage = next(stage for stage in plan.stages if stage.index == stage_index)
    if confirmation is None or not confirmation.measured or stage.winner is None:
        return None

    def truths(candidate: CandidatePlan) -> list[float]:
        """The true value × the drift at each of the configuration's confirmation launches."""
        fingerprint = candidate.fingerprint
        start = confirmation.before[fingerprint]
        slots = host.slots[fingerprint][start : start + confirmation.order.count(fingerprint)]
        return [true_value(candidate.config, host.stages) * scenario.drift_factor(slot) for slot in slots]

    truth_ours, truth_theirs = np.array(truths(stage.winner)), np.array(truths(stage.reference))
    ours = truth_ours * scenario.noises(rng, (draws, truth_ours.size))
    theirs = truth_theirs * scenario.noises(rng, (draws, truth_theirs.size))
    gains = (fresh_gain(mine, others, cv_pct, True)[1] for mine, others in zip(ours, theirs, strict=True))
    return statistics.fmean(gains)


def run_design(
    scenario: Scenario,
    design: str,
    studies: int,
    args: argparse.Namespace,
    seed: int,
) -> Tally:
    """``studies`` studies of one design on one scenario's host."""
    tally = Tally()
    order = random.Random(seed)
    draws = np.random.default_rng(seed + 7)
    for number in range(studies):
        stages = design_stages(design, number, order, scenario, args)
        spec = stage_spec(stages, args.min_gain_pct)
        host = Host(
            scenario,
            stages,
            np.random.default_rng(seed * 100_003 + number),
            args.launch_s,
            args.run_s,
            args.round_s,
            args.per_round,
        )
        reused = None
        if scenario.reused is not None:
            fraction, df = scenario.reused
            reused = ReusedSpread(scenario.cv_pct * fraction, df, study_id=0)
        watch = Watch()
        replay = Replay(spec, host.measure, reused=reused, seed=seed * 7919 + number)
        plan = replay.run(each=watch)
        watch(plan)
        tally.studies += 1
        tally.flips += watch.flips
        tally.after_stop += watch.after_stop
        tally.gpu_s += host.gpu_s
        tally.faster += len(host.faster)
        tally.censored += len(host.censored)
        tally.single_shot_s += (1 + sum(len(gains) for gains in stages)) * (args.launch_s + args.run_s)
        tally.changes += plan.best is not plan.baseline
        kept_any = False
        for stage in plan.stages:
            for candidate in stage.candidates:
                gain = stages[stage.index - 1][candidate.position]
                tally.seen[gain] += 1
                if candidate.decision != "winner":
                    continue
                kept_any = True
                tally.kept[gain] += 1
                if gain in (5.0, 10.0) and candidate.verdict is not None:
                    tally.raw.setdefault(gain, []).append(candidate.verdict.published_gain_pct - gain)
                    cv_pct = replay.spread.cv_pct if replay.spread is not None else None
                    expected = (
                        expected_published(scenario, host, plan, stage.index, cv_pct, draws, args.draws)
                        if cv_pct is not None
                        else None
                    )
                    published = expected if expected is not None else candidate.verdict.published_gain_pct
                    tally.bias.setdefault(gain, []).append(published - gain)
        stated = detectable_gain(replay.rules) if replay.rules is not None else None
        if stated is not None:
            tally.stated.setdefault(kept_any, []).append(stated)
    return tally


def detectable_at_truth(scenario: Scenario, min_gain_pct: float, candidates: int = 1) -> float:
    """The detectable gain the design states at the host's true spread."""
    spec = stage_spec([[0.0] * candidates], min_gain_pct)
    rules = study_rules(spec, StudySpread.given(scenario.cv_pct))
    gain = detectable_gain(rules, candidates)
    assert gain is not None
    return gain


def design_stages(
    design: str, number: int, order: random.Random, scenario: Scenario, args: argparse.Namespace
) -> list[list[float]]:
    """The true gains of one study of ``design``."""
    gains = [0.0, args.min_gain_pct, 5.0, 10.0]
    if design == "one-stage":
        return [[gains[number % 4]]]  # run 4 × studies times: each gain as often as the other designs
    if design == "four-stage":
        order.shuffle(gains)
        return [[gain] for gain in gains]
    if design == "five-candidate":
        return [[0.0, args.min_gain_pct, 3.0, 5.0, 10.0]]
    if design == "three-candidate":
        return [[3.0, 7.0, 10.0]]
    if design == "faster":
        return [list(FASTER_GAINS)]
    if design == "four no-op":
        return [[0.0]] * 4
    if design == "at detectable":
        stated = detectable_at_truth(scenario, args.min_gain_pct)
        return [[round(stated * DETECTABLE_FACTORS[number % 3], 3)]]
    raise ValueError(design)


def run_scenario(name: str, seed: int, args: argparse.Namespace) -> dict[str, Tally]:
    """Every design's studies on one scenario's host (a scenario's figures depend on its seed alone)."""
    return {
        design: run_design(SCENARIOS[name], design, studies_of(design, args.studies), args, seed)
        for design in designs_of(name)
    }


def studies_of(design: str, studies: int) -> int:
    """How many studies of ``design`` a scenario runs: four times as many one-stage studies (one per
    gain), a quarter as many ``faster`` ones (their figure is a share that should be 0)."""
    if design == "one-stage":
        return 4 * studies
    if design == "faster":
        return max(studies // 4, 1)
    return studies


def designs_of(name: str) -> tuple[str, ...]:
    designs = ["one-stage", "four-stage", "five-candidate", "four no-op", "faster"]
    if name in DETECTABLE_AT:
        designs.append("at detectable")
    if SCENARIOS[name].held_out:
        designs.append("three-candidate")
    return tuple(designs)


def _fmt(value: float | None, pattern: str = "{:+.2f}") -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else pattern.format(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=300, help="studies per scenario and design")
    parser.add_argument("--smoke", action="store_true", help="a small run (same output, a few dozen studies)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--min-gain-pct", type=float, default=1.0, help="the form's default")
    parser.add_argument("--launch-s", type=float, default=120.0, help="engine start + warm-up, s")
    parser.add_argument("--run-s", type=float, default=60.0, help="one run of the tuning profile, s")
    parser.add_argument("--draws", type=int, default=2000, help="redraws of the confirmation launches' noise")
    parser.add_argument("--only", choices=list(SCENARIOS), action="append", help="these scenarios alone")
    parser.add_argument("--jobs", type=int, default=1, help="scenarios run at once (same figures)")
    parser.add_argument(
        "--round-s", type=float, default=6.5, help="the baseline's one pass of the tuning profile, s"
    )
    parser.add_argument("--per-round", type=int, default=100, help="prompts in one pass of the profile")
    args = parser.parse_args()
    names = args.only or list(SCENARIOS)
    if args.smoke:
        args.studies, args.draws = 2, 100
        names = args.only or ["(2, 1)", "drift", "(5, 3)"]

    started = time.monotonic()
    jobs = [(name, args.seed * 1000 + index, args) for index, name in enumerate(names)]
    with ProcessPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        results = dict(zip(names, pool.map(run_scenario, *zip(*jobs, strict=True)), strict=True))
    gains = [0.0, args.min_gain_pct, 5.0, 10.0]
    print(
        f"{args.studies} studies per scenario and design from the new-study defaults (min gain "
        f"{args.min_gain_pct:g} %); {args.launch_s:g} s per launch + {args.run_s:g} s per run; "
        f"{time.monotonic() - started:.0f} s"
    )
    header = " ".join(f"{f'kept {gain:+g}%':>9}" for gain in gains)
    print(
        f"{'scenario':>20} {'design':>15} {header} {'bias +5':>8} {'bias +10':>8} "
        f"{'raw +5':>14} {'raw +10':>14}"
    )
    for name, by_design in results.items():
        print_scenario(name, by_design, gains, args)
    print(json.dumps(summary(results, args)))


def _raw(tally: Tally, gain: float) -> str:
    """The mean of the published figures less the truth, with its standard error."""
    found = tally.raw.get(gain) or []
    if len(found) < 2:
        return _fmt(found[0] if found else None)
    return f"{statistics.fmean(found):+.2f}±{statistics.stdev(found) / math.sqrt(len(found)):.2f}"


def print_scenario(
    name: str, by_design: dict[str, Tally], gains: list[float], args: argparse.Namespace
) -> None:
    """One scenario's lines: each design's keep rates, biases, GPU time and flips, then the rest."""
    for design, tally in by_design.items():
        if design in ("four no-op", "at detectable", "three-candidate", "faster"):
            continue
        rates = " ".join(f"{_fmt(tally.rate(gain), '{:.1%}'):>9}" for gain in gains)
        biases = f"{_fmt(tally.mean_bias(5.0)):>8} {_fmt(tally.mean_bias(10.0)):>8}"
        print(
            f"{name:>20} {design:>15} {rates} {biases} {_raw(tally, 5.0):>14} {_raw(tally, 10.0):>14}  "
            f"GPU {tally.gpu_s / tally.single_shot_s:.2f}×, flips {tally.flips}, "
            f"launches after a stop {tally.after_stop}"
        )
    null = by_design["four no-op"]
    print(
        f"{name:>20} four no-op stages: a change recommended in {null.changes / null.studies:.1%} of studies"
    )
    fast = by_design["faster"]
    rates = ", ".join(f"{gain:+g} % {fast.rate(gain):.1%}" for gain in FASTER_GAINS)
    print(
        f"{name:>20} faster candidates picked ({rates}): too short to judge {fast.censored} of "
        f"{fast.faster} (the baseline's pass {args.round_s:g} s, {args.per_round} prompts)"
    )
    if "three-candidate" in by_design:
        three = by_design["three-candidate"]
        rates = ", ".join(f"{gain:+g} % kept {three.rate(gain):.1%}" for gain in (3.0, 7.0, 10.0))
        print(f"{name:>20} three candidates (3, 7, 10 %): {rates}")
    if "at detectable" in by_design:
        stated = detectable_at_truth(SCENARIOS[name], args.min_gain_pct)
        at = by_design["at detectable"]
        kept = ", ".join(
            f"{factor:g}× {at.rate(round(stated * factor, 3)):.1%}" for factor in DETECTABLE_FACTORS
        )
        print(f"{name:>20} detectable gain stated at the true spread {stated:.1f} %: kept at {kept}")
    four = by_design["four-stage"]
    nothing, something = _mean(four.stated.get(False)), _mean(four.stated.get(True))
    print(
        f"{name:>20} four-stage detectable gain stated at the end: {_fmt(nothing, '{:.1f}')} % "
        f"(nothing kept), {_fmt(something, '{:.1f}')} % (something kept)"
    )


def _mean(values: list[float] | None) -> float | None:
    return statistics.fmean(values) if values else None


def summary(results: dict[str, dict[str, Tally]], args: argparse.Namespace) -> dict[str, object]:
    """The JSON line: the figures the issue's acceptance names, over the scenarios tuned on (held-out
    scenarios separately)."""
    single = ("one-stage", "four-stage")
    keyed = ("one-stage", "four-stage", "five-candidate")

    def pooled(by: dict[str, Tally], gain: float) -> float:
        """A scenario's keep rate at ``gain`` over the candidates of all its designs."""
        kept = sum(by[design].kept[gain] for design in keyed)
        seen = sum(by[design].seen[gain] for design in keyed)
        return kept / seen if seen else 0.0

    def figures(held_out: bool) -> dict[str, object]:
        chosen = {name: by for name, by in results.items() if SCENARIOS[name].held_out == held_out}
        if not chosen:
            return {}
        tallies = [tally for by in chosen.values() for design, tally in by.items() if design in keyed]
        biases = [
            abs(bias)
            for tally in tallies
            for gain in (5.0, 10.0)
            if (bias := tally.mean_bias(gain)) is not None
        ]
        found: dict[str, object] = {
            "false_keep_rate_max": round(max(pooled(by, 0.0) for by in chosen.values()), 4),
            "threshold_keep_rate_max": round(max(pooled(by, args.min_gain_pct) for by in chosen.values()), 4),
            "false_keep_rate_max_by_design": round(max(_nan0(t.rate(0.0)) for t in tallies), 4),
            "threshold_keep_rate_max_by_design": round(
                max(_nan0(t.rate(args.min_gain_pct)) for t in tallies), 4
            ),
            "kept_gain_bias_pct_max_abs": round(max(biases), 3) if biases else None,
            "decided_stage_flips": sum(t.flips for by in chosen.values() for t in by.values()),
            "launches_after_a_stop": sum(t.after_stop for by in chosen.values() for t in by.values()),
            "gpu_time_ratio_max": round(max(t.gpu_s / t.single_shot_s for t in tallies), 3),
            "censored_faster": round(
                sum(by["faster"].censored for by in chosen.values())
                / max(sum(by["faster"].faster for by in chosen.values()), 1),
                4,
            ),
            "false_change_rate_max": round(
                max(by["four no-op"].changes / by["four no-op"].studies for by in chosen.values()), 4
            ),
        }
        for name in ("(2, 1)", "(3, 2)"):
            if name in chosen:
                key = "keep_rate_10pct_" + name.strip("()").replace(", ", "_")
                found[key] = round(min(chosen[name][design].rate(10.0) for design in single), 4)
        return found

    tuned = figures(False)
    return {
        "studies": args.studies,
        "min_gain_pct": args.min_gain_pct,
        **tuned,
        "held_out": figures(True),
        "scenarios": {
            name: {
                design: {
                    "keep_rates": {
                        f"{gain:+g}": round(_nan0(tally.rate(gain)), 4) for gain in sorted(tally.seen)
                    },
                    "kept_gain_bias_pct": {
                        f"{gain:+g}": round(bias, 3)
                        for gain in (5.0, 10.0)
                        if (bias := tally.mean_bias(gain)) is not None
                    },
                    "gpu_time_ratio": round(tally.gpu_s / tally.single_shot_s, 3),
                    "flips": tally.flips,
                }
                for design, tally in by.items()
            }
            for name, by in results.items()
        },
    }


def _nan0(value: float) -> float:
    return 0.0 if math.isnan(value) else value


if __name__ == "__main__":
    main()
