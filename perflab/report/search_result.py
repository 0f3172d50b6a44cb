"""A search stage's part of a study's result: its trials in words, what it launched against its budget,
the best so far, the Pareto front and which knobs mattered.

:func:`search_section` turns the search strategy's account of its stage
(:class:`~perflab.study.search_stage.SearchState`) and the study's launches into a
:class:`~perflab.report.model.SearchSection`:

- **launches** are the stage's runs (every run of a configuration the search launched), counted as
  proposals (a configuration's first launch, retries after an infrastructure failure included),
  re-measurements for the final pick, and validation launches; past the budget, ``over_budget`` says
  by how much and what went past it. The study's confirmation block, once every stage is decided,
  launches the search's pick again too: those launches are the study's (``confirmation``), not the
  search's;
- each trial has **one state**, the same wherever it is shown ("measured", "screened out", …), and
  its **mean** over its launches with the samples behind it;
- the knobs' **importances** (Optuna's PED-ANOVA) are given only once the search has stopped with at
  least :data:`MIN_IMPORTANCE_TRIALS` complete trials, and ``importance_note`` says how many there
  were either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import fmean

from db.models import Run
from perflab.report.model import LaunchCount, LaunchRow, SearchSection, TrialRow
from perflab.study.search import Trial, convergence, importances, pareto_front
from perflab.study.search_stage import SearchState, run_gpu_hours
from perflab.study.types import CandidatePlan

# Complete, feasible trials a search needs before it says which knobs mattered: with fewer, the
# importances rank noise (five trials once ranked a knob that moved throughput by ±3 % first).
MIN_IMPORTANCE_TRIALS = 10
TRIAL_STATES = {
    "complete": "measured",
    "pruned": "screened out",
    "infeasible": "infeasible",
    "unmeasured": "not measured",
    "pending": "waiting",
    "screened": "screened, measuring",
}


def trial_state(trial: Trial, decision: str | None) -> str:
    """Where a trial stands, in words."""
    if trial.repeat_of is not None:
        return f"repeat of #{trial.repeat_of}"
    if trial.earlier:
        return "measured before"
    if decision == "winner":
        return "winner"
    if trial.violation > 0:
        return "breaks an SLO"
    return TRIAL_STATES.get(trial.status, trial.status)


def _budget(state: SearchState) -> str:
    budget = state.search.budget
    parts = []
    if budget.launches is not None:
        parts.append(f"{budget.launches} launches")
    if budget.gpu_hours is not None:
        parts.append(f"{budget.gpu_hours:g} GPU-hours")
    return " and ".join(parts)


def launch_count(state: SearchState, launches: Sequence[LaunchRow]) -> LaunchCount:
    """The stage's runs by why they were launched."""
    launched = {trial.fingerprint for trial in state.trials if trial.launched}
    kinds = [launch.kind for launch in launches if launch.fingerprint in launched]
    return LaunchCount(
        proposals=kinds.count("first"),
        remeasurements=kinds.count("again"),
        validation=kinds.count("validation"),
    )


def over_budget(state: SearchState, count: LaunchCount) -> str | None:
    """Why the stage launched more than its budget of launches (None when it did not)."""
    limit = state.search.budget.launches
    if limit is None or count.total <= limit:
        return None
    proposed = sum(1 for trial in state.trials if trial.launched)
    parts = []
    if count.proposals > proposed:
        parts.append(f"{count.proposals - proposed} retries after infrastructure failures")
    if count.remeasurements:
        parts.append(
            f"{count.remeasurements} re-measurements for the final pick (up to "
            f"{state.search.max_measurements} confirmation launches of each finalist)"
        )
    if count.validation:
        parts.append(f"{count.validation} validation launches (the winner's validation profiles)")
    return f"{count.total} launches against a budget of {limit}, {count.total - limit} past it: " + "; ".join(
        parts
    )


def _importances(state: SearchState) -> tuple[Mapping[str, float] | None, str]:
    complete = sum(
        1 for trial in state.trials if trial.launched and trial.status == "complete" and trial.violation <= 0
    )
    if state.stop is None:
        return None, f"not yet: the search goes on ({complete} complete trials)"
    if complete < MIN_IMPORTANCE_TRIALS:
        return None, f"not enough trials: {complete} complete, at least {MIN_IMPORTANCE_TRIALS} needed"
    found = importances(state.search, state.objectives, state.trials)
    if not found:
        return None, f"one knob only ({complete} complete trials)"
    return found, f"from {complete} complete trials (Optuna's PED-ANOVA)"


def _trial_row(trial: Trial, candidate: CandidatePlan | None, hours: float) -> TrialRow:
    samples = tuple(trial.samples)
    note = candidate.note if candidate is not None else trial.note
    if trial.screening_short is not None:
        screening = f"screening {trial.screening_short}: it pruned nothing"
        note = f"{note}; {screening}" if note else screening
    return TrialRow(
        number=trial.number,
        params=dict(trial.params),
        state=trial_state(trial, candidate.decision if candidate else None),
        screening=trial.screening,
        mean=fmean(samples) if samples else None,
        samples=samples,
        values=tuple(trial.values) if trial.values else None,
        violation=trial.violation,
        repeat_of=trial.repeat_of,
        note=note,
        gpu_hours=hours,
    )


def search_section(
    index: int,
    name: str,
    state: SearchState,
    candidates: Sequence[CandidatePlan],
    runs: Sequence[Run],
    launches: Sequence[LaunchRow],
) -> SearchSection:
    """The stage's section (see the module); ``candidates`` are the stage's, one per trial."""
    hours_by_fingerprint: dict[str, float] = {}
    for run in runs:
        if run.config_fingerprint:
            spent = hours_by_fingerprint.get(run.config_fingerprint, 0.0) + run_gpu_hours(run)
            hours_by_fingerprint[run.config_fingerprint] = spent
    hours = {
        trial.number: hours_by_fingerprint.get(trial.fingerprint or "", 0.0)
        for trial in state.trials
        if trial.launched
    }
    by_number = {candidate.position: candidate for candidate in candidates}
    count = launch_count(state, launches)
    found, note = _importances(state)
    front = pareto_front(state.trials, state.objectives) if len(state.objectives) == 2 else []
    return SearchSection(
        stage=index,
        name=name,
        objectives=state.objectives,
        space_size=state.search.size(),
        budget=_budget(state),
        launches=count,
        trials=tuple(
            _trial_row(trial, by_number.get(trial.number), hours.get(trial.number, 0.0))
            for trial in state.trials
        ),
        stop=state.stop,
        pick=state.pick,
        over_budget=over_budget(state, count),
        convergence=tuple(convergence(state.trials, state.objectives, hours)),
        front=tuple(trial.number for trial in front),
        importances=found,
        importance_note=note,
    )
