"""Aggregated against disaggregated serving of Qwen3-32B on a simulated 8 × H200 node: the study decides.

For each mean-TPOT limit the benchmark runs a study (:func:`perflab.study.study_plan.plan_study`, the
study's own planner, with :func:`perflab.study.progress.study_rules` and
:func:`perflab.study.noise.study_spread`) whose spec says what a team would write::

    baseline: {engine: sglang, tp: 8}
    gpus: 8
    objective: output_throughput        # node totals: on one budget they rank as tokens/s per GPU
    slos: {mean_tpot_ms: 12, mean_ttft_ms: 2000}
    tuning_profile: {dataset: random, input_len: 4000, output_len: 500, sweep: {kind: request_rate, ...}}
    stages: [{name: Serving layout, candidates: [TP1, TP2, TP4 with replicas, every xPyD split]}]

so a configuration's value is its output throughput at the best request rate whose point meets both
limits (:func:`perflab.study.objective.score`): the TTFT limit keeps a rate past saturation, whose queue
grows for as long as requests come and whose throughput is the drain's, from counting. The candidates
are every prefill/decode split ``xPyD`` with prefill TP 1, 2 or 4 and decode TP 1, 2, 4 or 8 that fills
the node, and aggregated TP1 ×8, TP2 ×4 and TP4 ×2 (``--smoke``: no prefill TP4).

The loop measures only what the plan wants. Each configuration's curve is measured once by the
simulator's own schedulers and performance model on a virtual clock (:func:`perflab.sim.offline.simulate`:
Poisson arrivals of random prompts; ``--smoke``: 2000 / 128 tokens, fewer requests and rates). An
aggregated replica serves its share of the requests; a split runs every prefill worker on its share
(one token each), moves each prompt's KV cache in :func:`perflab.sim.disagg.transfer_seconds` (the
H200's 450 GB/s link at 80 %, the figure the simulated workers use), and decodes the prefilled
requests on a decode worker. Each launch of it multiplies its throughputs by a seeded ``1 + N(0, CV)``
(``--cv``, 2 %) and divides its latencies by the same factor, so the study's verdicts judge launches
that differ as launches do.

For each limit the benchmark prints the study's launches, the layout it chose and its choice between
aggregated and disaggregated serving as its report words it (:func:`perflab.study.layout_trade.
layout_choices`: the trade of the best split against the best aggregated layout, and the verdict), then,
last, one JSON line. AIConfigurator 0.12 predicts, for Qwen3-32B on 8 × H200: disaggregated wins by
1.45× tokens/s/GPU at TPOT ≤ 12 ms, aggregated by 1.08× at ≤ 30 ms. Run from the repository root:
``python benchmarks/disagg_layouts.py [--smoke] [--slo 12 30]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perflab.engines.config import EngineConfig  # noqa: E402
from perflab.sim.deployment import Deployment, Knobs, resolve_deployment  # noqa: E402
from perflab.sim.disagg import transfer_seconds  # noqa: E402
from perflab.sim.failures import EngineFailure  # noqa: E402
from perflab.sim.hardware import find_accelerator  # noqa: E402
from perflab.sim.offline import RequestSpec, simulate  # noqa: E402
from perflab.sim.perfmodel import plan_memory  # noqa: E402
from perflab.study.layout_trade import (  # noqa: E402
    Figures,
    LayoutChoice,
    configuration_figures,
    layout_choices,
    layout_of,
)
from perflab.study.noise import study_spread  # noqa: E402
from perflab.study.objective import combined_slos, score  # noqa: E402
from perflab.study.progress import study_rules  # noqa: E402
from perflab.study.spec import StudySpec, spec_from_data  # noqa: E402
from perflab.study.study_plan import plan_study  # noqa: E402
from perflab.study.types import CandidatePlan, Measurement, Rules, StudyPlan  # noqa: E402

MODEL = "Qwen/Qwen3-32B"
GPUS = 8
ACCELERATOR = find_accelerator("H200")
OBJECTIVE = "output_throughput"
MAX_STEPS = 200
Pairs = list[tuple[dict[str, Any], dict[str, Any]]]


@dataclass(frozen=True)
class Workload:
    prompt: int
    output: int
    requests: int
    rates: tuple[float, ...]  # requests per second, the whole node


def candidates(smoke: bool) -> list[dict[str, Any]]:
    """The stage's candidates: aggregated TP1–TP4 with replicas, and every split of the node."""
    found: list[dict[str, Any]] = [{"tp": tp} for tp in (1, 2, 4)]
    for p_tp, d_tp in itertools.product((1, 2) if smoke else (1, 2, 4), (1, 2, 4, 8)):
        for p_workers in range(1, GPUS // p_tp + 1):
            rest = GPUS - p_workers * p_tp
            if rest > 0 and rest % d_tp == 0:
                split = {
                    "prefill": {"workers": p_workers, "tp": p_tp},
                    "decode": {"workers": rest // d_tp, "tp": d_tp},
                    "transfer_backend": "mooncake",
                }
                label = f"{p_workers}P{rest // d_tp}D (P TP{p_tp}, D TP{d_tp})"
                found.append({"label": label, "set": {"disaggregation": split}})
    return found


def study_spec(workload: Workload, slos: dict[str, float], smoke: bool) -> StudySpec:
    """The study a team would write for the question (see the module)."""
    return spec_from_data(
        {
            "name": "aggregated or disaggregated",
            "model": MODEL,
            "hosts": ["sim-h200"],
            "baseline": {"engine": "sglang", "tp": 8},
            "gpus": GPUS,
            "objective": OBJECTIVE,
            "slos": slos,
            "tuning_profile": {
                "name": "tune",
                "title": "Long prompts",
                "dataset": "random",
                "input_len": workload.prompt,
                "output_len": workload.output,
                "num_prompts": workload.requests,
                "sweep": {"kind": "request_rate", "values": list(workload.rates)},
            },
            "stages": [{"name": "Serving layout", "candidates": candidates(smoke)}],
        }
    )


def deployment(tp: int, *, decode: bool = False) -> Deployment | None:
    knobs = Knobs(MODEL)
    knobs.tp = tp
    if decode:
        knobs.disaggregation_mode = "decode"
    try:
        dep = resolve_deployment("sglang", knobs, ACCELERATOR)
        plan_memory(dep)
    except EngineFailure:
        return None
    if decode:
        dep.prefix_caching = False
    return dep


def arrivals(count: int, rate: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    now, times = 0.0, []
    for _ in range(count):
        now += rng.expovariate(rate)
        times.append(now)
    return times


def measure(config: EngineConfig, workload: Workload, rate: float) -> dict[str, Any] | None:
    """The node's result at ``rate`` requests/s as the bench reports it (None: it does not fit)."""
    times = arrivals(workload.requests, rate, seed=7)
    if config.disaggregation is None:
        dep = deployment(config.tp)
        if dep is None:
            return None
        share = times[:: config.replicas]
        timings, _ = simulate(dep, [RequestSpec(t, workload.prompt, workload.output) for t in share])
        ttft = [t.ttft for t in timings]
        tpot = [t.tpot for t in timings]
        ends = [arrival + t.e2el for arrival, t in zip(share, timings, strict=True)]
        served = len(share) * config.replicas
    else:
        layout = config.disaggregation
        prefill, decode = deployment(layout.prefill.tp), deployment(layout.decode.tp, decode=True)
        if prefill is None or decode is None:
            return None
        ready = [0.0] * len(times)
        for worker in range(layout.prefill.workers):
            picked = list(range(worker, len(times), layout.prefill.workers))
            timings, _ = simulate(prefill, [RequestSpec(times[i], workload.prompt, 1) for i in picked])
            for i, timing in zip(picked, timings, strict=True):
                ready[i] = times[i] + timing.ttft + transfer_seconds(prefill, workload.prompt)
        share = list(range(0, len(times), layout.decode.workers))
        specs = [RequestSpec(ready[i], workload.prompt, workload.output, prefilled=True) for i in share]
        timings, _ = simulate(decode, specs)
        ttft = [ready[i] + t.ttft - times[i] for i, t in zip(share, timings, strict=True)]
        tpot = [t.tpot for t in timings]
        ends = [ready[i] + t.e2el for i, t in zip(share, timings, strict=True)]
        served = len(share) * layout.decode.workers
    duration = max(ends) - times[0]
    output = served * workload.output / duration
    return {
        "completed": served,
        "failed": 0,
        "duration": duration,
        "mean_ttft_ms": statistics.fmean(ttft) * 1000,
        "mean_tpot_ms": statistics.fmean(tpot) * 1000,
        "output_throughput": output,
        "total_token_throughput": output * (workload.prompt + workload.output) / workload.output,
    }


THROUGHPUTS = ("output_throughput", "total_token_throughput")
LATENCIES = ("mean_ttft_ms", "mean_tpot_ms")


def at_speed(result: dict[str, Any], speed: float) -> dict[str, Any]:
    """A result on a launch ``speed`` times as fast: throughputs times it, latencies divided by it."""
    return {
        **result,
        **{name: result[name] * speed for name in THROUGHPUTS},
        **{name: result[name] / speed for name in LATENCIES},
    }


class Lab:
    """Launches configurations: each one's curve simulated once, every launch of it noisy."""

    def __init__(self, workload: Workload, cv: float, seed: int) -> None:
        self.workload, self.cv = workload, cv
        self.rng = random.Random(seed)
        self.curves: dict[str, Pairs | None] = {}
        self.launches: dict[str, list[Pairs]] = {}
        self.configs: dict[str, EngineConfig] = {}

    def curve(self, config: EngineConfig) -> Pairs | None:
        """The configuration's sweep as stored results, ``(sweep_point, result)``; None if it cannot start."""
        fingerprint = config.fingerprint()
        if fingerprint not in self.curves:
            rates = self.workload.rates
            points = [measure(config, self.workload, rate) for rate in rates]
            self.curves[fingerprint] = (
                None
                if any(point is None for point in points)
                else [
                    ({"kind": "request_rate", "value": rate, "index": index, "points": len(rates)}, point)
                    for index, (rate, point) in enumerate(zip(rates, points, strict=True))
                    if point is not None
                ]
            )
        return self.curves[fingerprint]

    def launch(self, config: EngineConfig) -> None:
        """One launch: the configuration's curve with this launch's speed."""
        fingerprint = config.fingerprint()
        self.configs[fingerprint] = config
        curve = self.curve(config)
        runs = self.launches.setdefault(fingerprint, [])
        if curve is None:
            return
        speed = 1.0 + self.rng.gauss(0.0, self.cv)
        runs.append([(point, at_speed(result, speed)) for point, result in curve])

    def measurements(self, slos: dict[str, float]) -> dict[str, Measurement]:
        """Each launched configuration's measurement as the study stores it: a score per launch, its
        value the mean of theirs, the SLOs they break."""
        found = {}
        for fingerprint, runs in self.launches.items():
            if self.curves[fingerprint] is None:
                found[fingerprint] = Measurement(
                    "failed", 1, error="the simulated engine ran out of memory", finished=True
                )
                continue
            scores = [score(OBJECTIVE, pairs, slos=slos) for pairs in runs]
            values = tuple(found_score.value for found_score in scores if found_score.value is not None)
            _, violations = combined_slos(scores, slos)
            found[fingerprint] = Measurement(
                "measured",
                1,
                statistics.fmean(values),
                1.0,
                finished=True,
                values=values,
                violations=violations,
            )
        return found

    def figures(self, candidate: CandidatePlan, slos: dict[str, float]) -> Figures | None:
        """A configuration's figures, as the study's report reads them from its launches."""
        if candidate.config is None:
            return None
        launches = [[pairs] for pairs in self.launches.get(candidate.fingerprint or "", [])]
        return configuration_figures(launches, OBJECTIVE, slos, candidate.config.gpus_needed)


def run_study(spec: StudySpec, lab: Lab) -> tuple[StudyPlan, Rules]:
    """The study to its end: launch what the plan wants, ask again."""
    baseline = spec.baseline_config(GPUS, GPUS)
    slos = dict(spec.slos)
    for _ in range(MAX_STEPS):
        measured = lab.measurements(slos)
        rules = study_rules(spec, study_spread([m.values for m in measured.values() if m.values]))
        plan = plan_study(
            baseline=baseline, stages=spec.stages, measurements=measured, rules=rules, gpus=GPUS
        )
        if plan.status != "running" or not plan.wanted:
            return plan, rules
        for config in plan.wanted:
            lab.launch(config)
    raise RuntimeError("the study did not end within its step bound")


def curve_line(label: str, pairs: Pairs | None) -> str:
    if pairs is None:
        return f"{label}: does not fit in memory"
    shown = ", ".join(
        f"{point['value']:g}/s: TPOT {result['mean_tpot_ms']:.1f} ms TTFT {result['mean_ttft_ms']:.0f} ms "
        f"{result['output_throughput'] / GPUS:.0f} tok/s/GPU"
        for point, result in pairs
    )
    return f"{label}: {shown}"


def summary(plan: StudyPlan, choices: tuple[LayoutChoice, ...], lab: Lab) -> dict[str, Any]:
    choice = choices[0] if choices else None
    split = choice.split if choice else None
    whole = choice.aggregated if choice else None
    ratio = (
        round(split.figures.tokens_per_s_per_gpu / whole.figures.tokens_per_s_per_gpu, 3)
        if split and whole and split.figures and whole.figures and split.feasible and whole.feasible
        else None
    )
    return {
        "status": plan.status,
        "chosen": layout_of(plan.best.config) if plan.best.config is not None else None,
        "best_split": split.layout if split else None,
        "best_aggregated": whole.layout if whole else None,
        "split_vs_aggregated": ratio,
        "verdict": choice.verdict.text() if choice and choice.verdict else None,
        "verdict_outcome": choice.verdict.outcome if choice and choice.verdict else None,
        "why_not": list(choice.why_not) if choice else [],
        "launches": sum(len(runs) for runs in lab.launches.values()),
        "configurations": len(lab.launches),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a small run (under ~2 minutes)")
    parser.add_argument("--slo", type=float, nargs="+", default=[12.0, 30.0], help="mean TPOT limits (ms)")
    parser.add_argument("--ttft-ms", type=float, default=2000.0, help="the mean TTFT limit of every study")
    parser.add_argument("--cv", type=float, default=0.02, help="launch-to-launch CV of the simulated host")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.smoke:
        workload = Workload(2000, 128, 96, (2.0, 6.0, 14.0))
    else:
        workload = Workload(4000, 500, 400, (1.0, 2.0, 4.0, 6.0, 9.0, 13.0, 18.0, 25.0))
    started = time.monotonic()
    result: dict[str, Any] = {"workload": workload.__dict__, "cv": args.cv}
    shown: set[str] = set()
    for limit in args.slo:
        slos = {"mean_tpot_ms": limit, "mean_ttft_ms": args.ttft_ms}
        spec = study_spec(workload, slos, args.smoke)
        lab = Lab(workload, args.cv, args.seed)
        plan, rules = run_study(spec, lab)
        for fingerprint, config in lab.configs.items():
            if fingerprint not in shown:
                shown.add(fingerprint)
                print(curve_line(layout_of(config), lab.curves[fingerprint]), flush=True)
        choices = layout_choices(plan, rules, partial(lab.figures, slos=slos))
        found = summary(plan, choices, lab)
        launched = f"{found['launches']} launches of {found['configurations']} configurations"
        print(
            f"TPOT <= {limit:g} ms, TTFT <= {args.ttft_ms:g} ms: the study ({plan.status}, {launched}) "
            f"chose {found['chosen']}"
        )
        for choice in choices:
            print(f"  {choice.text()}")
        result[f"tpot_{limit:g}ms"] = found
    result["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
