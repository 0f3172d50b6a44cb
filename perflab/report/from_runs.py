"""A report from a set of runs that were not a perflab study, e.g. a seed document's imported blocks.

The layout comes from the runs' labels, as the importer writes them from the document's headings:

- ``Stage · Candidate`` (``Choosing the Inference Engine · SGLang``): a candidate of that stage; a
  one-part label is a stage of its own (seed 002's ``Quantization``);
- a label with a ``Baseline`` or ``Optimized`` part (``Other Benchmark Cases · Baseline · random 32K
  input``, ``Throughput Profile · Optimized``): that side of a validation case, the case being the part
  after it, or before it when nothing follows.

Every change is new ÷ old − 1 (:mod:`perflab.report.published`). A write-up imported from elsewhere
printed a loss its own way, as how much more the other side did, negated (seed 001: 1580.36 against
1798.45 is −13.8 %, where new ÷ old − 1 is −12.1 %); its comparison rows keep that figure beside ours,
labelled as the write-up's (:func:`writeup_change`).

Stages keep the order of their first run. The first candidate of the first stage is the baseline. The
stages are then decided with the study rules (:func:`perflab.study.plan.decide_stage`) against the best
so far, on node-level throughput: a printed block measures one replica, so with ``gpus_per_node`` a
configuration using tp × dp accelerators counts ``gpus_per_node // (tp × dp)`` replicas (seed 000's
"3019.19x2"). Failed runs are failed candidates; the success rate of a block that does not count
failures is its successful requests over the prompts sent (``num_prompts``, by default the largest
count of successful requests among the stage runs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sqlmodel import Session

from db import crud
from db.models import ProfileResult, Run
from perflab.accelerators import accelerators_of
from perflab.cost.stored import load_cost_context
from perflab.report.costs import cost_side
from perflab.report.model import (
    CandidateSection,
    ComparisonRow,
    CostRow,
    CostSide,
    Figures,
    Report,
    StageSection,
    ValidationSection,
    node_figures,
)
from perflab.report.sections import (
    DECISION_WORDS,
    distinct_cases,
    engine_versions,
    failure_block,
    first_serve_command,
    hardware_text,
    record,
    result_block,
    time_scale_note,
)
from perflab.report.summary import summary_rows
from perflab.study.measure import results_by_run
from perflab.study.objective import success_rate
from perflab.study.plan import decide_stage
from perflab.study.types import CandidatePlan, Measurement, Rules

SIDES = ("Baseline", "Optimized")
LABEL_SEPARATOR = " · "


class RunLayoutError(ValueError):
    """The runs cannot be read as a study (no stage runs, a missing run)."""


@dataclass(frozen=True)
class RunLayout:
    """The runs sorted into stages (name → runs in order) and validation cases (case → run per side)."""

    stages: tuple[tuple[str, tuple[tuple[str, Run], ...]], ...]
    validation: tuple[tuple[str, dict[str, Run]], ...]


def layout_from_labels(runs: Sequence[Run]) -> RunLayout:
    """Read stages and validation cases from the runs' labels (see the module docstring)."""
    stages: dict[str, list[tuple[str, Run]]] = {}
    cases: dict[str, dict[str, Run]] = {}
    for run in runs:
        parts = [part.strip() for part in (run.label or f"run {run.id}").split(LABEL_SEPARATOR)]
        side = next((part for part in parts if part in SIDES), None)
        if side is not None:
            index = parts.index(side)
            case = LABEL_SEPARATOR.join(parts[index + 1 :]) or LABEL_SEPARATOR.join(parts[:index]) or side
            cases.setdefault(case, {})[side] = run
            continue
        stage = LABEL_SEPARATOR.join(parts[:-1]) if len(parts) > 1 else parts[0]
        stages.setdefault(stage, []).append((parts[-1], run))
    if not stages:
        raise RunLayoutError("none of the runs is a stage candidate (labels like 'Stage · Candidate')")
    return RunLayout(
        tuple((name, tuple(entries)) for name, entries in stages.items()),
        tuple(cases.items()),
    )


def _replicas(run: Run, gpus_per_node: int | None) -> int:
    config = run.config or {}
    if gpus_per_node and config:
        return max(1, gpus_per_node // (int(config.get("tp", 1)) * int(config.get("dp", 1))))
    return max(1, run.replicas)


def _accelerators(run: Run, gpus_per_node: int | None) -> int | None:
    """The accelerators behind the run's node figures: tp × dp × the replicas counted."""
    config = run.config or {}
    if not config:
        return accelerators_of(run)
    return int(config.get("tp", 1)) * int(config.get("dp", 1)) * _replicas(run, gpus_per_node)


class _Runs:
    """Stored results and node-level figures of the runs of a report."""

    def __init__(self, session: Session, runs: Sequence[Run], gpus_per_node: int | None) -> None:
        self.gpus_per_node = gpus_per_node
        self.results = results_by_run(session, [run.id for run in runs])

    def first(self, run: Run) -> ProfileResult | None:
        stored = self.results.get(run.id) or []
        return stored[0] if stored else None

    def figures(self, run: Run | None) -> Figures | None:
        result = self.first(run) if run is not None else None
        if result is None:
            return None
        # a printed block measured one replica; perflab's own results are node totals already
        per_replica = "replicas" not in result.result
        return node_figures(
            result.result, replicas=_replicas(run, self.gpus_per_node), per_replica=per_replica
        )


def _candidate(
    stage_index: int, stage: str, position: int, label: str, run: Run, runs: _Runs, expected: int
) -> CandidatePlan:
    result = runs.first(run)
    if run.status == "failed" or result is None:
        measurement = Measurement(
            "failed", run.id, error=run.failure_message or f"run {run.id} has no result", finished=True
        )
    else:
        figures = runs.figures(run)
        measurement = Measurement(
            "measured", run.id, figures.total_tps, success_rate(result.result, expected), finished=True
        )
    return CandidatePlan(stage_index, stage, position, label, {}, None, measurement=measurement)


def _section(plan: CandidatePlan, run: Run, runs: _Runs) -> CandidateSection:
    """A decided candidate as the report shows it: its label, decision, note and value, the run that
    measured it, and its printed block (or failure line)."""
    result = runs.first(run)
    if result is not None:
        blocks = (result_block(result, plan.label),)
    else:
        blocks = (failure_block(plan.label, plan.measurement.error or "failed"),)
    return CandidateSection(
        label=plan.label,
        serve_command=first_serve_command(run),
        blocks=blocks,
        engine=run.engine,
        decision=plan.decision,
        note=plan.note,
        value=plan.value,
        figures=runs.figures(run),
        run_id=run.id,
        status=run.status,
        state=DECISION_WORDS.get(plan.decision or ""),
        launches=1 if plan.value is not None else 0,
    )


def build_report_from_runs(
    session: Session,
    run_ids: Sequence[int],
    *,
    title: str | None = None,
    tuning_title: str = "Tuning profile",
    gpus_per_node: int | None = None,
    num_prompts: int | None = None,
    min_success_pct: float = 100.0,
    min_gain_pct: float = 1.0,
    decimals: int = 1,
    hardware: str | None = None,
) -> Report:
    """A seed-layout report of runs ``run_ids`` (see the module docstring); raises RunLayoutError."""
    runs = crud.get_runs(session, run_ids=run_ids)
    missing = sorted(set(run_ids) - {run.id for run in runs})
    if missing:
        raise RunLayoutError(f"no run with id {', '.join(str(run_id) for run_id in missing)}")
    layout = layout_from_labels(runs)
    stored = _Runs(session, runs, gpus_per_node)
    stage_runs = [run for _, entries in layout.stages for _, run in entries]
    expected = num_prompts or max(
        (r.completed or 0 for run in stage_runs if (r := stored.first(run))), default=0
    )
    rules = Rules(min_success=min_success_pct / 100.0, min_gain=min_gain_pct / 100.0, measures_noise=False)

    first_label, first_run = layout.stages[0][1][0]
    baseline = _candidate(1, layout.stages[0][0], 0, first_label, first_run, stored, expected)
    if baseline.value is None:
        raise RunLayoutError(f"the baseline run {first_run.id} ({first_run.label}) has no result")
    baseline = replace(baseline, decision="kept", note="the baseline")
    best, best_run = baseline, first_run
    sections: list[StageSection] = []
    for index, (name, entries) in enumerate(layout.stages, start=1):
        candidates = [
            baseline if run is first_run else _candidate(index, name, position, label, run, stored, expected)
            for position, (label, run) in enumerate(entries)
        ]
        decided, winner, _ = decide_stage(candidates, best, rules)
        section_candidates = tuple(
            _section(plan, run, stored) for plan, (_, run) in zip(decided, entries, strict=True)
        )
        sections.append(StageSection(index, name, section_candidates, winner.label if winner else None))
        if winner is not None:
            best, best_run = winner, entries[decided.index(winner)][1]
    baseline_section = sections[0].candidates[0]
    cases = dict(layout.validation)
    pairs = [(tuning_title, first_run, best_run)]
    pairs += [(case, sides.get("Baseline"), sides.get("Optimized")) for case, sides in cases.items()]
    roles = ["tuning", *("validation" for _ in cases)]
    names = distinct_cases([case for case, _, _ in pairs], roles)
    pairs = [(name, before, after) for name, (_, before, after) in zip(names, pairs, strict=True)]
    comparison = [
        _compared(
            case,
            stored.figures(before),
            stored.figures(after),
            all(run is not None and run.source == "imported" for run in (before, after)),
        )
        for case, before, after in pairs
    ]
    optimized_runs = [sides["Optimized"] for sides in cases.values() if "Optimized" in sides]
    baseline_runs = [sides["Baseline"] for sides in cases.values() if "Baseline" in sides]
    recommended = first_serve_command(optimized_runs[0] if optimized_runs else best_run)
    all_runs = [*stage_runs, *baseline_runs, *optimized_runs]
    costs = load_cost_context(session, all_runs)

    def cost_of(run: Run | None) -> CostSide | None:
        result = stored.first(run) if run is not None else None
        return cost_side([[costs.figures(run, result)]]) if result is not None else None

    return Report(
        title=title or f"Report of runs {', '.join(str(run.id) for run in runs)}",
        model=first_run.model,
        objective="Total TPS",
        objective_unit="tok/s",
        recommended_command=recommended,
        recommended_replicas=_replicas(best_run, gpus_per_node),
        accelerators=(_accelerators(first_run, gpus_per_node), _accelerators(best_run, gpus_per_node)),
        comparison=tuple(comparison),
        stages=tuple(sections),
        summary=tuple(summary_rows(baseline_section, sections)),
        hardware=hardware or hardware_text(all_runs),
        engine_versions=tuple(engine_versions(all_runs)),
        baseline_validation=_validation(cases, "Baseline", stored, first_run),
        optimized_validation=_validation(cases, "Optimized", stored, best_run),
        records=tuple(
            record(run, result, label=run.label, **costs.figures(run, result).record())
            for run in all_runs
            for result in stored.results.get(run.id, [])
        ),
        decimals=decimals,
        costs=tuple(CostRow(case, cost_of(before), cost_of(after)) for case, before, after in pairs),
        notes=tuple(note for note in (time_scale_note(all_runs),) if note),
    )


def writeup_change(new: float, old: float) -> float:
    """The change as the seeds' write-ups print it: new ÷ old − 1 for a gain, −(old ÷ new − 1) for a
    loss."""
    return new / old - 1.0 if new >= old else -(old / new - 1.0)


def _compared(case: str, before: Figures | None, after: Figures | None, imported: bool) -> ComparisonRow:
    """A comparison row; for runs imported from a write-up, with the write-up's own figure where it
    differs from ours (a loss)."""
    row = ComparisonRow(case, before, after)
    if not imported or row.gain is None or before is None or after is None:
        return row
    printed = writeup_change(after.total_tps, before.total_tps)
    return replace(row, writeup=printed) if round(printed, 6) != round(row.gain.change, 6) else row


def _validation(
    cases: dict[str, dict[str, Run]], side: str, runs: _Runs, fallback: Run
) -> ValidationSection | None:
    side_runs = [(case, sides[side]) for case, sides in cases.items() if side in sides]
    if not side_runs:
        return None
    blocks = []
    for case, run in side_runs:
        result = runs.first(run)
        blocks.append(
            result_block(result, case) if result else failure_block(case, run.failure_message or "failed")
        )
    return ValidationSection(
        first_serve_command(side_runs[0][1]) or first_serve_command(fallback), tuple(blocks)
    )
