"""The trade a serving layout makes against another, and which side of it a study chose.

Disaggregating prefill from decode usually buys inter-token latency with time to first token (the KV
cache crosses a link before decoding starts) and changes throughput per accelerator either way;
:func:`trade_sentence` names all three changes against the reference, e.g. ``disaggregated 3P1D (P TP2,
D TP2) against aggregated TP2 ×4: TPOT −38 %, TTFT +22 %, tokens/s/GPU +12 %`` (a negative latency
change is a gain).

:func:`layout_choices` reads a study's plan: every stage whose decision weighed a disaggregated split
against an aggregated layout (its reference and candidates, or a search's trials, hold both) gives a
:class:`LayoutChoice` — the layout the stage chose, the best split and the best aggregated layout that
met the study's SLOs, the trade between them and the verdict between them, or, when one side met no SLO,
why not, with the figures of its best configuration. The verdict is the study's own where its decision
compared the two (one of them the stage's reference, the other a candidate judged against it), else the
same test on their launches at a last look (:func:`perflab.study.decide.verdict`). A configuration's
figures are read where its objective was (:func:`objective_point`): on a swept tuning profile, the load
whose point meets every SLO with the best objective value; each launch's figures are the mean of its
runs, a configuration's the mean of its launches. Tokens/s/GPU are output tokens per second per
accelerator of the configuration (prefill + decode for a split). The study's report and
``benchmarks/disagg_layouts.py`` both call it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from perflab.engines.config import EngineConfig
from perflab.study.decide import verdict
from perflab.study.loadcurve import curve_from_results
from perflab.study.types import CandidatePlan, Rules, StagePlan, StudyPlan
from perflab.study.verdict import Verdict

# Objectives read at a swept profile's highest load within the SLOs rather than at its best value.
AT_LIMIT = frozenset({"max_load_within_slo", "cost_per_mtok", "tokens_per_joule"})
# Decisions that leave a candidate without figures of its own to compare.
NOT_COMPARED = frozenset({"reused", "failed", "disqualified", "unmeasured", "too_short"})
SPLIT_FIRST = "the split against the aggregated layout"
AGGREGATED_FIRST = "the aggregated layout against the split"
# How a search trial's note begins when its measurement breaks the study's SLOs.
BREAKS = "breaks the SLOs: "
SweepPair = tuple[Mapping[str, Any] | None, Mapping[str, Any]]


@dataclass(frozen=True)
class Figures:
    """The figures a layout is compared on: mean TTFT and TPOT (ms) and output tokens/s per GPU."""

    ttft_ms: float
    tpot_ms: float
    tokens_per_s_per_gpu: float


def change_pct(value: float, reference: float) -> float:
    """``value`` against ``reference`` in %, (value − reference) / reference."""
    return (value - reference) / reference * 100.0


def _signed(pct: float) -> str:
    return f"{'+' if pct >= 0 else '−'}{abs(pct):.0f} %"


def trade_sentence(label: str, figures: Figures, reference_label: str, reference: Figures) -> str:
    """``label`` against ``reference_label``: its TPOT, TTFT and tokens/s/GPU changes, then who wins."""
    gain = figures.tokens_per_s_per_gpu / reference.tokens_per_s_per_gpu
    winner = label if gain >= 1 else reference_label
    factor = gain if gain >= 1 else 1 / gain
    return (
        f"{label} against {reference_label}: TPOT {_signed(change_pct(figures.tpot_ms, reference.tpot_ms))}, "
        f"TTFT {_signed(change_pct(figures.ttft_ms, reference.ttft_ms))}, tokens/s/GPU "
        f"{_signed(change_pct(figures.tokens_per_s_per_gpu, reference.tokens_per_s_per_gpu))} "
        f"({winner} by {factor:.2f}×)"
    )


def figures_text(figures: Figures) -> str:
    """``TPOT 14.2 ms, TTFT 310 ms, 35 tokens/s/GPU``."""
    return (
        f"TPOT {figures.tpot_ms:.1f} ms, TTFT {figures.ttft_ms:.0f} ms, "
        f"{figures.tokens_per_s_per_gpu:.0f} tokens/s/GPU"
    )


def _number(result: Mapping[str, Any], name: str) -> float | None:
    value = result.get(name)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def objective_point(
    results: Sequence[SweepPair], objective: str, slos: Mapping[str, float]
) -> tuple[Mapping[str, Any], bool] | None:
    """The result one run's objective was read from, and whether it meets the SLOs: an unswept run's
    result; on a swept one, the best point by the objective among those meeting every SLO (the highest
    such load for cost, energy and load objectives), else its lowest load, where latencies are lowest."""
    if not results:
        return None
    curve = curve_from_results(results, slos)
    if curve is None:
        result = results[0][1]
        return result, not curve_violations(result, slos)
    by_load = {float(point["value"]): result for point, result in results if point}
    within = [point for point in curve.points if point.meets_slos]
    if not within:
        return by_load[curve.points[0].load], False
    if objective in AT_LIMIT:
        return by_load[within[-1].load], True
    valued = [(value, point.load) for point in within if (value := _number(by_load[point.load], objective))]
    load = max(valued)[1] if valued else within[-1].load
    return by_load[load], True


def curve_violations(result: Mapping[str, Any], slos: Mapping[str, float]) -> list[str]:
    """The SLO fields ``result`` misses (a missing figure misses)."""
    return [name for name, limit in slos.items() if (value := _number(result, name)) is None or value > limit]


def point_figures(result: Mapping[str, Any], accelerators: int) -> Figures | None:
    """A result's figures per accelerator (None when it lacks one)."""
    ttft, tpot = _number(result, "mean_ttft_ms"), _number(result, "mean_tpot_ms")
    throughput = _number(result, "output_throughput")
    if ttft is None or tpot is None or throughput is None or accelerators < 1:
        return None
    return Figures(ttft, tpot, throughput / accelerators)


def mean_figures(figures: Sequence[Figures]) -> Figures | None:
    """The mean of several runs' or launches' figures (None for none)."""
    if not figures:
        return None
    return Figures(
        fmean(found.ttft_ms for found in figures),
        fmean(found.tpot_ms for found in figures),
        fmean(found.tokens_per_s_per_gpu for found in figures),
    )


def launch_figures(
    runs: Sequence[Sequence[SweepPair]], objective: str, slos: Mapping[str, float], accelerators: int
) -> Figures | None:
    """One launch's figures: the mean over its runs of the tuning profile of each run's objective point."""
    found = []
    for pairs in runs:
        point = objective_point(pairs, objective, slos)
        figures = point_figures(point[0], accelerators) if point is not None else None
        if figures is not None:
            found.append(figures)
    return mean_figures(found)


def configuration_figures(
    launches: Sequence[Sequence[Sequence[SweepPair]]],
    objective: str,
    slos: Mapping[str, float],
    accelerators: int,
) -> Figures | None:
    """A configuration's figures: the mean over its launches of each launch's (:func:`launch_figures`)."""
    found = [launch_figures(runs, objective, slos, accelerators) for runs in launches]
    return mean_figures([figures for figures in found if figures is not None])


def layout_of(config: EngineConfig) -> str:
    """``disaggregated 3P1D (P TP2, D TP2)`` or ``aggregated TP2 ×4`` (``TP2 DP4 EP8 attention-DP``)."""
    if config.disaggregation is not None:
        return f"disaggregated {config.disaggregation.label()}"
    words = [f"TP{config.tp}"]
    if config.dp > 1:
        words.append(f"DP{config.dp}")
    if config.ep > 1:
        words.append(f"EP{config.ep}")
    if config.dp_attention:
        words.append("attention-DP")
    replicas = f" ×{config.replicas}" if config.replicas > 1 else ""
    return f"aggregated {' '.join(words)}{replicas}"


@dataclass(frozen=True)
class Contender:
    """A measured configuration of a stage: its layout, its launch values of the objective, its figures
    and the SLOs its measurements break (none: it is feasible)."""

    layout: str
    disaggregated: bool
    samples: tuple[float, ...]
    figures: Figures | None
    violations: tuple[str, ...] = ()
    fingerprint: str | None = None
    reference: bool = False  # the stage's reference, which the others' verdicts are against
    verdict: Verdict | None = None  # the study's own verdict on it against the reference

    @property
    def feasible(self) -> bool:
        return bool(self.samples) and not self.violations

    @property
    def mean(self) -> float:
        return fmean(self.samples)


@dataclass(frozen=True)
class LayoutChoice:
    """What a stage decided between aggregated and disaggregated serving (see the module)."""

    stage: str
    chosen: str
    split: Contender | None
    aggregated: Contender | None
    trade: str | None = None
    verdict: Verdict | None = None
    why_not: tuple[str, ...] = field(default_factory=tuple)
    verdict_of: str = SPLIT_FIRST  # which side the verdict's gain is of, against the other

    @property
    def chose_split(self) -> bool:
        return self.chosen.startswith("disaggregated ")

    def text(self) -> str:
        """The stage's choice, the trade and the verdict (or why a side has none) in sentences."""
        parts = [f"{self.stage}: chose {self.chosen}."]
        if self.trade is not None:
            parts.append(f"{self.trade[0].upper()}{self.trade[1:]}.")
        if self.verdict is not None:
            parts.append(
                f"Verdict on {self.verdict_of}: {self.verdict.text()} ({self.verdict.outcome_text()})."
            )
        parts.extend(self.why_not)
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping."""

        def side(contender: Contender | None) -> dict[str, Any] | None:
            if contender is None:
                return None
            figures = contender.figures
            return {
                "layout": contender.layout,
                "feasible": contender.feasible,
                "mean": contender.mean if contender.samples else None,
                "launches": len(contender.samples),
                "mean_ttft_ms": figures.ttft_ms if figures else None,
                "mean_tpot_ms": figures.tpot_ms if figures else None,
                "tokens_per_s_per_gpu": figures.tokens_per_s_per_gpu if figures else None,
                "violations": list(contender.violations),
            }

        return {
            "stage": self.stage,
            "chosen": self.chosen,
            "chose_split": self.chose_split,
            "best_split": side(self.split),
            "best_aggregated": side(self.aggregated),
            "trade": self.trade,
            "verdict": self.verdict.to_dict() if self.verdict is not None else None,
            "verdict_of": self.verdict_of,
            "why_not": list(self.why_not),
            "text": self.text(),
        }


def _best(contenders: Sequence[Contender], rules: Rules) -> Contender | None:
    """The contender with the best mean, feasible ones first."""
    if not contenders:
        return None
    sign = -1.0 if rules.lower_is_better else 1.0
    return max(contenders, key=lambda contender: (contender.feasible, sign * contender.mean))


def _why_not(kind: str, best: Contender | None) -> str | None:
    """Why no configuration of one side met the SLOs, with its best one's figures."""
    if best is None or best.feasible:
        return None
    figures = f"; its figures: {figures_text(best.figures)}" if best.figures is not None else ""
    return f"No {kind} met the SLOs; the best, {best.layout}: {'; '.join(best.violations)}{figures}."


def choose_layout(
    stage: str, chosen: str, contenders: Sequence[Contender], rules: Rules
) -> LayoutChoice | None:
    """The stage's choice between the best split and the best aggregated layout among ``contenders``
    (None unless both kinds were measured)."""
    splits = [contender for contender in contenders if contender.disaggregated and contender.samples]
    aggregated = [contender for contender in contenders if not contender.disaggregated and contender.samples]
    if not splits or not aggregated:
        return None
    split, whole = _best(splits, rules), _best(aggregated, rules)
    assert split is not None and whole is not None
    why = tuple(
        reason
        for reason in (_why_not("disaggregated split", split), _why_not("aggregated layout", whole))
        if reason is not None
    )
    if why:
        return LayoutChoice(stage, chosen, split, whole, why_not=why)
    trade = None
    if split.figures is not None and whole.figures is not None:
        trade = trade_sentence(split.layout, split.figures, whole.layout, whole.figures)
    if whole.reference and split.verdict is not None:
        return LayoutChoice(stage, chosen, split, whole, trade, split.verdict)
    if split.reference and whole.verdict is not None:
        return LayoutChoice(stage, chosen, split, whole, trade, whole.verdict, verdict_of=AGGREGATED_FIRST)
    found = verdict(list(split.samples), list(whole.samples), rules, final=True)
    return LayoutChoice(stage, chosen, split, whole, trade, found)


def _contenders(stage: StagePlan, figures_of: Callable[[CandidatePlan], Figures | None]) -> list[Contender]:
    """The stage's reference and candidates that have launch values, each configuration once."""
    found: dict[str, Contender] = {}
    for candidate in (stage.reference, *stage.candidates):
        measurement, config = candidate.measurement, candidate.config
        if config is None or measurement is None or candidate.decision in NOT_COMPARED:
            continue
        samples = tuple(measurement.samples)
        if not samples or candidate.fingerprint in found:
            continue
        violations = tuple(measurement.violations)
        if not violations and candidate.decision == "infeasible":
            # a search trial's measurement keeps its SLO breaks in its note only
            violations = ((candidate.note or "").removeprefix(BREAKS) or "breaks an SLO",)
        found[candidate.fingerprint or ""] = Contender(
            layout_of(config),
            config.disaggregation is not None,
            samples,
            figures_of(candidate),
            violations,
            candidate.fingerprint,
            reference=candidate is stage.reference,
            verdict=candidate.verdict,
        )
    return list(found.values())


def layout_choices(
    plan: StudyPlan, rules: Rules, figures_of: Callable[[CandidatePlan], Figures | None]
) -> tuple[LayoutChoice, ...]:
    """Each decided stage's choice between aggregated and disaggregated serving (see the module);
    ``figures_of`` gives a candidate's figures (None when it has none)."""
    choices = []
    for stage in plan.stages:
        if not stage.decided:
            continue
        kept = stage.winner or stage.reference
        if kept.config is None:
            continue
        choice = choose_layout(stage.name, layout_of(kept.config), _contenders(stage, figures_of), rules)
        if choice is not None:
            choices.append(choice)
    return tuple(choices)
