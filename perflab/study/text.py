"""A study's progress as plain text, for ``python -m perflab study show`` and ``study run --wait``."""

from __future__ import annotations

from perflab.predict.store import prediction_line
from perflab.study.progress import StudyProgress
from perflab.study.spec import OBJECTIVE_UNITS
from perflab.study.types import UNMEASURED, CandidatePlan, StudyPlan


def _value(candidate: CandidatePlan, unit: str) -> str:
    value = candidate.value
    return f"{value:.2f} {unit}".rstrip() if value is not None else "-"


def _state(progress: StudyProgress, candidate: CandidatePlan) -> str:
    if candidate.decision is not None:
        return candidate.decision.replace("_", " ")
    if candidate.retrying:
        return "retrying"
    outcome = progress.outcome(candidate)
    return outcome.run.status if outcome is not None else "waiting"


def _line(progress: StudyProgress, candidate: CandidatePlan, unit: str) -> str:
    outcome = progress.outcome(candidate)
    run = f"run {outcome.run.id}" if outcome is not None else ""
    note = f"  {candidate.note}" if candidate.note else ""
    state = _state(progress, candidate)
    return f"  {candidate.label:<28} {state:<13} {_value(candidate, unit):>16}  {run}{note}"


def incomplete_text(plan: StudyPlan) -> str:
    """What an incomplete study lacks, and what its best so far is worth."""
    missing = "; ".join(
        f"{candidate.stage_name} · {candidate.label} ({candidate.note})" for candidate in plan.unmeasured()
    )
    provisional = (
        f" The best measured so far, {plan.best.label}, is provisional: it claims nothing over them."
        if plan.best.decision != UNMEASURED
        else ""
    )
    return f"Incomplete: not measured because of the infrastructure: {missing}.{provisional}"


def slo_summary(plan: StudyPlan) -> str | None:
    """What the SLOs say of a study whose baseline breaks one (a configuration that breaks one never
    becomes the best over it)."""
    baseline = plan.baseline.measurement
    if baseline is not None and baseline.violations:
        text = f"The baseline breaks the SLOs ({'; '.join(baseline.violations)})"
        if plan.best is not plan.baseline and plan.recommends:
            return f"{text}; {plan.best.label} meets them."
        return f"{text}; no configuration measured so far meets them, so none is recommended."
    return None


def progress_lines(progress: StudyProgress) -> list[str]:
    """Status, every reached stage with its candidates, and the recommendation."""
    study, plan = progress.study, progress.plan
    unit = OBJECTIVE_UNITS[progress.spec.objective]
    phase = (study.state or {}).get("phase") or ""
    # the phase says more than the status only while the study is under way ("[running] stage 2 of 4")
    shown = f" {phase}" if phase and phase != study.status else ""
    lines = [f"study {study.id}: {study.name} [{study.status}]{shown}"]
    prediction = prediction_line(study.state)
    if prediction:
        lines.append(prediction)
    slos = slo_summary(plan)
    if slos:
        lines.append(slos)
    lines.append("Baseline")
    lines.append(_line(progress, plan.baseline, unit))
    for stage in plan.stages:
        lines.append(f"{stage.index}. {stage.name}")
        lines.extend(_line(progress, candidate, unit) for candidate in stage.candidates)
    if plan.failure:
        lines.append(f"failed: {plan.failure}")
    if plan.status == "incomplete":
        lines.append(incomplete_text(plan))
    if study.recommended_command:
        lines.append(f"recommended: {study.recommended_command}")
        if plan.best.config is not None and plan.best.config.replicas > 1:
            lines.append(f"  with {plan.best.config.replicas} replicas per node")
    return lines
