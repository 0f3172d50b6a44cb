"""A study's planner driven offline, the way the coordinator drives it: for what-if runs, tests and
``benchmarks/study_noise.py``.

Each :meth:`Replay.advance` does what :func:`perflab.study.coordinator.advance` does with the database
in between: the study's spread from every configuration's launch values so far
(:func:`perflab.study.noise.study_spread`, with the spread the study was offered), its rules
(:func:`perflab.study.progress.study_rules`), the plan (:func:`perflab.study.study_plan.plan_study`)
from the measurements and from what earlier advances stored, then it stores what the plan stores and
launches what the plan wants, in the plan's order, one launch at a time with ``measure`` (the value of
one launch of a configuration: a simulator, a model of the host's noise). Nothing else: no runs, no
validation profiles, no infrastructure failures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from perflab.engines.config import EngineConfig
from perflab.study.noise import ReusedSpread, StudySpread, study_spread
from perflab.study.progress import study_rules
from perflab.study.spec import StudySpec
from perflab.study.strategy import Evidence
from perflab.study.study_plan import plan_study, stored_records
from perflab.study.types import Measurement, Rules, StudyPlan

Measure = Callable[[EngineConfig], float]


@dataclass
class Replay:
    """One study decided offline: its spec, how a launch is measured, the spread it was offered and its
    seed; ``values`` every configuration's launch values so far (by fingerprint, in launch order),
    ``stored`` what the plan and its stages stored, ``launched`` the configurations launched in order."""

    spec: StudySpec
    measure: Measure
    reused: ReusedSpread | None = None
    seed: int = 0
    gpus: int | None = 1
    values: dict[str, list[float]] = field(default_factory=dict)
    stored: dict[str, Any] = field(default_factory=dict)
    launched: list[EngineConfig] = field(default_factory=list)
    spread: StudySpread | None = None
    rules: Rules | None = None

    def measurements(self) -> dict[str, Measurement]:
        """The planner's input: every configuration measured, with all its launches."""
        return {
            fingerprint: Measurement("measured", 1, fmean(found), 1.0, finished=True, values=tuple(found))
            for fingerprint, found in self.values.items()
        }

    def plan(self) -> StudyPlan:
        """The plan as the study stands (stores nothing, launches nothing)."""
        self.spread = study_spread(list(self.values.values()), self.reused)
        self.rules = study_rules(self.spec, self.spread)
        return plan_study(
            baseline=self.spec.baseline_config(1, self.gpus),
            stages=self.spec.stages,
            measurements=self.measurements(),
            rules=self.rules,
            gpus=self.gpus,
            evidence=Evidence(stored=self.stored),
            seed=self.seed,
        )

    def advance(self) -> StudyPlan:
        """One advance: plan, store what it stores, launch what it wants."""
        plan = self.plan()
        self.stored = stored_records(plan)
        for config in plan.wanted:
            self.launched.append(config)
            self.values.setdefault(config.fingerprint(), []).append(self.measure(config))
        return plan

    def run(self, max_advances: int = 500, *, each: Callable[[StudyPlan], None] | None = None) -> StudyPlan:
        """Advance until the plan wants nothing more; ``each`` sees every plan on the way."""
        for _ in range(max_advances):
            plan = self.advance()
            if each is not None:
                each(plan)
            if not plan.wanted:
                return self.plan()
        raise RuntimeError(f"the study did not end within {max_advances} advances")
