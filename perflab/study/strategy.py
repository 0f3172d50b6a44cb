"""The seam between a study and the ways it explores a stage.

A **stage strategy** is asked, on every advance, where its stage stands: given the best configuration
before the stage, the measurements so far, the rules and what the study's runs have shown
(:class:`StageInput`), it answers with a :class:`~perflab.study.types.StageStep` — its candidates
with their decisions, whether the stage is decided and its winner, and what to run next. The staged
plan (:class:`perflab.study.plan.Candidates`: a stage's listed candidates on top of the best so far)
and the search (:class:`perflab.study.search_stage.Search`: proposals one at a time within a budget)
are two strategies; :func:`perflab.study.study_plan.plan_study` walks the stages and asks each one's
strategy, and neither strategy knows the other. Both decide a candidate with
:func:`perflab.study.decide.decide`.

A strategy keeps nothing in memory: what it must remember between advances it returns as
``StageStep.stored`` (the coordinator keeps it in ``study.state``) and reads back from
:attr:`Evidence.stored`. With ``propose`` false (pages, reports, ``study show``) it must not propose
anything new: it reports where the stage stands.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from db.models import ProfileResult, Run
from perflab.profiles import BenchmarkProfile
from perflab.study.measure import RunOutcome
from perflab.study.predictions import Predictor
from perflab.study.spec import StageSpec
from perflab.study.types import CandidatePlan, Measurement, Rules, StageStep


@dataclass(frozen=True)
class Evidence:
    """What a study's runs have shown beyond the measurements: every run and stored result, each
    configuration's latest outcome, the tuning profile (run ``repeats`` times on each launch), the
    validation profiles' names, the objective and SLOs, what each stage stored (by stage index, as
    text), and a predictor of configurations' figures when one covers the study (None: none; a search
    seeds and pre-screens with it, :mod:`perflab.study.predictions`)."""

    runs: tuple[Run, ...] = ()
    results: Mapping[int, Sequence[ProfileResult]] = field(default_factory=dict)
    found: Mapping[str, RunOutcome] = field(default_factory=dict)
    tuning: BenchmarkProfile | None = None
    repeats: int = 1
    validation: frozenset[str] = frozenset()
    objective: str = "total_token_throughput"
    slos: Mapping[str, float] = field(default_factory=dict)
    stored: Mapping[str, Any] = field(default_factory=dict)
    predict: Predictor | None = None


@dataclass(frozen=True)
class StageInput:
    """What a strategy is asked with: the stage (its index and spec), the best configuration before
    it, the measurements by configuration fingerprint, the rules, the accelerator budget, the
    fingerprints measured before the stage (the baseline's and earlier stages'), the evidence, and
    whether it may propose new configurations."""

    index: int
    spec: StageSpec
    best: CandidatePlan
    measurements: Mapping[str, Measurement]
    rules: Rules
    gpus_per_node: int | None = None
    gpus: int | None = None
    earlier: frozenset[str] = frozenset()
    evidence: Evidence = field(default_factory=Evidence)
    propose: bool = True


class StageStrategy(Protocol):
    """A way to explore one stage."""

    def step(self, stage: StageInput) -> StageStep:
        """Where the stage stands, and what to run next (see the module)."""
        ...


StrategyFor = Callable[[StageSpec], StageStrategy]
