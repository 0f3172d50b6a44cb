"""From a study's runs to the planner's measurements, one per configuration fingerprint.

A configuration is measured once its run has stored the tuning profile's result (all its sweep points,
for a swept profile): the study decides on it while the same launch goes on with the validation
profiles. A run that failed before that is the configuration's failure — except when the
infrastructure failed it (:data:`~perflab.runner.errors.INFRASTRUCTURE_FAILURES`: host unreachable,
connection lost, port taken, GPUs held by others, worker stopped or died, …). That says nothing about
the configuration, so it gets a new run after a backoff (:class:`RetryPolicy`), up to the policy's
attempts; after the last one it is ``unmeasured``, never failed. Attempts are counted from the study's
``measure_from_run`` (set when a user asks to measure the missing candidates again). A partial result
(the requests measured before such a run was stopped) is kept with the run but never counts as a
measurement.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlmodel import Session, select

from db.models import FINISHED_RUN_STATUSES, ProfileResult, Run, utcnow
from perflab import settings
from perflab.profiles import BenchmarkProfile
from perflab.runner.errors import INFRASTRUCTURE_FAILURES
from perflab.study.objective import Score, score
from perflab.study.plan import Measurement

# ``study.state`` key: runs up to this id no longer count as attempts (measuring the missing again).
MEASURE_FROM_RUN = "measure_from_run"


@dataclass(frozen=True)
class RetryPolicy:
    """How a configuration whose run the infrastructure failed is measured again: after each delay of
    ``delays_s`` in turn, so ``1 + len(delays_s)`` attempts in all."""

    delays_s: tuple[float, ...] = settings.DEFAULT_STUDY_RETRY_DELAYS_S

    @classmethod
    def configured(cls) -> RetryPolicy:
        """The policy of ``PERFLAB_STUDY_RETRY_DELAYS_S``."""
        return cls(settings.study_retry_delays_s())

    @property
    def attempts(self) -> int:
        return 1 + len(self.delays_s)

    def delay_after(self, attempts: int) -> float:
        """Seconds to wait after ``attempts`` attempts before the next (none before the first)."""
        return self.delays_s[attempts - 1] if attempts >= 1 else 0.0


def infrastructure_reason(run: Run) -> str | None:
    """``class: message`` when the infrastructure failed ``run``, else None."""
    if run.status != "failed" or run.failure_class not in INFRASTRUCTURE_FAILURES:
        return None
    return f"{run.failure_class}: {run.failure_message or INFRASTRUCTURE_FAILURES[run.failure_class]}"


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
    run: Run,
    results: Sequence[ProfileResult],
    tuning: BenchmarkProfile,
    found: Score | None,
    attempts: int,
    *,
    retry: RetryPolicy,
    now: datetime,
) -> Measurement | None:
    finished = run.status in FINISHED_RUN_STATUSES
    moved_on = any(result.profile_name != tuning.name for result in results)
    # ``found`` is the score of the complete tuning results: None when there are none
    if found is not None and (tuning.sweep is None or finished or moved_on):
        return Measurement("measured", run.id, found.value, found.success_rate, finished=finished)
    if not finished:
        return Measurement("pending", run.id)
    reason = infrastructure_reason(run)
    if reason is not None:
        if attempts >= retry.attempts:
            return Measurement("unmeasured", run.id, error=reason, finished=True)
        retry_at = (run.finished_at or now) + timedelta(seconds=retry.delay_after(attempts))
        return Measurement("pending", run.id, error=reason, retry_at=retry_at) if now < retry_at else None
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
    retry: RetryPolicy | None = None,
    measure_from_run: int = 0,
    now: datetime | None = None,
    scored: Callable[[Run, ProfileResult], Mapping[str, Any]] | None = None,
) -> dict[str, RunOutcome]:
    """The outcome of each configuration (by fingerprint) from its latest run; ``attempts`` counts
    its runs after run ``measure_from_run``. ``scored`` gives the figures a result is scored on (its
    stored result, with the cost and energy figures added for those objectives)."""
    attempts: dict[str, int] = {}
    latest: dict[str, Run] = {}
    for run in runs:
        if run.config_fingerprint is None:
            continue
        counted = 1 if run.id > measure_from_run else 0
        attempts[run.config_fingerprint] = attempts.get(run.config_fingerprint, 0) + counted
        latest[run.config_fingerprint] = run
    found: dict[str, RunOutcome] = {}
    for fingerprint, run in latest.items():
        stored = tuple(results.get(run.id, ()))
        tuned = [
            (result.sweep_point, scored(run, result) if scored else result.result)
            for result in tuning_results(stored, tuning)
        ]
        run_score = score(objective, tuned, slos=slos, expected_prompts=tuning.num_prompts) if tuned else None
        measurement = _measurement(
            run,
            stored,
            tuning,
            run_score,
            attempts[fingerprint],
            retry=retry or RetryPolicy.configured(),
            now=now or utcnow(),
        )
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
