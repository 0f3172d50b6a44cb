"""A search stage's history as people read it: what was tried, best so far, the front, what mattered.

:func:`search_history` is what ``study.state["search"]`` (so ``study show --json``), the study page and
the report show: every trial with its parameters, outcome and note; the convergence (best so far
against launches and GPU-hours); the Pareto front (two objectives); the knobs' importances (Optuna's
PED-ANOVA evaluator); why the search stopped and why its pick was made.
"""

from __future__ import annotations

from typing import Any

from perflab.study.progress import StudyProgress
from perflab.study.search import convergence, importances, pareto_front
from perflab.study.search_stage import SearchState, run_gpu_hours


def search_history(progress: StudyProgress) -> list[dict[str, Any]]:
    """One entry per reached search stage."""
    hours_by_fingerprint: dict[str, float] = {}
    for run in progress.runs:
        if run.config_fingerprint:
            hours_by_fingerprint[run.config_fingerprint] = hours_by_fingerprint.get(
                run.config_fingerprint, 0.0
            ) + run_gpu_hours(run)
    entries = []
    for step in progress.plan.steps:
        search = step.detail
        if not isinstance(search, SearchState):
            continue
        trials = search.trials
        hours = {
            trial.number: hours_by_fingerprint.get(trial.fingerprint or "", 0.0)
            for trial in trials
            if trial.launched
        }
        entries.append(
            {
                "stage": step.stage.index,
                "name": step.stage.name,
                "objectives": list(search.objectives),
                "space_size": search.search.size(),
                "launches": sum(1 for trial in trials if trial.launched),
                "stop": search.stop,
                "pick": search.pick,
                "trials": [
                    {
                        "number": trial.number,
                        "params": dict(trial.params),
                        "status": trial.status,
                        "screening": trial.screening,
                        "values": list(trial.values) if trial.values else None,
                        "samples": list(trial.samples),
                        "violation": trial.violation,
                        "repeat_of": trial.repeat_of,
                        "note": trial.note,
                        "gpu_hours": hours.get(trial.number, 0.0),
                    }
                    for trial in trials
                ],
                "convergence": convergence(trials, search.objectives, hours),
                "front": [trial.number for trial in _front(search)],
                "importances": importances(search.search, search.objectives, trials) if search.stop else {},
            }
        )
    return entries


def _front(search: SearchState) -> list[Any]:
    return pareto_front(search.trials, search.objectives) if len(search.objectives) == 2 else []
