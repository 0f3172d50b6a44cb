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

A launch whose tuning result cannot be judged (too short, or riding an earlier run's prefix cache:
:func:`perflab.runner.evidence.unjudged_reason`) is no measurement either: once it has ended, the
configuration gets a new launch, up to the policy's attempts; after the last one it is ``too_short``
with the reason, and no decision uses it.

A run that carries validation profiles only (the baseline's or the winner's validation launch, when
the launches that measured them dropped their validation profiles) measures nothing the decisions use:
:func:`outcomes` leaves it out.

Noise: a study may repeat its tuning profile on the same launch (``repeats``: the copies are named
``<name>-repeat2``, ``-repeat3``, …, each stored as its own result) and measure a configuration on
several fresh
launches (``relaunches``, and again when a verdict is a close call). A launch's value is the mean of
its repetitions; a configuration's :class:`~perflab.study.types.Measurement` carries every launch's
value (``values``), its value being their mean. Attempts of the infrastructure retry count the runs
since the configuration's last measured launch.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlmodel import Session, select

from db import crud
from db.models import FINISHED_RUN_STATUSES, ProfileResult, Run, utcnow
from perflab import settings
from perflab.profiles import BenchmarkProfile
from perflab.runner.errors import INFRASTRUCTURE_FAILURES
from perflab.runner.evidence import unjudged_reason
from perflab.study.objective import Score, combined_slos, score
from perflab.study.types import Measurement

# The tuning profile's repetition k (k ≥ 2) on one launch is named ``<name>-repeat<k>``.
REPEAT_MARK = "-repeat"
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
    """Stored profile results of these runs, in stored order (one query), without the per-request
    arrays nothing here reads (:func:`db.crud.figures_of_runs`)."""
    wanted = list(run_ids)
    grouped: dict[int, list[ProfileResult]] = {run_id: [] for run_id in wanted}
    for result in crud.figures_of_runs(session, run_ids=wanted):
        grouped[result.run_id].append(result)
    return grouped


def validation_only(run: Run, validation: Collection[str]) -> bool:
    """Whether ``run`` was launched for validation profiles (named in ``validation``) alone."""
    names = {str(profile.get("name")) for profile in run.profiles}
    return bool(names) and names <= set(validation)


def is_tuning(profile_name: str, tuning: BenchmarkProfile) -> bool:
    """Whether ``profile_name`` is the tuning profile or one of its repetitions."""
    head, _, number = profile_name.rpartition(REPEAT_MARK)
    return profile_name == tuning.name or (head == tuning.name and number.isdigit())


def tuning_results(results: Sequence[ProfileResult], tuning: BenchmarkProfile) -> list[ProfileResult]:
    """The complete (not partial) results of the tuning profile and its repetitions."""
    return [
        result
        for result in results
        if is_tuning(result.profile_name, tuning) and not (result.result or {}).get("partial")
    ]


def unjudged(results: Sequence[ProfileResult], tuning: BenchmarkProfile) -> str | None:
    """Why a launch's complete tuning results cannot be judged: the reason the first such one carries
    (too short, or riding an earlier run's prefix cache: :mod:`perflab.runner.evidence`). One such point
    of a sweep makes the whole launch unjudged: a curve without its point is another curve."""
    reasons = (unjudged_reason(result.result) for result in tuning_results(results, tuning))
    return next((reason for reason in reasons if reason is not None), None)


Figures = Callable[[ProfileResult], Mapping[str, Any]]


def _by_repetition(
    results: Sequence[ProfileResult], tuning: BenchmarkProfile, figures: Figures | None = None
) -> list[list[tuple[Any, Any]]]:
    """The tuning results of one launch as ``(sweep_point, figures)`` pairs, one list per repetition;
    the figures are the stored result, or what ``figures`` makes of it."""
    grouped: dict[str, list[tuple[Any, Any]]] = {}
    for result in tuning_results(results, tuning):
        found = figures(result) if figures is not None else result.result
        grouped.setdefault(result.profile_name, []).append((result.sweep_point, found))
    return list(grouped.values())


def repetition_values(
    results: Sequence[ProfileResult], tuning: BenchmarkProfile, objective: str, slos: Mapping[str, float]
) -> list[float]:
    """The objective's value of each repetition of the tuning profile on one launch."""
    values = [score(objective, pairs, slos=slos).value for pairs in _by_repetition(results, tuning)]
    return [value for value in values if value is not None and value > 0]


def launch_score(
    results: Sequence[ProfileResult],
    tuning: BenchmarkProfile,
    objective: str,
    slos: Mapping[str, float],
    figures: Figures | None = None,
) -> Score | None:
    """One launch's score: the mean of its repetitions' values (each scored on its own sweep points),
    the lowest success rate among them, the SLOs the mean of their SLO fields breaks; None without a
    complete tuning result."""
    repetitions = _by_repetition(results, tuning, figures)
    if not repetitions:
        return None
    expected = tuning.num_prompts
    scores = [score(objective, pairs, slos=slos, expected_prompts=expected) for pairs in repetitions]
    first = scores[0]
    values = [found.value for found in scores if found.value is not None]
    rates = [found.success_rate for found in scores if found.success_rate is not None]
    if len(scores) == 1 or not values:
        return first
    means, violations = combined_slos(scores, slos)
    return Score(sum(values) / len(values), min(rates, default=None), first.curve, violations, means)


def complete_launch(
    run: Run, results: Sequence[ProfileResult], tuning: BenchmarkProfile, repeats: int
) -> bool:
    """Whether the launch has measured every repetition of the tuning profile."""
    if run.status in FINISHED_RUN_STATUSES or any(not is_tuning(r.profile_name, tuning) for r in results):
        return True
    done = {result.profile_name for result in tuning_results(results, tuning)}
    return tuning.sweep is None and len(done) >= repeats


def _measurement(
    run: Run,
    results: Sequence[ProfileResult],
    tuning: BenchmarkProfile,
    found: Score | None,
    attempts: int,
    *,
    retry: RetryPolicy,
    now: datetime,
    repeats: int = 1,
) -> Measurement | None:
    finished = run.status in FINISHED_RUN_STATUSES
    # ``found`` is the score of the complete tuning results: None when there are none
    short = unjudged(results, tuning)
    if short is not None and complete_launch(run, results, tuning, repeats):
        # measured again on a new launch (sized by the runner), until the attempts run out
        if attempts >= retry.attempts:
            return Measurement("too_short", run.id, error=short, finished=finished)
        return None if finished else Measurement("pending", run.id, error=short)
    if found is not None and complete_launch(run, results, tuning, repeats):
        return Measurement(
            "measured",
            run.id,
            found.value,
            found.success_rate,
            finished=finished,
            violations=found.violations,
        )
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
    repeats: int = 1,
    scored: Callable[[Run, ProfileResult], Mapping[str, Any]] | None = None,
    validation: Collection[str] = (),
) -> dict[str, RunOutcome]:
    """The outcome of each configuration (by fingerprint) from its latest run, with the values of all
    its measured launches; ``attempts`` counts its runs after run ``measure_from_run`` and after its
    last measured launch. ``scored`` gives the figures a result is scored on (its stored result, with
    the cost and energy figures added for those objectives). Runs of the ``validation`` profiles
    alone are left out."""
    attempts: dict[str, int] = {}
    latest: dict[str, Run] = {}
    launches: dict[str, list[Score]] = {}
    for run in runs:
        fingerprint = run.config_fingerprint
        if fingerprint is None or validation_only(run, validation):
            continue
        latest[fingerprint] = run
        stored = results.get(run.id, ())
        launch = launch_score(stored, tuning, objective, slos, _figures_of(run, scored))
        judged = unjudged(stored, tuning) is None
        if (
            launch is not None
            and launch.value is not None
            and judged
            and complete_launch(run, stored, tuning, repeats)
        ):
            launches.setdefault(fingerprint, []).append(launch)
            attempts[fingerprint] = 0
        else:
            attempts[fingerprint] = attempts.get(fingerprint, 0) + (1 if run.id > measure_from_run else 0)
    found: dict[str, RunOutcome] = {}
    for fingerprint, run in latest.items():
        stored = tuple(results.get(run.id, ()))
        run_score = launch_score(stored, tuning, objective, slos, _figures_of(run, scored))
        tries = attempts[fingerprint]
        measurement = _measurement(
            run,
            stored,
            tuning,
            run_score,
            tries,
            retry=retry or RetryPolicy.configured(),
            now=now or utcnow(),
            repeats=repeats,
        )
        measured = launches.get(fingerprint, [])
        if measurement is None and measured:  # a later launch is due again: what was measured stands
            measurement = Measurement("measured", run.id, finished=True)
        if measurement is not None and measured:
            _, violations = combined_slos(measured, slos)
            measurement = with_launches(measurement, tuple(found.value for found in measured), violations)
        found[fingerprint] = RunOutcome(run, stored, run_score, measurement, tries)
    return found


def _figures_of(run: Run, scored: Callable[[Run, ProfileResult], Mapping[str, Any]] | None) -> Figures | None:
    """``scored`` for the results of ``run``."""
    return None if scored is None else lambda result: scored(run, result)


def with_launches(
    measurement: Measurement, values: tuple[float, ...], violations: tuple[str, ...] = ()
) -> Measurement:
    """``measurement`` carrying every measured launch's value and the SLOs the configuration breaks
    over them; a configuration measured before keeps its value while a later launch is pending or
    failed by the infrastructure."""
    if measurement.state == "failed":
        return measurement
    return replace(measurement, values=values, value=sum(values) / len(values), violations=violations)


def measurements(found: Mapping[str, RunOutcome]) -> dict[str, Measurement]:
    """The planner's input: measurements of configurations that do not need a new run."""
    return {
        fingerprint: item.measurement for fingerprint, item in found.items() if item.measurement is not None
    }


def unfinished(runs: Sequence[Run]) -> list[Run]:
    """Runs not yet done, failed or cancelled."""
    return [run for run in runs if run.status not in FINISHED_RUN_STATUSES]
