"""What a study report holds, independent of how it is written (markdown, the study page, CSV/JSON).

Figures are node-level: ``Total TPS`` is what the whole node served. A configuration with N replicas
is written the seeds' way, per replica × N (``3019.19x2`` for a node total of 6038.38).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perflab.runner.results import times_replicas
from perflab.study.loadcurve import LoadCurve
from perflab.views.formatting import MISSING

if TYPE_CHECKING:
    from perflab.report.costs import CostRow


def relative_change(new: float, old: float) -> float:
    """``new`` against ``old`` as the seeds write it: new ÷ old − 1 for a gain, −(old ÷ new − 1) for a
    loss (seed 001: 1580.36 against 1798.45 is −13.8%)."""
    return new / old - 1.0 if new >= old else -(old / new - 1.0)


@dataclass(frozen=True)
class Figures:
    """Headline figures of one result: the node's total token throughput, its replicas, mean TPOT;
    ``runs`` counts the repetitions on each launch they are the mean of (empty: one stored result)."""

    total_tps: float | None
    replicas: int = 1
    mean_tpot_ms: float | None = None
    runs: tuple[int, ...] = ()

    @property
    def sample_text(self) -> str | None:
        """``mean of 2 runs on 3 launches`` (``2+2+1 runs`` when the launches differ); None for one run."""
        if sum(self.runs) <= 1:
            return None
        counts = set(self.runs)
        runs = str(counts.pop()) if len(counts) == 1 else "+".join(str(count) for count in self.runs)
        launches = len(self.runs)
        runs_word = "run" if runs == "1" else "runs"
        return f"mean of {runs} {runs_word} on {launches} launch{'es' if launches > 1 else ''}"

    @property
    def tps_text(self) -> str:
        """``3792.50``, or ``3019.19×2`` for two replicas (``—`` when not measured)."""
        if self.total_tps is None:
            return MISSING
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
    """A candidate as the report shows it."""

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
    candidate against the baseline, and that candidate's note when it was not kept."""

    option: str
    improvement: float | None
    versus_baseline: float | None = None
    note: str | None = None


@dataclass(frozen=True)
class ComparisonRow:
    """A benchmark case, baseline against optimized."""

    case: str
    baseline: Figures | None
    optimized: Figures | None

    @property
    def change(self) -> float | None:
        """The optimized node total against the baseline's, as a fraction (:func:`relative_change`)."""
        if self.baseline is None or self.optimized is None:
            return None
        if not self.baseline.total_tps or not self.optimized.total_tps:
            return None
        return relative_change(self.optimized.total_tps, self.baseline.total_tps)


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
class Report:
    """A study report in the seeds' layout, plus every number behind it. ``baseline`` is shown as its
    own section when no stage lists the baseline configuration among its candidates. ``unmeasured``
    lists the candidates of an incomplete study: no recommendation is made over them, and
    ``provisional_best`` names the best measured configuration so far."""

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
    confidence: str | None = None  # the optimized gain's verdict: "+4.1 % ± 1.3 %, 95 %, 3 vs 3"
    spread: str | None = None  # the baseline's measured spread: "run CV 2.0 %, launch CV 1.1 % (…)"
    # candidates neither kept nor beaten: "tp=2 (+38.5 % ± 44.7 %, 95 %, 3 vs 3)"
    within_noise: tuple[str, ...] = ()
    searches: tuple[dict[str, Any], ...] = ()  # search stages' histories (perflab.study.search_history)
    costs: tuple[CostRow, ...] = ()
    lower_is_better: bool = False
