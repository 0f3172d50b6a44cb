"""The study's vocabulary, shared by every strategy, the measurements and the decisions.

A :class:`Measurement` is what the runs of one configuration have shown; :class:`Rules` how a stage
decides; a :class:`CandidatePlan` is one configuration of a stage with its measurement and decision; a
:class:`StagePlan` is a reached stage; a :class:`StageStep` is what a stage strategy
(:mod:`perflab.study.strategy`) answers when asked where its stage stands; a :class:`StudyPlan` is the
whole study. Plain data: this module imports nothing of the study's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, Literal

from perflab.engines.config import EngineConfig
from perflab.study.noise import StudySpread
from perflab.study.verdict import Verdict

MeasurementState = Literal["pending", "measured", "failed", "unmeasured", "too_short"]
PlanStatus = Literal["running", "validating", "done", "failed", "incomplete"]
BASELINE_STAGE = "Baseline"
UNMEASURED = "unmeasured"
TOO_SHORT = "too_short"


@dataclass(frozen=True)
class Measurement:
    """What the run of one configuration has shown: ``pending`` until its tuning result is stored (or,
    with ``retry_at``, until the infrastructure failure in ``error`` is retried), ``unmeasured`` when
    the infrastructure kept it from being measured.

    ``finished`` says the run has ended, so no more of its profiles will be measured. ``values`` holds
    every measured launch's value (``value`` is their mean); ``violations`` the study's SLOs it breaks
    (its SLO fields' means over its launches), which make it infeasible.
    """

    state: MeasurementState
    run_id: int | None = None
    value: float | None = None
    success_rate: float | None = None
    error: str | None = None
    finished: bool = False
    retry_at: datetime | None = None
    values: tuple[float, ...] = ()
    violations: tuple[str, ...] = ()

    @property
    def launches(self) -> int:
        """Launches measured (one when a measured value carries no per-launch values)."""
        return len(self.values) or (1 if self.state == "measured" else 0)

    @property
    def samples(self) -> tuple[float, ...]:
        """The launch values a decision is made on (the value alone when no launch was recorded)."""
        return self.values or ((self.value,) if self.value is not None else ())

    def since(self, launch: int) -> tuple[float, ...]:
        """The values of its launches from the ``launch``-th on (0-based, in launch order)."""
        return self.samples[launch:]


@dataclass(frozen=True)
class Rules:
    """How a stage is decided: the lowest acceptable success rate and the smallest gain kept (fractions);
    the confidence of every verdict; the launches of a candidate before its first look
    (``relaunches``) and the most a close call may take; the study's spread
    (:class:`~perflab.study.noise.StudySpread`, None: nothing measured twice yet); ``lower_is_better``
    for an objective such as cost, whose gain is a fall by ``min_gain``. ``measures_noise`` is false
    only for write-ups imported from elsewhere, decided on their one measurement as their authors did."""

    min_success: float = 1.0
    min_gain: float = 0.01
    confidence: float = 0.95
    relaunches: int = 1
    max_launches: int = 4
    measures_noise: bool = True
    spread: StudySpread | None = None
    lower_is_better: bool = False

    def better(self, value: float, reference: float) -> bool:
        """Whether ``value`` is on the better side of ``reference`` (not necessarily by ``min_gain``)."""
        return value < reference if self.lower_is_better else value > reference


@dataclass(frozen=True)
class CandidatePlan:
    """One candidate (or the baseline) with its configuration, measurement and decision."""

    stage_index: int
    stage_name: str
    position: int
    label: str
    changes: Mapping[str, Any]
    config: EngineConfig | None
    error: str | None = None
    measurement: Measurement | None = None
    decision: str | None = None
    note: str | None = None
    role: str = "candidate"
    verdict: Verdict | None = None
    again: bool = False  # a close call or too few launches: measure it (and its reference) again
    since: int = 0  # its launches before this one (0-based) took no part in the stage's comparison

    @cached_property
    def fingerprint(self) -> str | None:
        """The configuration's fingerprint (computed once per plan of it)."""
        return self.config.fingerprint() if self.config is not None else None

    @property
    def retrying(self) -> bool:
        """Whether the infrastructure failed its last run and a new attempt waits for its backoff."""
        return self.measurement is not None and self.measurement.retry_at is not None

    @property
    def waiting(self) -> bool:
        """Whether it waits for a measurement (its first, or another launch of a close call)."""
        pending = self.measurement is None or self.measurement.state == "pending"
        return self.decision is None and (pending or self.again)

    @property
    def compared(self) -> tuple[float, ...]:
        """The launch values its stage compares (from its ``since``-th launch on)."""
        return self.measurement.since(self.since) if self.measurement is not None else ()

    @property
    def value(self) -> float | None:
        """The measured value (the mean of its launches), also while a further launch is pending."""
        measurement = self.measurement
        if measurement is None:
            return None
        relaunching = measurement.state == "pending" and bool(measurement.values)
        measured = measurement.state == "measured" or relaunching
        return measurement.value if measured else None


@dataclass(frozen=True)
class StagePlan:
    """A reached stage: its candidates, the best configuration before it and, once decided, its winner."""

    index: int
    name: str
    candidates: tuple[CandidatePlan, ...]
    reference: CandidatePlan
    winner: CandidatePlan | None = None
    decided: bool = False

    @property
    def unmeasured(self) -> tuple[CandidatePlan, ...]:
        """Candidates the infrastructure kept from being measured."""
        return tuple(candidate for candidate in self.candidates if candidate.decision == UNMEASURED)

    @property
    def improvement(self) -> float | None:
        """The winner's gain over the best before the stage (a fraction), or None without a winner."""
        if self.winner is None or not self.reference.value:
            return None
        return self.winner.value / self.reference.value - 1.0


@dataclass(frozen=True)
class StageStep:
    """Where one stage stands, as its strategy answers: the stage with its decisions, and what the
    coordinator must do for it.

    - ``wanted``: configurations to launch now;
    - ``screen``: configuration fingerprint → the fraction of the tuning prompts its new run measures
      first (a search's screening);
    - ``tuning_only``: fingerprints whose new run measures the tuning profile only (a re-measurement);
    - ``drop``: fingerprints whose unfinished runs end after their first profile (screened out);
    - ``stored``: what the stage keeps in ``study.state`` for its next step (JSON; None: nothing);
    - ``detail``: the strategy's own account of the stage for the study's result (a search's trials);
    - ``failure``: why the stage cannot go on (the study fails with it).
    """

    stage: StagePlan
    wanted: tuple[EngineConfig, ...] = ()
    screen: Mapping[str, float] = field(default_factory=dict)
    tuning_only: frozenset[str] = frozenset()
    drop: frozenset[str] = frozenset()
    stored: Any = None
    detail: Any = None
    failure: str | None = None


@dataclass(frozen=True)
class Confirmation:
    """The kept changes measured again on fresh launches after every stage was decided
    (:mod:`perflab.study.confirm`): ``order`` the block's launches (fingerprints, in launch order: the
    mirrored block ``A B C B A``), ``before`` each configuration's launches before the block (its block
    launches are the next), ``verdicts`` each kept stage's verdict with its confirmed gain (by stage
    index), the recommendation's ``closing`` verdict against the baseline at one-sided level ``alpha``,
    whether it ``confirmed`` the path (None until measured) and what that means in words."""

    order: tuple[str, ...]
    before: Mapping[str, int]
    verdicts: Mapping[int, Verdict] = field(default_factory=dict)
    closing: Verdict | None = None
    alpha: float = 1.0
    confirmed: bool | None = None
    note: str = ""

    @property
    def measured(self) -> bool:
        return self.confirmed is not None


@dataclass(frozen=True)
class StudyPlan:
    """Where a study stands: reached stages (each with its strategy's step), the best so far, what to
    run next; ``validate`` holds the fingerprints among ``wanted`` (the baseline, the winner) whose
    launch runs the validation profiles alone, their earlier launches having dropped them;
    ``confirmation`` the fresh launches of the kept path once the stages are decided; ``stored`` what
    the plan keeps in ``study.state`` for the next advance (decided stages, the confirmation block)."""

    baseline: CandidatePlan
    stages: tuple[StagePlan, ...]
    best: CandidatePlan
    status: PlanStatus
    wanted: tuple[EngineConfig, ...] = ()
    may_win: frozenset[str] = field(default_factory=frozenset)
    failure: str | None = None
    steps: tuple[StageStep, ...] = ()
    validate: frozenset[str] = frozenset()
    confirmation: Confirmation | None = None
    stored: Mapping[str, Any] = field(default_factory=dict)

    @property
    def screen(self) -> dict[str, float]:
        """Every reached stage's screening fractions, by fingerprint."""
        return {fingerprint: part for step in self.steps for fingerprint, part in step.screen.items()}

    @property
    def tuning_only(self) -> frozenset[str]:
        return frozenset().union(*(step.tuning_only for step in self.steps))

    @property
    def drop(self) -> frozenset[str]:
        return frozenset().union(*(step.drop for step in self.steps))

    @property
    def recommends(self) -> bool:
        """Whether the best configuration may be recommended: it meets every SLO of the study."""
        measurement = self.best.measurement
        return measurement is not None and not measurement.violations

    def candidates(self) -> list[CandidatePlan]:
        """The baseline, then every reached stage's candidates in order."""
        return [self.baseline, *(candidate for stage in self.stages for candidate in stage.candidates)]

    def unmeasured(self) -> list[CandidatePlan]:
        """Every candidate (the baseline included) the infrastructure kept from being measured."""
        return [candidate for candidate in self.candidates() if candidate.decision == UNMEASURED]


def gain_text(value: float, reference: float) -> str:
    """``+22.2%`` / ``-1.4%``: ``value`` against ``reference``."""
    return f"{(value / reference - 1.0) * 100:+.1f}%"


def unmeasured_note(measurement: Measurement) -> str:
    """Why a candidate has no measurement: the infrastructure failure of its last attempt."""
    return f"not measured (infrastructure): {measurement.error}"


def retry_note(measurement: Measurement) -> str | None:
    """When and why a configuration is measured again, for one waiting out its backoff."""
    if measurement.retry_at is None:
        return None
    return f"measured again from {measurement.retry_at:%H:%M:%S} UTC after {measurement.error}"
