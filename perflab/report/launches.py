"""A configuration's figures over every launch that measured it, the way the study decided on it.

A study may repeat its tuning profile on one launch (``repeats``) and launch a configuration several
times (``relaunches``); the planner decides on the mean over the measured launches, each launch the mean
of its repetitions (:func:`perflab.study.measure.launch_score`). The report shows the same mean and how
many runs on how many launches it is the mean of. A launch that ran the tuning profile only (a
relaunch, a search finalist measured again) leaves the validation profiles to an earlier launch of the
same configuration: :func:`latest_with` finds it. :func:`launch_rows` lists every run of a study with
why it was launched and its own mean.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from statistics import fmean

from db.models import ProfileResult, Run
from perflab.profiles import BenchmarkProfile
from perflab.report.model import Figures, LaunchRow, node_figures
from perflab.report.sections import headline
from perflab.runner.evidence import unjudged_reason
from perflab.study.measure import Figures as ScoredFigures
from perflab.study.measure import (
    complete_launch,
    is_tuning,
    launch_score,
    tuning_results,
    unjudged,
    validation_only,
)


@dataclass(frozen=True)
class Launch:
    """One run of a configuration and its stored results."""

    run: Run
    results: tuple[ProfileResult, ...]


def config_launches(
    runs: Sequence[Run], results: Mapping[int, Sequence[ProfileResult]], fingerprint: str | None
) -> list[Launch]:
    """The runs of the configuration ``fingerprint``, oldest first, with their results."""
    if fingerprint is None:
        return []
    return [
        Launch(run, tuple(results.get(run.id, ()))) for run in runs if run.config_fingerprint == fingerprint
    ]


def latest_with(launches: Sequence[Launch], profile: str) -> Launch | None:
    """The latest launch that stored a result of ``profile``."""
    return next(
        (launch for launch in reversed(launches) if any(r.profile_name == profile for r in launch.results)),
        None,
    )


def _complete_of(result: ProfileResult, profile: BenchmarkProfile, tuning: BenchmarkProfile) -> bool:
    """Whether ``result`` is a complete (not partial) result of ``profile`` (of the tuning profile: any
    of its repetitions)."""
    name = result.profile_name
    ours = is_tuning(name, tuning) if profile.name == tuning.name else name == profile.name
    return ours and not (result.result or {}).get("partial")


def repetitions(
    launch: Launch, profile: BenchmarkProfile, tuning: BenchmarkProfile, repeats: int
) -> list[list[ProfileResult]]:
    """The launch's complete results of ``profile`` long enough to judge, one list per repetition; the
    tuning profile's count only on a launch that measured all its ``repeats`` (as the study decides)."""
    if profile.name == tuning.name and not complete_launch(launch.run, launch.results, tuning, repeats):
        return []
    grouped: dict[str, list[ProfileResult]] = {}
    for result in launch.results:
        if _complete_of(result, profile, tuning) and unjudged_reason(result.result) is None:
            grouped.setdefault(result.profile_name, []).append(result)
    return list(grouped.values())


def _short(launches: Sequence[Launch], profile: BenchmarkProfile, tuning: BenchmarkProfile) -> str | None:
    """Why ``profile``'s complete results on these launches were too short to judge (the first's)."""
    reasons = (
        unjudged_reason(result.result)
        for launch in launches
        for result in launch.results
        if _complete_of(result, profile, tuning)
    )
    return next((reason for reason in reasons if reason is not None), None)


def _mean(figures: Sequence[Figures]) -> Figures:
    """The mean of figures of one configuration (a figure missing from some is the mean of the rest)."""
    tps = [found.total_tps for found in figures if found.total_tps is not None]
    tpot = [found.mean_tpot_ms for found in figures if found.mean_tpot_ms is not None]
    return Figures(fmean(tps) if tps else None, figures[0].replicas, fmean(tpot) if tpot else None)


def mean_figures(
    launches: Sequence[Launch],
    profile: BenchmarkProfile,
    tuning: BenchmarkProfile,
    *,
    repeats: int = 1,
    replicas: int = 1,
) -> Figures | None:
    """The headline figures of ``profile`` over ``launches``: each launch the mean of its repetitions,
    then the mean over the launches that measured it; without any, figures that say every result was
    too short to judge, or None when none was measured."""
    per_launch: list[Figures] = []
    counts: list[int] = []
    for launch in launches:
        chosen = [headline(group) for group in repetitions(launch, profile, tuning, repeats)]
        measured = [node_figures(result.result, replicas=replicas) for result in chosen if result is not None]
        if measured:
            per_launch.append(_mean(measured))
            counts.append(len(measured))
    if per_launch:
        return replace(_mean(per_launch), runs=tuple(counts))
    short = _short(launches, profile, tuning)
    return Figures(None, replicas, short=short) if short is not None else None


def launch_kind(run: Run, measured_before: bool, validation: set[str], in_block: bool = False) -> str:
    """Why a run was launched: ``validation`` when it carries validation profiles only, ``confirmation``
    when it is one of the study's confirmation block (``in_block``), ``again`` when its configuration
    had a complete launch before it, else ``first``."""
    if validation_only(run, validation):
        return "validation"
    if in_block:
        return "confirmation"
    return "again" if measured_before else "first"


@dataclass(frozen=True)
class LaunchPolicy:
    """What makes a study launch a configuration more than once: each configuration's launches before it
    is first judged (``relaunches``); the most launches one not decided yet may take (a close call, or
    too few launches for the study's spread to judge it); the references a stage compares its candidates
    with (the baseline, the stages' winners), launched again after each round of those candidates so
    that they sit beside the launches they are compared with; the configurations a search stage
    measured (its finalists are measured again); and the study's confirmation block
    (:mod:`perflab.study.confirm`): ``block`` holds each configuration's complete launches before it,
    so that its later launches are the block's."""

    relaunches: int = 1
    max_launches: int = 1
    references: frozenset[str] = frozenset()
    searched: frozenset[str] = frozenset()
    block: Mapping[str, int] = field(default_factory=dict)

    def in_block(self, fingerprint: str | None, earlier: int) -> bool:
        """Whether a launch of ``fingerprint`` after ``earlier`` complete ones belongs to the block."""
        before = self.block.get(fingerprint or "")
        return before is not None and earlier >= before

    def reason(self, kind: str, fingerprint: str | None, number: int) -> str:
        """The reason for the ``number``-th complete launch of ``fingerprint`` in words."""
        if kind == "validation":
            return "the validation profiles alone: its earlier launches ran the tuning profile only"
        if kind == "confirmation":
            return (
                "the study's confirmation: the kept changes launched again once every stage was decided, "
                "on launches that took no part in any decision"
            )
        if kind == "first":
            return "its first measurement"
        if fingerprint in self.references:
            return (
                f"launch {number} of a reference (the baseline or a stage's winner): launched again beside "
                "the launches it is compared with, so a change of the host's speed does not read as a gain"
            )
        if number <= self.relaunches:
            return f"launch {number} of the {self.relaunches} each configuration gets before it is judged"
        if fingerprint in self.searched:
            return "a finalist of the search, measured again for its final pick"
        return (
            f"launch {number}: not decided yet (a close call, or too few launches for the study's spread to "
            f"judge it), so measured again, up to {self.max_launches} launches"
        )


def launch_rows(
    runs: Sequence[Run],
    results: Mapping[int, Sequence[ProfileResult]],
    *,
    tuning: BenchmarkProfile,
    repeats: int,
    objective: str,
    slos: Mapping[str, float],
    validation: set[str],
    labels: Mapping[str, tuple[str, str | None]],
    scored: Callable[[Run], ScoredFigures | None] | None = None,
    policy: LaunchPolicy | None = None,
) -> list[LaunchRow]:
    """Every run, oldest first: its configuration (``labels``: fingerprint → label and stage), why it
    was launched (by ``policy``), and its complete runs of the tuning profile with their mean objective
    value (``scored`` gives the figures a run's results are scored on, for cost and energy objectives)."""
    rows = []
    policy = policy or LaunchPolicy()
    measured: Counter[str] = Counter()
    for run in runs:
        stored = results.get(run.id, ())
        fingerprint = run.config_fingerprint
        label, stage = labels.get(fingerprint or "", (run.label or f"run {run.id}", None))
        launch = launch_score(stored, tuning, objective, slos, scored(run) if scored else None)
        complete = (
            launch is not None and launch.value is not None and complete_launch(run, stored, tuning, repeats)
        )
        earlier = measured[fingerprint or ""]
        kind = launch_kind(run, fingerprint in measured, validation, policy.in_block(fingerprint, earlier))
        rows.append(
            LaunchRow(
                run_id=run.id,
                configuration=label,
                fingerprint=fingerprint,
                stage=stage,
                kind=kind,
                reason=policy.reason(kind, fingerprint, earlier + 1),
                status=run.status,
                runs=len({r.profile_name for r in tuning_results(stored, tuning)}) if complete else 0,
                value=launch.value if complete else None,
                marks=tuple(reason for reason in (unjudged(stored, tuning),) if reason is not None),
            )
        )
        if complete and fingerprint is not None:
            measured[fingerprint] += 1
    return rows
