"""The report of a study, from its spec, its plan and its runs' stored results.

The study's own records drive every section: each candidate shows the serve command of its
configuration and the printed result of its tuning profile (or its failure line), the comparison table
puts the baseline's and the winner's results side by side for the tuning and every validation profile,
and the summary applies :mod:`perflab.report.summary`'s rules to the stages.
"""

from __future__ import annotations

from dataclasses import replace

from sqlmodel import Session

from perflab.accelerators import accelerators_of
from perflab.cost.stored import CostContext, load_cost_context
from perflab.hub.catalog import SAMPLE_REPORT_NOTE, used_sample
from perflab.hub.sample import SAMPLE_NAME
from perflab.profiles import BenchmarkProfile
from perflab.report.costs import CostRow, priced_result, slo_text
from perflab.report.launches import Launch, config_launches, latest_with, mean_figures
from perflab.report.model import (
    CandidateSection,
    ComparisonRow,
    Figures,
    Report,
    StageSection,
    Unmeasured,
    ValidationSection,
)
from perflab.report.sections import (
    by_profile,
    decided_candidate,
    engine_versions,
    failure_block,
    hardware_text,
    record,
    result_block,
)
from perflab.report.summary import summary_rows
from perflab.study.configs import serve_command
from perflab.study.loadcurve import LoadCurve, curve_from_results
from perflab.study.objective import LOWER_IS_BETTER
from perflab.study.plan import UNMEASURED, CandidatePlan, StagePlan, StudyPlan
from perflab.study.progress import StudyProgress, load_progress
from perflab.study.search_history import search_history
from perflab.study.spec import OBJECTIVE_UNITS, OBJECTIVES
from perflab.study.verdict import Verdict

OBJECTIVE_WORDS = {
    "total_token_throughput": "Throughput",
    "output_throughput": "Output Throughput",
    "request_throughput": "Request Throughput",
    "request_goodput": "Goodput",
    "max_load_within_slo": "Load within SLO",
    "cost_per_mtok": "Cost",
    "tokens_per_joule": "Energy Efficiency",
}


def _command(candidate: CandidatePlan) -> str | None:
    return serve_command(candidate.config) if candidate.config is not None else None


def _launches(progress: StudyProgress, candidate: CandidatePlan) -> list[Launch]:
    """Every run of the candidate's configuration (its own, or the one it reuses), oldest first."""
    return config_launches(progress.runs, progress.results, candidate.fingerprint)


def _figures(progress: StudyProgress, candidate: CandidatePlan, profile: BenchmarkProfile) -> Figures | None:
    """The candidate's figures of ``profile``: the mean over its measured launches, each the mean of its
    repetitions, as its decision averages the objective."""
    return mean_figures(
        _launches(progress, candidate),
        profile,
        progress.spec.tuning(),
        repeats=progress.spec.repeats,
        replicas=candidate.config.replicas if candidate.config else 1,
    )


def candidate_section(progress: StudyProgress, candidate: CandidatePlan) -> CandidateSection:
    """A candidate with its serve command and its tuning result blocks (or failure line)."""
    tuning = progress.spec.tuning()
    outcome = progress.outcome(candidate)
    results = by_profile(outcome.results, tuning.name) if outcome is not None else []
    measurement = candidate.measurement
    if results:
        blocks = tuple(result_block(result) for result in results)
    elif candidate.error is not None or (measurement is not None and measurement.state == "failed"):
        blocks = (failure_block(tuning.title, candidate.error or measurement.error or "failed"),)
    else:
        blocks = ()
    return decided_candidate(
        candidate,
        outcome.run if outcome is not None else None,
        serve_command=_command(candidate),
        blocks=blocks,
        engine=candidate.config.engine if candidate.config is not None else None,
        figures=_figures(progress, candidate, tuning),
    )


def stage_section(progress: StudyProgress, stage: StagePlan) -> StageSection:
    return StageSection(
        index=stage.index,
        name=stage.name,
        candidates=tuple(candidate_section(progress, candidate) for candidate in stage.candidates),
        winner=stage.winner.label if stage.winner is not None else None,
        decided=stage.decided,
    )


def _latest_with(progress: StudyProgress, candidate: CandidatePlan, profile: str) -> Launch | None:
    """The candidate configuration's latest run that measured ``profile`` (a relaunch or a search
    finalist measured again runs the tuning profile only)."""
    return latest_with(_launches(progress, candidate), profile)


def _validation(progress: StudyProgress, candidate: CandidatePlan) -> ValidationSection:
    blocks = []
    for profile in progress.spec.validation():
        launch = _latest_with(progress, candidate, profile.name)
        results = by_profile(launch.results, profile.name) if launch is not None else []
        blocks.extend(result_block(result) for result in results)
    return ValidationSection(_command(candidate), tuple(blocks))


def _comparison(progress: StudyProgress) -> list[ComparisonRow]:
    plan = progress.plan
    return [
        ComparisonRow(
            profile.title,
            _figures(progress, plan.baseline, profile),
            _figures(progress, plan.best, profile),
        )
        for profile in (progress.spec.tuning(), *progress.spec.validation())
    ]


def _cost_rows(progress: StudyProgress, costs: CostContext) -> list[CostRow]:
    """Per case, the baseline's and the optimized configuration's cost (a swept tuning case at the
    study's SLO limit)."""
    plan, spec = progress.plan, progress.spec
    tuning = spec.tuning()
    rows = []
    for profile in (tuning, *spec.validation()):
        slos = spec.slos if profile is tuning and tuning.sweep is not None else {}
        sides = []
        for candidate in (plan.baseline, plan.best):
            launch = _latest_with(progress, candidate, profile.name)
            chosen = priced_result(by_profile(launch.results, profile.name), slos) if launch else None
            sides.append(costs.figures(launch.run, chosen) if chosen is not None else None)
        rows.append(CostRow(profile.title, *sides, at=slo_text(slos) if slos else None))
    return rows


def _records(progress: StudyProgress, costs: CostContext) -> list[dict]:
    rows = []
    roles = {}
    for candidate in progress.plan.candidates():
        if candidate.fingerprint is not None and candidate.decision != "reused":
            roles.setdefault(candidate.fingerprint, candidate)
    for fingerprint, outcome in progress.found.items():
        candidate = roles.get(fingerprint)
        for result in outcome.results:
            rows.append(
                record(
                    outcome.run,
                    result,
                    study_id=progress.study.id,
                    stage=candidate.stage_name if candidate else None,
                    candidate=candidate.label if candidate else None,
                    decision=candidate.decision if candidate else None,
                    objective_value=candidate.value if candidate else None,
                    **costs.figures(outcome.run, result).record(),
                )
            )
    return sorted(rows, key=lambda row: (row["run_id"], row["case"]))


def _curves(progress: StudyProgress) -> list[tuple[str, LoadCurve]]:
    tuning = progress.spec.tuning()
    if tuning.sweep is None:
        return []
    curves = []
    plan = progress.plan
    shown = [plan.baseline] if plan.best is plan.baseline else [plan.baseline, plan.best]
    for candidate in shown:
        outcome = progress.outcome(candidate)
        if outcome is None:
            continue
        results = [(result.sweep_point, result.result) for result in by_profile(outcome.results, tuning.name)]
        curve = curve_from_results(results, progress.spec.slos)
        if curve is not None:
            curves.append((f"{candidate.label}: {tuning.title}", curve))
    return curves


def _accelerators(progress: StudyProgress, candidate: CandidatePlan) -> int | None:
    """The accelerators the candidate's run used."""
    outcome = progress.outcome(candidate)
    return accelerators_of(outcome.run) if outcome is not None else None


def _confidence(progress: StudyProgress) -> str | None:
    """The recommendation's verdict over the baseline, as text (studies that measure noise)."""
    stored = (progress.study.state or {}).get("recommendation_verdict")
    return Verdict.from_dict(stored).text() if stored else None


def _within_noise(plan: StudyPlan) -> tuple[str, ...]:
    """The candidates whose verdict could not separate them from the best so far, with the verdict."""
    return tuple(
        f"{candidate.label} ({candidate.verdict.text()})"
        for stage in plan.stages
        for candidate in stage.candidates
        if candidate.decision == "within_noise" and candidate.verdict is not None
    )


def _title(progress: StudyProgress) -> str:
    accelerator = (progress.study.state or {}).get("accelerator")
    word = OBJECTIVE_WORDS[progress.spec.objective]
    where = f" on {accelerator}" if accelerator else ""
    return f"Optimizing {progress.spec.model} {word}{where}"


def _datasets(progress: StudyProgress) -> list[str]:
    lines = []
    for profile in (progress.spec.tuning(), *progress.spec.validation()):
        if profile.dataset == "random":
            shape = f"{profile.input_len} input tokens, {profile.output_len} output tokens"
        else:
            shape = f"{profile.dataset} dataset"
        lines.append(f"{profile.title}: {shape}, {profile.num_prompts} prompts")
    return lines


def study_report(session: Session, *, study_id: int, decimals: int = 1) -> Report:
    """The report of study ``study_id`` as it stands (complete once the study is done), percentages to
    ``decimals`` places."""
    progress = load_progress(session, study_id=study_id)
    return replace(report_of(progress, load_cost_context(session, progress.runs)), decimals=decimals)


def _baseline_in_stages(plan: StudyPlan) -> bool:
    fingerprint = plan.baseline.fingerprint
    return any(
        candidate.fingerprint == fingerprint for stage in plan.stages for candidate in stage.candidates
    )


def report_of(progress: StudyProgress, costs: CostContext | None = None) -> Report:
    """The report of a loaded study; ``costs`` prices its results (no prices, no energy without)."""
    costs = costs or CostContext()
    plan, spec, study = progress.plan, progress.spec, progress.study
    baseline = candidate_section(progress, plan.baseline)
    stages = [stage_section(progress, stage) for stage in plan.stages]
    notes = []
    if study.status != "done":
        notes.append(
            f"The study is {study.status} ({(study.state or {}).get('phase', '')}); figures are partial."
        )
    if any(run.simulated for run in progress.runs):
        notes.append("Measured on simulated hosts: the figures come from perflab's performance model.")
    on_sample = any(
        used_sample(result.result.get("notes"))
        for outcome in progress.found.values()
        for result in outcome.results
    )
    if on_sample:
        notes.append(SAMPLE_REPORT_NOTE)
    if plan.failure:
        notes.append(plan.failure)
    return Report(
        title=_title(progress),
        model=spec.model,
        objective=OBJECTIVES[spec.objective],
        objective_unit=OBJECTIVE_UNITS[spec.objective],
        recommended_command=_command(plan.best) if plan.status in ("validating", "done") else None,
        recommended_replicas=plan.best.config.replicas if plan.best.config is not None else 1,
        comparison=tuple(_comparison(progress)),
        stages=tuple(stages),
        summary=tuple(summary_rows(baseline, stages, lower_is_better=spec.objective in LOWER_IS_BETTER)),
        hardware=hardware_text(progress.runs),
        engine_versions=tuple(engine_versions(progress.runs)),
        goal=spec.goal,
        datasets=tuple(_datasets(progress)),
        bench_commands=tuple(
            # ShareGPT profiles measured on the sample name the sample's file, not the dump's
            (
                profile.title,
                profile.vllm_bench_command(
                    spec.model,
                    dataset_path=SAMPLE_NAME if on_sample and profile.dataset == "sharegpt" else None,
                ),
            )
            for profile in (spec.tuning(), *spec.validation())
        ),
        baseline_validation=_validation(progress, plan.baseline) if spec.validation_profiles else None,
        optimized_validation=_validation(progress, plan.best) if spec.validation_profiles else None,
        curves=tuple(_curves(progress)),
        records=tuple(_records(progress, costs)),
        costs=tuple(_cost_rows(progress, costs)),
        lower_is_better=spec.objective in LOWER_IS_BETTER,
        notes=tuple(notes),
        baseline=None if _baseline_in_stages(plan) else baseline,
        unmeasured=tuple(
            Unmeasured(candidate.stage_name, candidate.label, candidate.note or "")
            for candidate in plan.unmeasured()
        ),
        provisional_best=plan.best.label
        if plan.status == "incomplete" and plan.best.decision != UNMEASURED
        else None,
        accelerators=(_accelerators(progress, plan.baseline), _accelerators(progress, plan.best)),
        confidence=_confidence(progress),
        spread=progress.spread.text() if progress.spread is not None else None,
        within_noise=_within_noise(plan),
        searches=tuple(search_history(progress)) if plan.searches else (),
    )
