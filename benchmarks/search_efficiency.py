"""How close a search stage gets to its space's optimum, under tight SLOs and launch noise (simulated).

Each **space** is a grid of vLLM configurations (max-num-seqs × max-num-batched-tokens × parallelism
layouts, replicas filling the node) of one model on one simulated node. Every cell is measured by the
offline simulator (:func:`perflab.sim.offline.simulate`: the simulated engine's own scheduler and
performance model on a virtual clock, through :func:`perflab.study.predictions.simulator_predictor`)
on a burst of prompts, giving its total token throughput and mean TPOT, or the engine's failure (out
of memory, a kernel it cannot run). Those figures are the truth; a **launch** measures them through
the simulated hosts' seeded noise model (:class:`perflab.sim.noise.NoiseModel`): with noise on, a
launch factor (CV 2 %) and a run factor (CV 1 %) per run divide every step's duration, which for a
burst multiplies the throughput and divides the TPOT by the same factor. So the truth and the
measurements come from the same code, whatever its constants are. A screening measures the same
figures on a quarter of the prompts: its run factor's CV is doubled (a quarter of the requests). (A
quarter of a burst would measure its ramp instead — a TP1 × 8 node sends each replica 16 requests —
and rank layouts by replica count; a tuning profile at a fixed concurrency, as studies run them,
reaches its steady state in a screening too.)

A space with an SLO bounds the mean TPOT: the limit is placed in the widest gap between the cells' TPOTs
that leaves 5–15 % of the cells feasible (a cell within the noise of the limit would make "the
constrained optimum" a coin toss); a space whose widest such gap is narrow still gets it, and its line
says how narrow (``limit_margin_pct``: the limit's distance to the nearest cell's TPOT). The **search**
is driven by the code a study uses, with a search's default settings (two random proposals first):
proposals from :func:`perflab.study.search.step` (screening with the pruner, infeasible cells told as
constraint violations), then :func:`perflab.study.finalists.final_pick` with the study's spread pooled
as the coordinator pools it (:func:`perflab.study.noise.study_spread`) and the baseline (launched twice
first, and given to the search as measured before it, as a study's baseline is) as the reference: the
finalists and the baseline are launched again, a round at a time in the order the pick gives
(:attr:`perflab.study.finalists.FinalPick.order`), until the pick is decided. The recommendation is the
pick when it is kept, else the baseline; it is **within 2 %** when it meets the SLO and its true
throughput is within 2 % of the best feasible cell's. Launches count every start: the baseline's, the
proposals', and the final pick's confirmations. Beside the search's rate each line gives
``random_draws_within_2pct_rate``: the chance that as many distinct cells as the budget, drawn at
random, include one within 2 % of the optimum — what a search that learned nothing would find, the
yardstick on spaces so small that the budget is a handful of launches.

Spaces: ``tight-tpot`` (Qwen3-32B, 8 × H200, 48 cells), ``llama-70b`` (8 × H100, 64 cells, no SLO; the
greedy staged study is run on it too), the held-out ``moe`` space (Qwen3-235B-A22B-FP8 on 8 × H200, 160
cells; without an SLO and as ``moe-tight`` with one), and ``made-N`` spaces drawn from a seed (model,
accelerator, node size, knob levels, layouts, feasible share) that nothing was tuned on. ``null``
measures the false-change rate: every cell as fast as the baseline, so any change it recommends is
false; ``null-drift`` measures it on a host whose speed grows by 1 % of its first launch's at every
launch (warming up, load leaving), where a configuration launched later than the reference reads
faster. ``--drift-pct`` puts every other line on such a host (0: none).

Run from the repository root: ``python benchmarks/search_efficiency.py [--trials 10] [--made 8]
[--spaces tight-tpot,null,null-drift,greedy,…] [--drift-pct 0] [--smoke]``. Prints a JSON line per
space and noise setting, and as its last line one JSON object with the summary. ``--smoke`` runs one
small space, two seeds each, one search of ``null`` and of ``null-drift``, and the greedy study on the
small space (a test runs it).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perflab.engines.config import EngineConfig  # noqa: E402
from perflab.sim.noise import NoiseModel  # noqa: E402
from perflab.study.budget import fill_budget  # noqa: E402
from perflab.study.configs import build_config  # noqa: E402
from perflab.study.finalists import FinalPick, final_pick  # noqa: E402
from perflab.study.noise import study_spread  # noqa: E402
from perflab.study.predictions import Prediction, Predictor, cached, simulator_predictor  # noqa: E402
from perflab.study.search import Observation, Trial, promising, step, with_outcomes  # noqa: E402
from perflab.study.search_space import SearchSpec, layout_label  # noqa: E402
from perflab.study.search_stage import slo_violation  # noqa: E402
from perflab.study.spec import StageSpec  # noqa: E402
from perflab.study.strategy import Evidence  # noqa: E402
from perflab.study.study_plan import plan_study, stored_records  # noqa: E402
from perflab.study.types import Measurement, Rules  # noqa: E402

OBJECTIVES = ("total_token_throughput",)
TPOT = "mean_tpot_ms"
MIN_GAIN = 0.01
INPUT_TOKENS, OUTPUT_TOKENS = 1024, 256
SCREENING = 0.25
LAUNCH_CV_PCT, RUN_CV_PCT = 2.0, 1.0
FEASIBLE_SHARE = (0.05, 0.15)
# The drift of the ``null-drift`` space: the host's speed grows by 1 % of its first launch's per launch.
DRIFT_PCT = 1.0
# The imperfect predictor's error: each cell's predicted throughput and TPOT are the truth times a
# log-normal factor with this CV, drawn once per cell (AIConfigurator's median errors against the seeds
# were 8 % and 14 %).
PREDICTOR_ERROR_CV = 0.15


@dataclass(frozen=True)
class Space:
    """A grid of configurations: the model, the node, the knobs' levels, the layouts; ``slo`` whether
    a TPOT limit binds it, ``budget`` the search's launches."""

    name: str
    model: str
    accelerator: str
    gpus: int
    seqs: tuple[int, ...]
    batched: tuple[int, ...]
    layouts: tuple[dict[str, int], ...]
    slo: bool
    budget: int
    prompts: int = 512
    moe: bool = False

    def search(self, seed: int) -> SearchSpec:
        return SearchSpec.model_validate(
            {
                "knobs": {"max_num_seqs": list(self.seqs), "max_num_batched_tokens": list(self.batched)},
                "parallelism": [dict(layout) for layout in self.layouts],
                "budget": {"launches": self.budget},
                "screening": SCREENING,
                "seed": seed,
                "moe": self.moe,
            }
        )

    def build(self, params: Mapping[str, Any]) -> EngineConfig:
        base = {"engine": "vllm", "model": self.model, "max_model_len": 4096}
        changes = {**self.search(0).changes(dict(params)), "replicas": 1}
        return fill_budget(build_config(base, changes, gpus_per_node=self.gpus), self.gpus)

    def points(self) -> list[dict[str, Any]]:
        return [
            {"max_num_seqs": seqs, "max_num_batched_tokens": batched, "parallelism": layout_label(layout)}
            for seqs, batched, layout in itertools.product(self.seqs, self.batched, self.layouts)
        ]


@dataclass(frozen=True)
class Figures:
    """What one run of a configuration measures (noise-free: the truth)."""

    throughput: float
    tpot_ms: float

    def launched(self, speed: float) -> Figures:
        return Figures(self.throughput * speed, self.tpot_ms / speed)


@dataclass
class Cell:
    config: EngineConfig
    full: Figures | None  # None: the engine fails to start it


def run_figures(config: EngineConfig, space: Space, prompts: int) -> Figures | None:
    """The node's throughput and mean TPOT on a burst of ``prompts`` (split among the replicas), from
    perflab's simulator as a predictor would have it; None where the engine fails to start."""
    found = simulator_predictor(space.accelerator, INPUT_TOKENS, OUTPUT_TOKENS, prompts)(config)
    if found is None or found.infeasible is not None:
        return None
    return Figures(found.values["total_token_throughput"], found.values[TPOT])


def grid(space: Space) -> dict[str, Cell]:
    cells: dict[str, Cell] = {}
    for params in space.points():
        config = space.build(params)
        cells[config.fingerprint()] = Cell(config, run_figures(config, space, space.prompts))
    return cells


def tpot_limit(cells: Mapping[str, Cell]) -> float:
    """The TPOT limit in the widest gap between cells' TPOTs leaving 5–15 % of the cells feasible."""
    tpots = sorted(cell.full.tpot_ms for cell in cells.values() if cell.full is not None)
    low = max(1, math.ceil(FEASIBLE_SHARE[0] * len(cells)))
    high = max(low, math.floor(FEASIBLE_SHARE[1] * len(cells)))
    feasible = max(range(low, min(high, len(tpots) - 1) + 1), key=lambda k: tpots[k] / tpots[k - 1])
    return math.sqrt(tpots[feasible - 1] * tpots[feasible])


def limit_margin_pct(cells: Mapping[str, Cell], limit: float) -> float:
    """How far (in %) the TPOT limit lies from the nearest cell's TPOT: under about twice the launch
    noise's CV, which cells meet the limit is a matter of luck in a noisy search."""
    return min(abs(cell.full.tpot_ms / limit - 1.0) for cell in cells.values() if cell.full is not None) * 100


def baseline_point(space: Space, cells: Mapping[str, Cell]) -> EngineConfig:
    """The baseline: vLLM's defaults where the space has them (256 sequences, 8192 batched tokens), on
    the first layout that starts."""
    seqs = min(space.seqs, key=lambda value: abs(math.log(value / 256)))
    batched = min(space.batched, key=lambda value: abs(math.log(value / 8192)))
    for layout in space.layouts:
        config = space.build(
            {"max_num_seqs": seqs, "max_num_batched_tokens": batched, "parallelism": layout_label(layout)}
        )
        if cells[config.fingerprint()].full is not None:
            return config
    raise ValueError(f"{space.name}: no layout of the baseline starts")


@dataclass
class Bench:
    """Launches of a space's cells through the noise model; counts them."""

    cells: Mapping[str, Cell]
    noise: NoiseModel
    screening_noise: NoiseModel
    drift_pct: float = 0.0  # the host's speed grows by this share of its first launch's at every launch
    launches: int = 0
    samples: dict[str, list[Figures]] = field(default_factory=dict)

    def launch(self, fingerprint: str, screening: bool) -> tuple[Figures | None, Figures | None]:
        """A launch of the configuration: its screening (when asked) and full figures; None if it fails.
        The host's drift multiplies both by ``1 + drift_pct/100 × launch``."""
        launch = self.launches
        self.launches += 1
        cell = self.cells[fingerprint]
        if cell.full is None:
            return None, None
        drift = 1.0 + self.drift_pct / 100.0 * launch
        screened = cell.full.launched(drift * self.screening_noise.speed(launch, 0)) if screening else None
        return screened, cell.full.launched(drift * self.noise.speed(launch, 1))

    def measured(self, fingerprint: str, figures: Figures) -> None:
        self.samples.setdefault(fingerprint, []).append(figures)

    def values(self, fingerprint: str) -> tuple[float, ...]:
        return tuple(figures.throughput for figures in self.samples.get(fingerprint, ()))

    def violation(self, fingerprint: str, slos: Mapping[str, float]) -> float:
        runs = self.samples[fingerprint]
        return slo_violation({TPOT: statistics.fmean(figures.tpot_ms for figures in runs)}, slos)


@dataclass(frozen=True)
class Outcome:
    """One seeded search: the recommendation's true figures, whether it is within 2 %, what the search
    found (best true feasible cell it launched, as a share of the optimum), launches and proposals."""

    within: bool
    gap_pct: float
    found: float
    launches: int
    proposals: int
    nothing_feasible: bool
    changed: bool


def _observe(
    bench: Bench, trial: Trial, trials: list[Trial], seen: dict[str, Observation], spec, slos
) -> None:
    fingerprint = trial.fingerprint
    screened, full = bench.launch(fingerprint, spec.screening < 1.0)
    if full is None:
        seen[fingerprint] = Observation("infeasible", note="the engine failed to start")
        return
    screen_violation = slo_violation({TPOT: screened.tpot_ms}, slos) if slos else 0.0
    seen[fingerprint] = Observation("screened", screened.throughput, violation=screen_violation)
    if screen_violation > 0:
        seen[fingerprint] = Observation("infeasible", screened.throughput, violation=screen_violation)
        return
    if not promising(spec, OBJECTIVES, with_outcomes(trials, seen), trial.number):
        seen[fingerprint] = Observation("pruned", screened.throughput, violation=screen_violation)
        return
    bench.measured(fingerprint, full)
    _complete(bench, fingerprint, screened.throughput, seen, slos)


def _complete(bench: Bench, fingerprint: str, screening: float | None, seen, slos) -> None:
    values = bench.values(fingerprint)
    violation = bench.violation(fingerprint, slos) if slos else 0.0
    seen[fingerprint] = Observation("complete", screening, (statistics.fmean(values),), values, violation)


def _reference(bench: Bench, fingerprint: str, slos: Mapping[str, float]) -> Measurement:
    values = bench.values(fingerprint)
    broken = bench.violation(fingerprint, slos) > 0 if slos else False
    return Measurement(
        "measured",
        value=statistics.fmean(values),
        values=values,
        finished=True,
        violations=("mean_tpot_ms",) if broken else (),
    )


def imperfect_predictor(cells: Mapping[str, Cell], seed: int) -> Predictor:
    """A predictor off by :data:`PREDICTOR_ERROR_CV` per cell (and right about which cells start)."""

    def predict(config: EngineConfig) -> Prediction | None:
        cell = cells.get(config.fingerprint())
        if cell is None:
            return None
        if cell.full is None:
            return Prediction(infeasible="out of memory", source="the benchmark's predictor")
        rng = random.Random(f"{seed}:{config.fingerprint()}")
        sigma = math.sqrt(math.log(1.0 + PREDICTOR_ERROR_CV**2))
        throughput, tpot = (math.exp(rng.gauss(0.0, sigma)) for _ in range(2))
        values = {OBJECTIVES[0]: cell.full.throughput * throughput, TPOT: cell.full.tpot_ms * tpot}
        return Prediction(values, source="the benchmark's predictor")

    return cached(predict)


def search_once(
    space: Space,
    cells: Mapping[str, Cell],
    slos: Mapping[str, float],
    seed: int,
    noisy: bool,
    predicted: bool = False,
    drift_pct: float = 0.0,
) -> tuple[FinalPick, Bench, list[Trial], str]:
    """One seeded search on ``space`` (seeded and pre-screened by :func:`imperfect_predictor` when
    ``predicted``, on a host drifting by ``drift_pct`` per launch): its final pick, the bench, the
    trials and the baseline's fingerprint."""
    predict = imperfect_predictor(cells, seed) if predicted else None
    spec = space.search(seed)
    cvs = (RUN_CV_PCT, LAUNCH_CV_PCT) if noisy else (0.0, 0.0)
    bench = Bench(
        cells,
        NoiseModel(run_cv_pct=cvs[0], launch_cv_pct=cvs[1], seed=seed),
        NoiseModel(run_cv_pct=2.0 * cvs[0], launch_cv_pct=cvs[1], seed=seed),
        drift_pct,
    )
    baseline = baseline_point(space, cells).fingerprint()
    for _ in range(2):
        bench.measured(baseline, bench.launch(baseline, False)[1])
    seen: dict[str, Observation] = {}
    trials: list[Trial] = []
    before: dict[str, Observation] = {}  # the baseline, measured before the search
    _complete(bench, baseline, None, before, slos)
    while True:
        trials = with_outcomes(trials, seen)
        result = step(
            spec,
            OBJECTIVES,
            trials,
            space.build,
            min_gain_pct=MIN_GAIN * 100,
            predict=predict,
            slos=slos,
            earlier=before,
        )
        trials = list(result.trials)
        if result.stop:
            break
        for trial in result.proposed:
            _observe(bench, trial, trials, seen, spec, slos)
    while True:
        trials = with_outcomes(trials, seen)
        rules = Rules(min_gain=MIN_GAIN, spread=study_spread([bench.values(key) for key in bench.samples]))
        reference = _reference(bench, baseline, slos)
        pick = final_pick(
            spec, OBJECTIVES, trials, rules=rules, reference=reference, reference_label="baseline"
        )
        if not pick.waiting:
            return pick, bench, trials, baseline
        for number in pick.order:  # the round's launches, in its order
            fingerprint = baseline if number is None else trials[number].fingerprint
            bench.measured(fingerprint, bench.launch(fingerprint, False)[1])
            if fingerprint != baseline:
                _complete(bench, fingerprint, seen[fingerprint].screening, seen, slos)


def judge_outcome(space, cells, slos, optimum, pick, bench, trials, baseline) -> Outcome:
    def meets(fingerprint: str) -> bool:
        full = cells[fingerprint].full
        return full is not None and (not slos or full.tpot_ms <= slos[TPOT])

    chosen = pick.trial.fingerprint if pick.trial is not None and pick.decision is not None else baseline
    value = cells[chosen].full.throughput if meets(chosen) else 0.0
    found = max(
        (cells[t.fingerprint].full.throughput for t in trials if t.launched and meets(t.fingerprint)),
        default=0.0,
    )
    return Outcome(
        within=value >= optimum * 0.98,
        gap_pct=(1.0 - value / optimum) * 100.0,
        found=found / optimum,
        launches=bench.launches,
        proposals=sum(1 for trial in trials if trial.launched),
        nothing_feasible=found == 0.0,
        changed=chosen != baseline,
    )


def blind_draws_rate(cells: int, near_optimum: int, draws: int) -> float:
    """The chance that ``draws`` distinct cells drawn uniformly include one of the ``near_optimum`` cells
    (hypergeometric): what a search that learns nothing from its launches finds with its budget."""
    if draws >= cells:
        return 1.0
    return 1.0 - math.comb(cells - near_optimum, draws) / math.comb(cells, draws)


# (launch noise, predictions) settings each space is searched under.
PLAIN = ((False, False), (True, False))
WITH_PREDICTIONS = (*PLAIN, (True, True))


def run_space(
    space: Space, trials: int, settings: Sequence[tuple[bool, bool]] = PLAIN, drift_pct: float = 0.0
) -> list[dict[str, Any]]:
    """Every setting's ``trials`` seeded searches on ``space``: one JSON line each."""
    started = time.monotonic()
    cells = grid(space)
    slos = {TPOT: tpot_limit(cells)} if space.slo else {}
    feasible = [
        cell
        for cell in cells.values()
        if cell.full is not None and (not slos or cell.full.tpot_ms <= slos[TPOT])
    ]
    optimum = max(cell.full.throughput for cell in feasible)
    near_optimum = sum(cell.full.throughput >= optimum * 0.98 for cell in feasible)
    blind_rate = round(blind_draws_rate(len(cells), near_optimum, space.budget), 3)
    lines = []
    for noisy, predicted in settings:
        outcomes = []
        for seed in range(trials):
            pick, bench, found_trials, baseline = search_once(
                space, cells, slos, seed, noisy, predicted, drift_pct
            )
            outcomes.append(judge_outcome(space, cells, slos, optimum, pick, bench, found_trials, baseline))
        line = {
            "space": space.name,
            "noise": "on" if noisy else "off",
            "predictions": f"off by {PREDICTOR_ERROR_CV:.0%} per cell" if predicted else None,
            "drift_pct_per_launch": drift_pct,
            "model": space.model,
            "node": f"{space.gpus} x {space.accelerator}",
            "cells": len(cells),
            "feasible_cells": len(feasible),
            "tpot_limit_ms": round(slos[TPOT], 2) if slos else None,
            "limit_margin_pct": round(limit_margin_pct(cells, slos[TPOT]), 2) if slos else None,
            "budget": space.budget,
            "trials": trials,
            "within_2pct_rate": sum(o.within for o in outcomes) / trials,
            "found_within_2pct_rate": sum(o.found >= 0.98 for o in outcomes) / trials,
            "random_draws_within_2pct_rate": blind_rate,
            "nothing_feasible": sum(o.nothing_feasible for o in outcomes),
            "kept_baseline": sum(not o.changed for o in outcomes),
            "median_gap_pct": round(statistics.median(o.gap_pct for o in outcomes), 2),
            "mean_proposal_fraction": round(statistics.fmean(o.proposals for o in outcomes) / len(cells), 3),
            "mean_launches": round(statistics.fmean(o.launches for o in outcomes), 1),
            "seconds": round(time.monotonic() - started, 1),
        }
        print(json.dumps(line), flush=True)
        lines.append(line)
    return lines


def null_rate(trials: int, drift_pct: float = 0.0) -> dict[str, Any]:
    """The false-change rate: a space whose every cell measures as the baseline (with noise, on a host
    drifting by ``drift_pct`` per launch), so any recommended change is false, and the finalists'
    mean measured gain over the baseline at their last look (the truth is 0: the mean is its bias)."""
    space = TIGHT
    flat = Figures(10_000.0, 10.0)
    cells = {space.build(p).fingerprint(): Cell(space.build(p), flat) for p in space.points()}
    changed = launches = 0
    gains: list[float] = []
    for seed in range(trials):
        pick, bench, found_trials, baseline = search_once(space, cells, {}, seed, True, drift_pct=drift_pct)
        changed += pick.trial is not None and pick.decision is not None
        launches += bench.launches
        gains += [found.verdict.gain_pct for found in pick.kept.values() if found.verdict is not None]
    line = {
        "space": "null",
        "noise": "on",
        "drift_pct_per_launch": drift_pct,
        "trials": trials,
        "false_change_rate": changed / trials,
        "mean_finalist_gain_pct": round(statistics.fmean(gains), 2) if gains else None,
        "mean_launches": round(launches / trials, 1),
    }
    print(json.dumps(line), flush=True)
    return line


def greedy(space: Space, cells: Mapping[str, Cell]) -> tuple[float, int]:
    """The staged study (noise off) from the baseline: parallelism, then max-num-seqs, then
    max-num-batched-tokens; its final configuration's true value and launches."""
    baseline = baseline_point(space, cells)
    stages = [
        StageSpec.model_validate(
            {
                "name": "Parallelism",
                "candidates": [{**layout, "replicas": "fill"} for layout in space.layouts],
            }
        ),
        StageSpec.model_validate(
            {"name": "Max num seqs", "dimension": "max_num_seqs", "candidates": list(space.seqs)}
        ),
        StageSpec.model_validate(
            {
                "name": "Batched tokens",
                "dimension": "max_num_batched_tokens",
                "candidates": list(space.batched),
            }
        ),
    ]
    measured: dict[str, Measurement] = {}
    stored: dict[str, Any] = {}
    launches = 0
    while True:
        spread = study_spread([measurement.values for measurement in measured.values()])
        plan = plan_study(
            baseline=baseline,
            stages=stages,
            measurements=measured,
            rules=Rules(min_gain=MIN_GAIN, spread=spread),
            gpus_per_node=space.gpus,
            evidence=Evidence(stored=stored),
        )
        if not plan.wanted:
            return plan.best.value, launches
        stored = stored_records(plan)  # the decisions stand from one advance to the next, as a study's do
        for config in plan.wanted:
            launches += 1
            cell = cells.get(config.fingerprint())
            figures = cell.full if cell is not None else run_figures(config, space, space.prompts)
            earlier = measured.get(config.fingerprint())
            if figures is None:
                failed = Measurement("failed", error="the engine failed to start", finished=True)
                measured[config.fingerprint()] = failed
                continue
            values = (*(earlier.values if earlier else ()), figures.throughput)
            measured[config.fingerprint()] = Measurement(
                "measured", value=statistics.fmean(values), success_rate=1.0, finished=True, values=values
            )


TIGHT = Space(
    "tight-tpot",
    "Qwen/Qwen3-32B",
    "H200",
    8,
    (8, 16, 32, 64, 128, 256),
    (2048, 8192),
    ({"tp": 1}, {"tp": 2}, {"tp": 4}, {"tp": 8}),
    slo=True,
    budget=12,
)
LLAMA_70B = Space(
    "llama-70b",
    "meta-llama/Llama-3.1-70B-Instruct",
    "H100",
    8,
    (64, 128, 256, 512),
    (2048, 4096, 8192, 16384),
    ({"tp": 1}, {"tp": 2}, {"tp": 4}, {"tp": 8}),
    slo=False,
    budget=16,
)
MOE_LAYOUTS = ({"tp": 2}, {"tp": 4}, {"tp": 8}, {"tp": 4, "ep": 4}, {"tp": 8, "ep": 8})
MOE = Space(
    "moe",
    "Qwen/Qwen3-235B-A22B-FP8",
    "H200",
    8,
    (8, 16, 32, 64, 128, 256, 512, 1024),
    (2048, 4096, 8192, 16384),
    MOE_LAYOUTS,
    slo=False,
    budget=24,
    moe=True,
)
MOE_TIGHT = replace(MOE, name="moe-tight", slo=True, budget=40)
MADE_MODELS = (
    ("Qwen/Qwen3-8B", False),
    ("Qwen/Qwen3-14B", False),
    ("Qwen/Qwen2.5-32B-Instruct", False),
    ("meta-llama/Llama-3.1-8B-Instruct", False),
    ("mistralai/Mistral-7B-Instruct-v0.3", False),
    ("Qwen/Qwen3-30B-A3B", True),
)


def made_space(index: int) -> Space:
    """A space of the benchmark's own making, drawn from ``index``: nothing was tuned on it."""
    rng = random.Random(f"made-{index}")
    model, moe = rng.choice(MADE_MODELS)
    accelerator = rng.choice(("H100", "H200", "A100"))
    gpus = rng.choice((2, 4, 8))
    seqs = tuple(sorted(rng.sample((4, 8, 16, 32, 64, 128, 256, 512), rng.randint(4, 6))))
    batched = tuple(sorted(rng.sample((1024, 2048, 4096, 8192, 16384), rng.randint(2, 3))))
    sizes = [size for size in (1, 2, 4, 8) if size <= gpus]
    layouts = [{"tp": size} for size in sizes]
    if moe:
        layouts += [{"tp": size, "ep": size} for size in sizes if size > 1]
    cells = len(seqs) * len(batched) * len(layouts)
    return Space(
        f"made-{index}",
        model,
        accelerator,
        gpus,
        seqs,
        batched,
        tuple(layouts),
        slo=True,
        budget=max(4, cells // 4),
        prompts=256,
        moe=moe,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10, help="seeded searches per space and noise setting")
    parser.add_argument("--made", type=int, default=8, help="spaces of the benchmark's own making")
    parser.add_argument("--smoke", action="store_true", help="one small space, two seeds (a quick check)")
    parser.add_argument("--spaces", help="only these, comma-separated (tight-tpot, moe, made-0, null, …)")
    parser.add_argument(
        "--drift-pct", type=float, default=0.0, help="the host's speed grows by this %% at every launch"
    )
    args = parser.parse_args()
    if args.smoke:
        small = replace(TIGHT, name="tight-tpot-small", prompts=64)
        lines = run_space(small, 2, ((False, False), (True, False), (True, True)), args.drift_pct)
        null = null_rate(1, args.drift_pct)
        drifting = null_rate(1, DRIFT_PCT)
        small_cells = grid(small)
        greedy_value, greedy_launches = greedy(small, small_cells)
        best = max(cell.full.throughput for cell in small_cells.values() if cell.full is not None)
        summary = {
            "smoke": True,
            "drift_pct_per_launch": args.drift_pct,
            "tight_slo_within_2pct_rate": lines[0]["within_2pct_rate"],
            "tight_slo_within_2pct_rate_noise": lines[1]["within_2pct_rate"],
            "false_change_rate": null["false_change_rate"],
            "false_change_rate_drift": drifting["false_change_rate"],
            "greedy_gap_pct": round((1.0 - greedy_value / best) * 100.0, 2),
            "greedy_launches": greedy_launches,
        }
        print(json.dumps(summary))
        return
    spaces = [TIGHT, LLAMA_70B, MOE, MOE_TIGHT, *(made_space(index) for index in range(args.made))]
    chosen = (
        set(args.spaces.split(","))
        if args.spaces
        else {space.name for space in spaces} | {"null", "null-drift", "greedy"}
    )
    lines = [
        line
        for space in spaces
        if space.name in chosen
        for line in run_space(space, args.trials, WITH_PREDICTIONS if space.slo else PLAIN, args.drift_pct)
    ]
    summary: dict[str, Any] = {"trials": args.trials, "drift_pct_per_launch": args.drift_pct}
    by = {(line["space"], line["noise"]): line for line in lines if line["predictions"] is None}
    if ("tight-tpot", "off") in by:
        summary["tight_slo_within_2pct_rate"] = by[("tight-tpot", "off")]["within_2pct_rate"]
        summary["tight_slo_within_2pct_rate_noise"] = by[("tight-tpot", "on")]["within_2pct_rate"]
    constrained = [line for line in lines if line["tpot_limit_ms"] is not None and not line["predictions"]]
    if constrained:
        worst = min(constrained, key=lambda line: line["within_2pct_rate"])
        summary["constrained_within_2pct_rate_min"] = worst["within_2pct_rate"]
        summary["constrained_worst_space"] = f"{worst['space']} (noise {worst['noise']})"
        summary["constrained_within_2pct_rate_mean"] = round(
            statistics.fmean(line["within_2pct_rate"] for line in constrained), 3
        )
    if lines:
        summary["within_2pct_rate_min"] = min(line["within_2pct_rate"] for line in lines)
    if "null" in chosen:
        null = null_rate(max(args.trials * 4, 20), args.drift_pct)
        summary["false_change_rate"] = null["false_change_rate"]
    if "null-drift" in chosen:
        drifting = null_rate(max(args.trials * 4, 20), DRIFT_PCT)
        summary["false_change_rate_drift"] = drifting["false_change_rate"]
    if "greedy" in chosen:
        llama_cells = grid(LLAMA_70B)
        greedy_value, greedy_launches = greedy(LLAMA_70B, llama_cells)
        optimum = max(cell.full.throughput for cell in llama_cells.values() if cell.full is not None)
        summary["greedy_gap_pct_llama_70b"] = round((1.0 - greedy_value / optimum) * 100.0, 2)
        summary["greedy_launches_llama_70b"] = greedy_launches
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
