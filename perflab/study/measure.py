"""From a study's runs to the planner's measurements, one per configuration fingerprint.

A configuration is measured once its run has stored the tuning profile's result (all its sweep points,
for a swept profile): the study decides on it while the same launch goes on with the validation
profiles. A run that failed before that is the configuration's failure, except when the worker stopped
or died under it (``worker_stopped``/``worker_restarted``): that says nothing about the configuration,
so it gets a new run, up to :data:`MAX_ATTEMPTS` in all. A partial result (the requests measured
before such a run was stopped) is kept with the run but never counts as a measurement.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sqlmodel import Session, select

from db.models import FINISHED_RUN_STATUSES, ProfileResult, Run
from perflab.profiles import BenchmarkProfile
from perflab.study.objective import Score, score
from perflab.study.plan import Measurement

INTERRUPTED_FAILURES: frozenset[str] = frozenset({"worker_stopped", "worker_restarted"})
MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class RunOutcome:
    """One configuration's latest run, its stored results, its score and the planner's measurement."""

    run: Run
    results: tuple[ProfileResult, ...]
    score: Score | None
    measurement: Measurement | None
    attempts: int


def study_runs(session: Session, *, study_id: int) -> list[Run]:
    """The runs a study queued, oldest first."""
    return list(session.exec(select(Run).where(Run.study_id == study_id).order_by(Run.id)))


def results_by_run(session: Session, run_ids: Iterable[int]) -> dict[int, list[ProfileResult]]:
    """Stored profile results of these runs, in stored order (one query)."""
    wanted = list(run_ids)
    grouped: dict[int, list[ProfileResult]] = {run_id: [] for run_id in wanted}
    if not wanted:
        return grouped
    query = (
        select(ProfileResult)
        .where(ProfileResult.run_id.in_(wanted))
        .order_by(ProfileResult.run_id, ProfileResult.position)
    )
    for result in session.exec(query):
        grouped[result.run_id].append(result)
    return grouped


def tuning_results(results: Sequence[ProfileResult], tuning: BenchmarkProfile) -> list[ProfileResult]:
    """The complete (not partial) results of the tuning profile."""
    return [
        result
        for result in results
        if result.profile_name == tuning.name and not (result.result or {}).get("partial")
    ]


def _measurement(
    run: Run, results: Sequence[ProfileResult], tuning: BenchmarkProfile, found: Score | None, attempts: int
) -> Measurement | None:
    finished = run.status in FINISHED_RUN_STATUSES
    moved_on = any(result.profile_name != tuning.name for result in results)
    # ``found`` is the score of the complete tuning results: None when there are none
    if found is not None and (tuning.sweep is None or finished or moved_on):
        return Measurement("measured", run.id, found.value, found.success_rate, finished=finished)
    if not finished:
        return Measurement("pending", run.id)
    if run.status == "failed" and run.failure_class in INTERRUPTED_FAILURES and attempts < MAX_ATTEMPTS:
        return None
    if run.status == "cancelled":
        error = "the run was cancelled"
    elif run.status == "failed":
        error = run.failure_message or run.failure_class or "the run failed"
    else:
        error = f"the run stored no result for the tuning profile '{tuning.name}'"
    return Measurement("failed", run.id, error=error, finished=True)


def outcomes(
    runs: Sequence[Run],
    results: Mapping[int, Sequence[ProfileResult]],
    *,
    tuning: BenchmarkProfile,
    objective: str,
    slos: Mapping[str, float],
) -> dict[str, RunOutcome]:
    """The outcome of each configuration (by fingerprint) from its latest run."""
    attempts: dict[str, int] = {}
    latest: dict[str, Run] = {}
    for run in runs:
        if run.config_fingerprint is None:
            continue
        attempts[run.config_fingerprint] = attempts.get(run.config_fingerprint, 0) + 1
        latest[run.config_fingerprint] = run
    found: dict[str, RunOutcome] = {}
    for fingerprint, run in latest.items():
        stored = tuple(results.get(run.id, ()))
        tuned = [(result.sweep_point, result.result) for result in tuning_results(stored, tuning)]
        run_score = score(objective, tuned, slos=slos, expected_prompts=tuning.num_prompts) if tuned else None
        measurement = _measurement(run, stored, tuning, run_score, attempts[fingerprint])
        found[fingerprint] = RunOutcome(run, stored, run_score, measurement, attempts[fingerprint])
    return found


def measurements(found: Mapping[str, RunOutcome]) -> dict[str, Measurement]:
    """The planner's input: measurements of configurations that do not need a new run."""
    return {
        fingerprint: item.measurement for fingerprint, item in found.items() if item.measurement is not None
    }


def unfinished(runs: Sequence[Run]) -> list[Run]:
    """Runs not yet done, failed or cancelled."""
    return [run for run in runs if run.status not in FINISHED_RUN_STATUSES]
