"""A study's result, built once from its stored rows: :func:`study_report`.

Every rendering of a study — its page, the markdown report and its zip, ``study show --json`` and the
CSV — draws the :class:`~perflab.report.model.Report` this module builds, so they cannot disagree.
It reads the study as it stands (its spec, runs, results and plan; nothing is proposed) and gathers:

- each candidate with its configuration's serve command, the printed result of its tuning profile
  (a search trial screened out shows its screening result) or its failure line, the mean of its
  objective over its launches, its decision, state, note and verdict;
- each search stage's trials and launches against its budget (:mod:`perflab.report.search_result`);
- every launch of the study with why it was launched (:func:`~perflab.report.launches.launch_rows`);
- the comparison table (the baseline's and the recommendation's means for the tuning and every
  validation profile), the cost rows (means over launches too), the validation blocks, load curves;
- every verdict, the recommendation's verdict over the baseline, the spread the decisions used;
- notes and caveats that fit the study (staged, search or both), and the records of the CSV: every
  stored result of every run, with a row for a run that stored none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sqlmodel import Session

from db.models import ProfileResult, Run
from perflab.accelerators import accelerators_of
from perflab.cost.stored import OBJECTIVE_FIGURES, CostContext, load_cost_context, with_objectives
from perflab.hub.catalog import SAMPLE_REPORT_NOTE, used_sample
from perflab.hub.sample import SAMPLE_NAME
from perflab.profiles import BenchmarkProfile
from perflab.report.costs import cost_side, priced_result, slo_text
from perflab.report.launches import (
    Launch,
    LaunchPolicy,
    config_launches,
    latest_with,
    launch_rows,
    mean_figures,
    repetitions,
)
from perflab.report.layouts import layout_records, study_layouts
from perflab.report.model import (
    CandidateSection,
    ComparisonRow,
    CostRow,
    Figures,
    LaunchRow,
    Report,
    SpreadUsed,
    StageSection,
    Unmeasured,
    ValidationSection,
    VerdictRow,
)
from perflab.report.predictions import prediction_section, with_predictions
from perflab.report.published import PublishedGain, as_change, published_gain, recommendation_gain
from perflab.report.search_result import search_section, trial_state
from perflab.report.sections import (
    DECISION_WORDS,
    by_profile,
    distinct_cases,
    engine_versions,
    failure_block,
    hardware_text,
    record,
    result_block,
    time_scale_note,
)
from perflab.report.summary import summary_rows
from perflab.study.configs import serve_command
from perflab.study.decide import recommendation
from perflab.study.loadcurve import LoadCurve, curve_from_results
from perflab.study.objective import LOWER_IS_BETTER
from perflab.study.progress import StudyProgress, load_progress
from perflab.study.search_stage import SearchState, screening_profile
from perflab.study.spec import OBJECTIVE_UNITS, OBJECTIVES
from perflab.study.text import incomplete_text, slo_summary
from perflab.study.types import UNMEASURED, CandidatePlan, Measurement, StagePlan, StudyPlan

OBJECTIVE_WORDS = {
    "total_token_throughput": "Throughput",
    "output_throughput": "Output Throughput",
    "request_throughput": "Request Throughput",
    "request_goodput": "Goodput",
    "max_load_within_slo": "Load within SLO",
    "cost_per_mtok": "Cost",
    "tokens_per_joule": "Energy Efficiency",
}
STAGES_CAVEAT = (
    "The stages do not cover every combination of options: each stage starts from the best configuration "
    "so far, which finds a local optimum, not necessarily the global one."
)
HARDWARE_CAVEAT = "Results hold for the hardware, engine versions and traffic measured here."

Scorer = Callable[[Run], Callable[[ProfileResult], Mapping[str, Any]] | None]


class _Study:
    """A loaded study with what every part of its result reads: its launches by configuration and the
    search stages' accounts, by stage index."""

    def __init__(self, progress: StudyProgress, costs: CostContext) -> None:
        self.progress = progress
        self.costs = costs
        self.spec = progress.spec
        self.plan = progress.plan
        self.searches: dict[int, SearchState] = {
            step.stage.index: step.detail for step in self.plan.steps if isinstance(step.detail, SearchState)
        }

    def launches(self, candidate: CandidatePlan) -> list[Launch]:
        """Every run of the candidate's configuration (its own, or the one it reuses), oldest first."""
        return config_launches(self.progress.runs, self.progress.results, candidate.fingerprint)

    def figures(self, candidate: CandidatePlan, profile: BenchmarkProfile) -> Figures | None:
        """The candidate's figures of ``profile``: the mean over its launches, each the mean of its runs,
        as its decision averages the objective."""
        return mean_figures(
            self.launches(candidate),
            profile,
            self.spec.tuning(),
            repeats=self.spec.repeats,
            replicas=candidate.config.replicas if candidate.config else 1,
        )

    def scorer(self, run: Run) -> Callable[[ProfileResult], Mapping[str, Any]] | None:
        """What a run's results are scored on: the stored result, with cost and energy added for
        those objectives."""
        if self.spec.objective not in OBJECTIVE_FIGURES:
            return None
        return lambda result: with_objectives(result.result or {}, self.costs.figures(run, result))


def _command(candidate: CandidatePlan) -> str | None:
    return serve_command(candidate.config) if candidate.config is not None else None


def _state(study: _Study, candidate: CandidatePlan) -> str:
    """Where the candidate stands in words: a search trial's state, else its decision's words, else its
    run's status."""
    search = study.searches.get(candidate.stage_index)
    if search is not None and candidate.role == "candidate":
        trial = next((trial for trial in search.trials if trial.number == candidate.position), None)
        if trial is not None:
            return trial_state(trial, candidate.decision)
    if candidate.decision in DECISION_WORDS:
        return DECISION_WORDS[candidate.decision]
    if candidate.retrying:
        return "retrying"
    outcome = study.progress.outcome(candidate)
    return outcome.run.status if outcome is not None else "waiting"


def candidate_section(study: _Study, candidate: CandidatePlan) -> CandidateSection:
    """A candidate with its serve command, its tuning result blocks (a screened-out trial's screening
    block) or its failure line, its mean, decision, state and verdict."""
    tuning = study.spec.tuning()
    outcome = study.progress.outcome(candidate)
    stored = outcome.results if outcome is not None else ()
    results = by_profile(stored, tuning.name)
    search = study.searches.get(candidate.stage_index)
    if not results and search is not None:
        results = by_profile(stored, screening_profile(tuning, search.search.screening).name)
    measurement = candidate.measurement
    if results:
        blocks = tuple(result_block(result) for result in results)
    elif candidate.error is not None or (measurement is not None and measurement.state == "failed"):
        blocks = (failure_block(tuning.title, candidate.error or measurement.error or "failed"),)
    else:
        blocks = ()
    run = outcome.run if outcome is not None else None
    figures = study.figures(candidate, tuning)
    return CandidateSection(
        label=candidate.label,
        serve_command=_command(candidate),
        blocks=blocks,
        engine=candidate.config.engine if candidate.config is not None else None,
        decision=candidate.decision,
        note=candidate.note,
        value=candidate.value,
        figures=figures,
        run_id=run.id if run is not None else None,
        status="retrying" if candidate.retrying else run.status if run is not None else None,
        state=_state(study, candidate),
        verdict=candidate.verdict,
        launches=_launches_behind(figures, measurement if candidate.value is not None else None),
        fingerprint=candidate.fingerprint,
        config=candidate.config.model_dump(mode="json") if candidate.config else dict(candidate.changes),
    )


def _launches_behind(figures: Figures | None, measurement: Measurement | None) -> int:
    """How many launches a candidate's row stands on: those its figures are the mean of (a launch that
    failed after them leaves them shown), else its measured value's."""
    if figures is not None and figures.runs:
        return len(figures.runs)
    return measurement.launches if measurement is not None else 0


def stage_section(study: _Study, stage: StagePlan) -> StageSection:
    return StageSection(
        index=stage.index,
        name=stage.name,
        candidates=tuple(candidate_section(study, candidate) for candidate in stage.candidates),
        winner=stage.winner.label if stage.winner is not None else None,
        decided=stage.decided,
    )


def _validation(study: _Study, candidate: CandidatePlan) -> ValidationSection:
    """The candidate's validation blocks, each from the latest launch that measured its profile (a
    relaunch or a re-measurement runs the tuning profile only)."""
    blocks = []
    launches = study.launches(candidate)
    for profile in study.spec.validation():
        launch = latest_with(launches, profile.name)
        results = by_profile(launch.results, profile.name) if launch is not None else []
        blocks.extend(result_block(result) for result in results)
    return ValidationSection(_command(candidate), tuple(blocks))


def _cases(study: _Study) -> list[tuple[str, BenchmarkProfile]]:
    """Every case of the comparison: the tuning profile, then the validation profiles, their titles
    told apart where two share one."""
    profiles = [study.spec.tuning(), *study.spec.validation()]
    roles = ["tuning", *("validation" for _ in profiles[1:])]
    return list(zip(distinct_cases([profile.title for profile in profiles], roles), profiles, strict=True))


def _published(study: _Study) -> PublishedGain | None:
    """What the recommendation over the baseline publishes (:func:`recommendation_gain`)."""
    plan = study.plan
    kept = [stage.winner.verdict for stage in plan.stages if stage.winner]
    return recommendation_gain(recommendation(plan, study.progress.rules), kept)


def _comparison(study: _Study, published: PublishedGain | None) -> list[ComparisonRow]:
    """Per case, the baseline's and the optimized configuration's means; the tuning case of a
    throughput study shows the recommendation's published gain."""
    plan, spec = study.plan, study.spec
    on_tuning = published if spec.objective == "total_token_throughput" else None
    return [
        ComparisonRow(
            case,
            study.figures(plan.baseline, profile),
            study.figures(plan.best, profile),
            published=on_tuning if profile.name == spec.tuning().name else None,
        )
        for case, profile in _cases(study)
    ]


def _cost_rows(
    study: _Study, comparison: list[ComparisonRow], published: PublishedGain | None
) -> list[CostRow]:
    """Per case, the baseline's and the optimized configuration's cost at their published throughput
    and their energy, means over their launches (a swept tuning case at the study's SLO limit); the cost
    change follows from the case's published gain (of cost itself, for a cost study)."""
    spec, plan = study.spec, study.plan
    tuning = spec.tuning()
    rows = []
    for (case, profile), compared in zip(_cases(study), comparison, strict=True):
        swept = profile.name == tuning.name and tuning.sweep is not None
        slos = spec.slos if swept else {}
        sides = []
        for candidate in (plan.baseline, plan.best):
            per_launch = []
            for launch in study.launches(candidate):
                groups = repetitions(launch, profile, tuning, spec.repeats)
                chosen = [priced_result(group, slos) for group in groups]
                per_launch.append([study.costs.figures(launch.run, result) for result in chosen if result])
            sides.append(cost_side(per_launch))
        on_tuning = profile.name == tuning.name
        rows.append(
            CostRow(
                case,
                *sides,
                at=slo_text(slos) if slos else None,
                published=None if swept else compared.published,
                published_cost=published if on_tuning and spec.objective == "cost_per_mtok" else None,
            )
        )
    return rows


def _labels(plan: StudyPlan) -> dict[str, tuple[str, str | None]]:
    """Each configuration's label and stage: the first candidate that measured it."""
    labels: dict[str, tuple[str, str | None]] = {}
    for candidate in plan.candidates():
        if candidate.fingerprint is not None and candidate.decision != "reused":
            label = (
                candidate.label
                if candidate.label == candidate.stage_name
                else (f"{candidate.stage_name} · {candidate.label}")
            )
            labels.setdefault(candidate.fingerprint, (label, candidate.stage_name))
    return labels


def _launch_policy(study: _Study) -> LaunchPolicy:
    """Why the study launches a configuration again, by its rules."""
    rules, plan = study.progress.rules, study.plan
    searched = frozenset(
        candidate.fingerprint
        for candidate in plan.candidates()
        if candidate.stage_index in study.searches and candidate.fingerprint is not None
    )
    winners = (stage.winner.fingerprint for stage in plan.stages if stage.winner is not None)
    return LaunchPolicy(
        relaunches=rules.relaunches,
        max_launches=rules.max_launches,
        references=frozenset(
            fingerprint for fingerprint in (plan.baseline.fingerprint, *winners) if fingerprint
        ),
        searched=searched,
        block=dict(plan.confirmation.before) if plan.confirmation is not None else {},
    )


def _launches(study: _Study) -> list[LaunchRow]:
    spec, progress = study.spec, study.progress
    return launch_rows(
        progress.runs,
        progress.results,
        tuning=spec.tuning(),
        repeats=spec.repeats,
        objective=spec.objective,
        slos=spec.slos,
        validation={profile.name for profile in spec.validation()},
        labels=_labels(study.plan),
        scored=study.scorer,
        policy=_launch_policy(study),
    )


def _records(study: _Study, launches: list[LaunchRow]) -> list[dict[str, Any]]:
    """Every stored result of every run (a run with none as one row), with its configuration, the
    decision about it, why its run was launched and the configuration's mean."""
    progress = study.progress
    roles: dict[str, CandidatePlan] = {}
    for candidate in study.plan.candidates():
        if candidate.fingerprint is not None and candidate.decision != "reused":
            roles.setdefault(candidate.fingerprint, candidate)
    by_run = {launch.run_id: launch for launch in launches}
    rows = []
    seen: dict[str, int] = {}
    for run in progress.runs:
        candidate = roles.get(run.config_fingerprint or "")
        launch = by_run[run.id]
        seen[run.config_fingerprint or ""] = seen.get(run.config_fingerprint or "", 0) + 1
        published = published_gain(candidate.verdict) if candidate and candidate.verdict else None
        facts = {
            "study_id": progress.study.id,
            "configuration": launch.configuration,
            "fingerprint": run.config_fingerprint,
            "stage": candidate.stage_name if candidate else None,
            "candidate": candidate.label if candidate else None,
            "decision": candidate.decision if candidate else None,
            "published_gain_pct": published.change * 100.0 if published else None,
            "published_half_width_pct": published.half_width * 100.0
            if published and published.half_width is not None
            else None,
            "configuration_mean": candidate.value if candidate else None,
            "launch": seen[run.config_fingerprint or ""],
            "launch_kind": launch.kind,
            "run_status": run.status,
            "failure": run.failure_message if run.status == "failed" else None,
        }
        stored = progress.results.get(run.id, ())
        rows.extend(
            record(run, result, **facts, **study.costs.figures(run, result).record()) for result in stored
        )
        if not stored:
            rows.append(
                {**facts, "run_id": run.id, "engine": run.engine, "model": run.model, "host": run.host_name}
            )
    return rows


def _curves(study: _Study) -> list[tuple[str, LoadCurve]]:
    tuning = study.spec.tuning()
    if tuning.sweep is None:
        return []
    plan = study.plan
    curves = []
    shown = [plan.baseline] if plan.best is plan.baseline else [plan.baseline, plan.best]
    for candidate in shown:
        outcome = study.progress.outcome(candidate)
        if outcome is None:
            continue
        results = [(result.sweep_point, result.result) for result in by_profile(outcome.results, tuning.name)]
        curve = curve_from_results(results, study.spec.slos)
        if curve is not None:
            curves.append((f"{candidate.label}: {tuning.title}", curve))
    return curves


def _accelerators(study: _Study, candidate: CandidatePlan) -> int | None:
    """The accelerators the candidate's run used."""
    outcome = study.progress.outcome(candidate)
    return accelerators_of(outcome.run) if outcome is not None else None


def _within_noise(plan: StudyPlan) -> tuple[str, ...]:
    """The candidates whose verdict could not separate them from the best so far, with the verdict."""
    return tuple(
        f"{candidate.label} ({candidate.verdict.text()})"
        for stage in plan.stages
        for candidate in stage.candidates
        if candidate.decision == "within_noise" and candidate.verdict is not None
    )


def _spread(study: _Study) -> SpreadUsed:
    """The study's spread, the baseline's split of it, and the smallest gain the study could see."""
    progress = study.progress
    return SpreadUsed(
        study=progress.study_spread,
        baseline=progress.spread,
        detectable_gain_pct=progress.detectable_gain_pct,
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


def _kind(study: _Study) -> str:
    searched = sum(1 for stage in study.spec.stages if stage.search is not None)
    if searched == 0:
        return "stages"
    return "search" if searched == len(study.spec.stages) else "stages and search"


def _caveats(study: _Study) -> tuple[str, ...]:
    """What the study's method cannot see: the stages' greed, the search's untried configurations."""
    caveats = []
    if any(stage.search is None for stage in study.spec.stages):
        caveats.append(STAGES_CAVEAT)
    for index, search in study.searches.items():
        launched = len({trial.fingerprint for trial in search.trials if trial.launched})
        caveats.append(
            f"The search of stage {index} measured {launched} of the {search.search.size()} configurations "
            "of its space within its budget: an untried one may be better, and which ones it tried "
            "depends on its seed."
        )
    return (*caveats, HARDWARE_CAVEAT)


def _on_sample(progress: StudyProgress) -> bool:
    """Whether a result of the study was measured on perflab's ShareGPT-format sample."""
    return any(
        used_sample(result.result.get("notes")) for results in progress.results.values() for result in results
    )


def _notes(study: _Study) -> list[str]:
    progress, plan = study.progress, study.plan
    status = progress.study.status
    slos = slo_summary(plan)
    notes = [slos] if slos else []
    if status != "done":
        notes.append(
            f"The study is {status} ({(progress.study.state or {}).get('phase', '')}); figures are partial."
        )
    if any(run.simulated for run in progress.runs):
        notes.append("Measured on simulated hosts: the figures come from perflab's performance model.")
    scaled = time_scale_note(progress.runs)
    if scaled:
        notes.append(scaled)
    if _on_sample(progress):
        notes.append(SAMPLE_REPORT_NOTE)
    if plan.failure:
        notes.append(plan.failure)
    return notes


def study_report(session: Session, *, study_id: int, decimals: int = 1) -> Report:
    """The result of study ``study_id`` as it stands (complete once the study is done), percentages to
    ``decimals`` places: the one model every rendering draws."""
    progress = load_progress(session, study_id=study_id)
    return report_of(progress, load_cost_context(session, progress.runs), decimals=decimals)


def _baseline_in_stages(plan: StudyPlan) -> bool:
    fingerprint = plan.baseline.fingerprint
    return any(
        candidate.fingerprint == fingerprint for stage in plan.stages for candidate in stage.candidates
    )


def report_of(progress: StudyProgress, costs: CostContext | None = None, *, decimals: int = 1) -> Report:
    """The result of a loaded study; ``costs`` prices its results (no prices, no energy without)."""
    study = _Study(progress, costs or CostContext())
    plan, spec, row = study.plan, study.spec, progress.study
    baseline = candidate_section(study, plan.baseline)
    stages = [stage_section(study, stage) for stage in plan.stages]
    launches = _launches(study)
    searches = [
        search_section(
            stage.index, stage.name, study.searches[stage.index], stage.candidates, progress.runs, launches
        )
        for stage in plan.stages
        if stage.index in study.searches
    ]
    lower_is_better = spec.objective in LOWER_IS_BETTER
    on_sample = _on_sample(progress)
    records = _records(study, launches)
    predictions = prediction_section(
        row.state,
        [
            (candidate.label, candidate.fingerprint)
            for candidate in plan.candidates()
            if candidate.fingerprint
        ],
        records,
        tuning=spec.tuning().name,
        engine_versions=engine_versions(progress.runs),
    )
    published = _published(study)
    comparison = _comparison(study, published)
    layouts = study_layouts(progress)
    return Report(
        title=_title(progress),
        model=spec.model,
        objective=OBJECTIVES[spec.objective],
        objective_unit=OBJECTIVE_UNITS[spec.objective],
        recommended_command=_command(plan.best)
        if plan.status in ("validating", "done") and plan.recommends
        else None,
        recommended_replicas=plan.best.config.replicas if plan.best.config is not None else 1,
        comparison=tuple(comparison),
        stages=tuple(stages),
        summary=tuple(
            summary_rows(
                baseline,
                stages,
                lower_is_better=lower_is_better,
                recommendation=as_change(published, lower_is_better=lower_is_better) if published else None,
            )
        ),
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
        baseline_validation=_validation(study, plan.baseline) if spec.validation_profiles else None,
        optimized_validation=_validation(study, plan.best) if spec.validation_profiles else None,
        curves=tuple(_curves(study)),
        records=tuple(layout_records(with_predictions(records, predictions), layouts, plan)),
        costs=tuple(_cost_rows(study, comparison, published)),
        lower_is_better=lower_is_better,
        notes=tuple(_notes(study)),
        decimals=decimals,
        baseline=None if _baseline_in_stages(plan) else baseline,
        unmeasured=tuple(
            Unmeasured(candidate.stage_name, candidate.label, candidate.note or "")
            for candidate in plan.unmeasured()
        ),
        provisional_best=plan.best.label
        if plan.status == "incomplete" and plan.best.decision != UNMEASURED
        else None,
        accelerators=(_accelerators(study, plan.baseline), _accelerators(study, plan.best)),
        recommendation_verdict=recommendation(plan, progress.rules),
        published=published,
        spread=_spread(study),
        within_noise=_within_noise(plan),
        searches=tuple(searches),
        study_id=row.id,
        name=row.name,
        status=row.status,
        phase=(row.state or {}).get("phase"),
        kind=_kind(study),
        hosts=tuple(spec.hosts),
        tuning=spec.tuning().title,
        best=plan.best.label,
        failure=plan.failure,
        incomplete=incomplete_text(plan) if plan.status == "incomplete" else None,
        slos=dict(spec.slos),
        verdicts=tuple(
            VerdictRow(candidate.stage_name, candidate.label, candidate.decision, candidate.verdict)
            for candidate in plan.candidates()
            if candidate.verdict is not None
        ),
        launches=tuple(launches),
        caveats=_caveats(study),
        predictions=predictions,
        layouts=layouts,
    )
