"""A study's result, independent of how it is written: the one model the study page, the markdown
report, the JSON (``study show --json``, ``results.json``) and the CSV all render
(:func:`perflab.report.from_study.study_report` builds it from a study's stored rows;
:func:`perflab.report.from_runs.build_report_from_runs` from any runs).

It holds every configuration's launches and means, every candidate with its decision, state and
verdict, the search stages with their trials and the launches they spent, the comparison, costs and
validation of the baseline against the recommendation, the spread the decisions used, and the notes
and caveats that fit the study. Plain data: nothing here reads the database or imports the report's
renderings.

Figures are node-level: ``Total TPS`` is what the whole node served. A configuration with N replicas
is written the seeds' way, per replica × N (``3019.19x2`` for a node total of 6038.38).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from perflab.cost.prices import Price
from perflab.report.predictions import PredictionSection
from perflab.report.published import (
    CostChange,
    PublishedGain,
    cost_change,
    cost_gain_change,
    measured_gain,
)
from perflab.runner.results import times_replicas
from perflab.study.layout_trade import LayoutChoice
from perflab.study.loadcurve import LoadCurve
from perflab.study.noise import Spread, StudySpread
from perflab.study.verdict import Verdict
from perflab.views.formatting import MISSING, counted

# What a figure reads when every result behind it was too short to judge (perflab.runner.evidence).
TOO_SHORT_TEXT = "too short to judge"


@dataclass(frozen=True)
class Figures:
    """Headline figures of one result: the node's total token throughput, its replicas, mean TPOT;
    ``runs`` counts the repetitions on each launch they are the mean of (empty: one stored result);
    ``short`` says why there are none: every result was too short to judge."""

    total_tps: float | None
    replicas: int = 1
    mean_tpot_ms: float | None = None
    runs: tuple[int, ...] = ()
    short: str | None = None

    @property
    def sample_text(self) -> str | None:
        """``mean of 6 runs on 3 launches`` (``mean of 5 runs on 3 launches (2+2+1)`` when the launches ran
        different numbers): :attr:`count_text` as a mean; None for one run."""
        if sum(self.runs) <= 1:
            return None
        uneven = f" ({'+'.join(str(count) for count in self.runs)})" if len(set(self.runs)) > 1 else ""
        return f"mean of {self.count_text}{uneven}"

    @property
    def count_text(self) -> str:
        """``1 run``, ``6 runs on 3 launches``: how many results the figures are the mean of."""
        text = counted(sum(self.runs) or 1, "run")
        launches = len(self.runs)
        return text if launches <= 1 else f"{text} on {counted(launches, 'launch', 'launches')}"

    @property
    def tps_text(self) -> str:
        """``3792.50``, or ``3019.19×2`` for two replicas (``—`` when not measured, ``too short to judge``
        when every result was)."""
        if self.total_tps is None:
            return TOO_SHORT_TEXT if self.short is not None else MISSING
        if self.replicas > 1:
            return times_replicas(self.total_tps, self.replicas)
        return f"{self.total_tps:.2f}"

    @property
    def tpot_text(self) -> str:
        return MISSING if self.mean_tpot_ms is None else f"{self.mean_tpot_ms:.2f}"


def node_figures(result: Mapping[str, Any], *, replicas: int = 1, per_replica: bool = False) -> Figures:
    """Figures of a stored result. perflab results are node totals already (``per_replica=False``);
    a result imported from one replica's printed block is multiplied by ``replicas``."""
    total = result.get("total_token_throughput")
    tpot = result.get("mean_tpot_ms")
    node_total = float(total) * (replicas if per_replica else 1) if isinstance(total, (int, float)) else None
    return Figures(node_total, replicas, float(tpot) if isinstance(tpot, (int, float)) else None)


@dataclass(frozen=True)
class BenchBlock:
    """One benchmark case of a configuration: its printed result block, or its failure line."""

    case: str
    text: str
    failed: bool = False


@dataclass(frozen=True)
class CandidateSection:
    """A candidate as the report shows it. ``value`` is the mean of its objective over its ``launches``
    (each launch the mean of its runs); ``state`` says where it stands in words, the same in every
    table ("winner", "not better", "screened out", "waiting", …); ``verdict`` is its own decision's,
    when one was made with measured noise."""

    label: str
    serve_command: str | None
    blocks: tuple[BenchBlock, ...]
    engine: str | None = None
    decision: str | None = None
    note: str | None = None
    value: float | None = None
    figures: Figures | None = None
    run_id: int | None = None
    status: str | None = None
    state: str | None = None
    verdict: Verdict | None = None
    launches: int = 0
    fingerprint: str | None = None
    config: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class StageSection:
    """A stage: its candidates in order and the label of its winner (None when nothing was kept)."""

    index: int
    name: str
    candidates: tuple[CandidateSection, ...]
    winner: str | None = None
    decided: bool = True


@dataclass(frozen=True)
class SummaryRow:
    """A "Summary of Optimization Options" row: the stage's gain (None: nothing kept), its best
    candidate against the baseline, and that candidate's note when it was not kept (its figure is
    against the best configuration before the stage)."""

    option: str
    improvement: PublishedGain | None
    versus_baseline: PublishedGain | None = None
    note: str | None = None


@dataclass(frozen=True)
class ComparisonRow:
    """A benchmark case, baseline against optimized; ``published`` is the gain a decision published for
    the case (the recommendation's, on the tuning case), ``writeup`` the change an imported write-up
    printed for it where that differs from ours (the seeds wrote a loss as −(old ÷ new − 1))."""

    case: str
    baseline: Figures | None
    optimized: Figures | None
    published: PublishedGain | None = None
    writeup: float | None = None

    @property
    def gain(self) -> PublishedGain | None:
        """The optimized node total against the baseline's: the published gain, else the ratio of the
        two means minus one (None while either is unknown)."""
        if self.published is not None:
            return self.published
        if self.baseline is None or self.optimized is None:
            return None
        if not self.baseline.total_tps or not self.optimized.total_tps:
            return None
        return measured_gain(self.optimized.total_tps, self.baseline.total_tps)


@dataclass(frozen=True)
class CostSide:
    """One configuration's cost and energy on one case: money per 1M total tokens at its published
    throughput ``total_tps`` (the mean over its launches, on ``accelerators`` at ``price``; None
    without a price), output tokens per joule over the launches whose energy was measured
    (``energy_launches`` of ``launches``), and why none was when so."""

    price: Price | None
    cost_per_mtok: float | None
    tokens_per_joule: float | None
    launches: int = 1
    energy_launches: int = 0
    energy_not_measured: str | None = None
    accelerators: int | None = None
    total_tps: float | None = None

    @property
    def spend_per_hour(self) -> float | None:
        """What the side's accelerators cost per hour."""
        if self.price is None or self.accelerators is None:
            return None
        return self.price.per_accelerator_hour * self.accelerators


@dataclass(frozen=True)
class CostRow:
    """One benchmark case's cost, baseline against optimized; ``at`` names the SLOs it is priced at.
    ``published`` is the throughput gain a decision published for the case (the comparison's), and
    ``published_cost`` the cost gain where the decision was on cost itself."""

    case: str
    baseline: CostSide | None
    optimized: CostSide | None
    at: str | None = None
    published: PublishedGain | None = None
    published_cost: PublishedGain | None = None

    @property
    def change(self) -> CostChange | None:
        """The optimized cost per 1M tokens against the baseline's, from the published gain (of cost, or
        of throughput at the two sides' spend per hour), else from the two throughputs priced."""
        if self.published_cost is not None:
            return cost_gain_change(self.published_cost)
        if self.baseline is None or self.optimized is None:
            return None
        before, after = self.baseline.spend_per_hour, self.optimized.spend_per_hour
        if (
            not before
            or not after
            or self.baseline.cost_per_mtok is None
            or self.optimized.cost_per_mtok is None
        ):
            return None
        throughput = self.published
        if throughput is None and self.baseline.total_tps and self.optimized.total_tps:
            throughput = measured_gain(self.optimized.total_tps, self.baseline.total_tps)
        return cost_change(throughput, after / before) if throughput is not None else None

    @property
    def currency(self) -> str | None:
        priced = [side.price for side in (self.baseline, self.optimized) if side and side.price]
        return priced[0].currency if priced else None


@dataclass(frozen=True)
class ValidationSection:
    """One side (baseline or optimized) of "Other Benchmark Cases"."""

    serve_command: str | None
    blocks: tuple[BenchBlock, ...]


@dataclass(frozen=True)
class Unmeasured:
    """A candidate the infrastructure kept from being measured, and why."""

    stage: str
    label: str
    reason: str


@dataclass(frozen=True)
class LaunchRow:
    """One run of a study: the configuration it launched, why (``first`` measurement, a launch
    ``again`` — a relaunch, a close call's A B A B or a finalist's re-measurement —, or
    ``validation`` alone) and ``reason``, the same in words, its status, the complete runs of the tuning
    profile on it and their mean; ``marks`` are what its results were marked with (e.g. too short to
    judge)."""

    run_id: int
    configuration: str
    fingerprint: str | None
    stage: str | None
    kind: str
    status: str
    reason: str = ""
    runs: int = 0
    value: float | None = None
    marks: tuple[str, ...] = ()


@dataclass(frozen=True)
class LaunchCount:
    """What a search stage launched: proposals (each configuration's first launch, retries after an
    infrastructure failure included), re-measurements for the final pick, and validation launches."""

    proposals: int = 0
    remeasurements: int = 0
    validation: int = 0

    @property
    def total(self) -> int:
        return self.proposals + self.remeasurements + self.validation


@dataclass(frozen=True)
class TrialRow:
    """One proposal of a search: its parameters, its state in words, its screening value, the mean of
    its first objective over its ``samples`` (one per launch) and of each objective (``values``), how
    far it broke an SLO (> 0), and its note."""

    number: int
    params: Mapping[str, Any]
    state: str
    screening: float | None = None
    mean: float | None = None
    samples: tuple[float, ...] = ()
    values: tuple[float, ...] | None = None
    violation: float = 0.0
    repeat_of: int | None = None
    note: str | None = None
    gpu_hours: float = 0.0


@dataclass(frozen=True)
class SearchSection:
    """A search stage: its space, objectives and budget, what it launched against the budget (and,
    past it, why), why it stopped, its pick, every trial, the best so far against launches and
    GPU-hours, the Pareto front (two objectives) and the knobs' importances (None: not enough complete
    trials; ``importance_note`` says how many there were)."""

    stage: int
    name: str
    objectives: tuple[str, ...]
    space_size: int
    budget: str
    launches: LaunchCount
    trials: tuple[TrialRow, ...]
    stop: str | None = None
    pick: str | None = None
    over_budget: str | None = None
    convergence: tuple[Mapping[str, Any], ...] = ()
    front: tuple[int, ...] = ()
    importances: Mapping[str, float] | None = None
    importance_note: str = ""


@dataclass(frozen=True)
class VerdictRow:
    """A decision made with measured noise: the candidate, its stage and decision, and the verdict."""

    stage: str
    label: str
    decision: str | None
    verdict: Verdict


@dataclass(frozen=True)
class SpreadUsed:
    """The noise the decisions used: the study's spread (what today's launches measured, and the one
    offered from an earlier study with its source, age and why it was or was not used), the baseline's
    run-to-run and launch-to-launch split, and the smallest gain the study could tell from noise (None
    while its spread is unknown)."""

    study: StudySpread | None = None
    baseline: Spread | None = None
    detectable_gain_pct: float | None = None


@dataclass(frozen=True)
class Report:
    """A study's result (see the module), in the seeds' layout plus every number behind it.
    ``baseline`` is shown as its own section when no stage lists the baseline configuration among its
    candidates. ``unmeasured`` lists the candidates of an incomplete study: no recommendation is made
    over them, and ``provisional_best`` names the best measured configuration so far. ``records`` are
    the CSV's rows: every stored result of every run the study used (a run without one as one row)."""

    title: str
    model: str | None
    objective: str
    objective_unit: str
    recommended_command: str | None
    comparison: tuple[ComparisonRow, ...]
    stages: tuple[StageSection, ...]
    summary: tuple[SummaryRow, ...]
    hardware: str | None = None
    engine_versions: tuple[tuple[str, str], ...] = ()
    goal: str | None = None
    recommended_replicas: int = 1
    datasets: tuple[str, ...] = ()
    bench_commands: tuple[tuple[str, str], ...] = ()
    baseline_validation: ValidationSection | None = None
    optimized_validation: ValidationSection | None = None
    curves: tuple[tuple[str, LoadCurve], ...] = ()
    records: tuple[dict[str, Any], ...] = ()
    notes: tuple[str, ...] = ()
    decimals: int = 1
    baseline: CandidateSection | None = None
    unmeasured: tuple[Unmeasured, ...] = ()
    provisional_best: str | None = None
    accelerators: tuple[int | None, int | None] = (None, None)  # the baseline's, the optimized's
    recommendation_verdict: Verdict | None = None  # the optimized configuration over the baseline
    published: PublishedGain | None = None  # what the recommendation over the baseline publishes
    spread: SpreadUsed = field(default_factory=SpreadUsed)
    # candidates neither kept nor beaten: "tp=2 (+38.5 % ± 44.7 %, 95 %, 3 vs 3)"
    within_noise: tuple[str, ...] = ()
    searches: tuple[SearchSection, ...] = ()
    costs: tuple[CostRow, ...] = ()
    lower_is_better: bool = False
    study_id: int | None = None
    name: str | None = None
    status: str | None = None
    phase: str | None = None
    kind: str = "stages"  # "stages", "search" or "stages and search"
    hosts: tuple[str, ...] = ()
    tuning: str | None = None  # the tuning profile's title
    best: str | None = None  # the best configuration so far
    failure: str | None = None
    incomplete: str | None = None  # what an incomplete study lacks, in a sentence
    slos: Mapping[str, float] = field(default_factory=dict)
    verdicts: tuple[VerdictRow, ...] = ()
    launches: tuple[LaunchRow, ...] = ()
    caveats: tuple[str, ...] = ()
    predictions: PredictionSection | None = None  # figures predicted before the measurements
    # each decided stage's choice between aggregated and disaggregated serving (its trade and verdict)
    layouts: tuple[LayoutChoice, ...] = ()
