"""The staged strategy: a stage's listed candidates, each on top of the best configuration so far.

:class:`Candidates` is the :class:`~perflab.study.strategy.StageStrategy` of a stage with
``candidates:``. It builds the stage's candidates on top of the best configuration before it; once
every candidate has an outcome, the stage keeps its winner and the next stage starts from it
(:func:`perflab.study.study_plan.plan_study` walks the stages). Pure. The rules, from the seed
studies:

- a candidate whose configuration the engine cannot run, or that fails to start, is **failed**: its
  error is recorded and it is skipped;
- one the infrastructure kept from being measured, even after the retries (host unreachable, port
  taken, …; see :mod:`perflab.study.measure`), is **unmeasured**: neither failed nor beaten. Its stage
  picks no winner over it, so the study stops there, ``incomplete``, with the best so far as a
  provisional answer, until the missing candidates are measured;
- one whose success rate is below the threshold is **disqualified** ("Success rate: 51.6%, optimization
  skipped");
- one that breaks an SLO of the study (``slos``) is **infeasible**, whatever its value; one that meets
  them beats a best so far that breaks one (:func:`perflab.study.decide.feasibility`);
- one that does not beat the best so far by at least ``min_gain`` is **not better** ("lower than
  previous, skipped"); so is a better one beaten by another candidate of its stage;
- the best of the rest is the stage's **winner**;
- a study that measures its noise (``repeats`` or ``relaunches`` above 1) decides with a
  :class:`~perflab.study.verdict.Verdict` instead (:func:`perflab.study.decide.decide`): a candidate
  is kept only when its gain's interval lies above ``min_gain`` at the study's confidence, is **not
  better** when it lies below, and a close call (the interval straddles the threshold) is measured
  again, reference then candidate (A B A B), until ``max_launches``; one still inseparable is **within
  noise**, neither kept nor beaten. Each verdict (gain, interval, confidence, n) stays with its
  candidate;
- a candidate whose configuration equals the best so far (or a candidate before it in the same stage)
  is **reused**: it takes that run's measurement and is never launched again. A configuration measured
  in an earlier stage is likewise taken from its run.

Measurements are keyed by configuration fingerprint, so every distinct configuration is launched once.
The stage's step says which configurations still need a run (``wanted``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from perflab.engines.config import EngineConfig
from perflab.study.configs import CandidateConfigError, build_config, config_fields
from perflab.study.decide import decide, feasibility
from perflab.study.strategy import StageInput
from perflab.study.types import (
    UNMEASURED,
    CandidatePlan,
    Measurement,
    Rules,
    StagePlan,
    StageStep,
    gain_text,
    retry_note,
    unmeasured_note,
)


def _outcome(candidate: CandidatePlan, best: CandidatePlan, rules: Rules) -> CandidatePlan:
    """The decision for a candidate with a finished measurement (None when it is a contender)."""
    measurement = candidate.measurement
    if measurement.state == "unmeasured":
        return replace(candidate, decision=UNMEASURED, note=unmeasured_note(measurement))
    if measurement.state == "failed":
        return replace(candidate, decision="failed", note=measurement.error or "failed")
    if measurement.value is None and not measurement.violations:
        return replace(candidate, decision="failed", note="the result has no value for the objective")
    rate = measurement.success_rate
    if rate is not None and rate < rules.min_success:
        return replace(
            candidate, decision="disqualified", note=f"Success rate: {rate * 100:.1f}%, optimization skipped"
        )
    if rules.measures_noise and measurement.launches < rules.relaunches:
        launch = measurement.launches + 1
        return replace(candidate, again=True, note=f"launch {launch} of {rules.relaunches}")
    slo = feasibility(measurement, best.measurement, best.label)
    if slo is not None:
        return (
            candidate if slo.outcome == "better" else replace(candidate, decision="infeasible", note=slo.note)
        )
    decision = decide(measurement.samples, best.measurement.samples, rules)
    candidate = replace(candidate, verdict=decision.verdict)
    if decision.outcome == "undecided":
        return replace(candidate, again=True, note=decision.note)
    if decision.outcome != "better":
        return replace(candidate, decision=decision.outcome, note=decision.note)
    return candidate


def decide_stage(
    candidates: Sequence[CandidatePlan], best: CandidatePlan, rules: Rules
) -> tuple[list[CandidatePlan], CandidatePlan | None, bool]:
    """A stage's decisions against ``best``: the candidates, the winner (or None), and whether the
    stage is decided. While a candidate waits for its measurement, or could not be measured at all,
    the others are judged already (a failure or a value that does not beat ``best`` is final) but no
    winner is chosen. Candidates decided before (failed, reused) keep their decision."""
    judged = [
        candidate
        if candidate.decision is not None or (candidate.waiting and not candidate.again)
        else _outcome(replace(candidate, again=False), best, rules)
        for candidate in candidates
    ]
    if any(candidate.waiting or candidate.decision == UNMEASURED for candidate in judged):
        return judged, None, False
    pick = min if rules.lower_is_better else max
    winner = pick((c for c in judged if c.decision is None), key=lambda c: c.value, default=None)
    decided = []
    for candidate in judged:
        if candidate.decision is None:
            verdict = candidate.verdict
            gain = verdict.text() if verdict is not None else gain_text(candidate.value, best.value)
            slo = feasibility(candidate.measurement, best.measurement, best.label)
            if slo is not None:
                gain = f"{slo.gain} ({gain})"
            if candidate is winner:
                candidate = replace(candidate, decision="winner", note=f"{gain} over {best.label}")
            else:
                note = f"{gain}, but {winner.label} is better, skipped"
                candidate = replace(candidate, decision="not_better", note=note)
        decided.append(candidate)
    return decided, next((c for c in decided if c.decision == "winner"), None), True


def _build(stage: StageInput) -> list[CandidatePlan]:
    built = []
    for position, spec in enumerate(stage.spec.candidates):
        try:
            config = build_config(
                config_fields(stage.best.config),
                spec.changes,
                gpus_per_node=stage.gpus_per_node,
                gpus=stage.gpus,
            )
            error = None
        except CandidateConfigError as exc:
            config, error = None, str(exc)
        built.append(
            CandidatePlan(
                stage_index=stage.index,
                stage_name=stage.spec.name,
                position=position,
                label=spec.label,
                changes=dict(spec.changes),
                config=config,
                error=error,
            )
        )
    return built


def _ended(candidate: CandidatePlan) -> bool:
    """Whether the candidate's last launch has ended, so another may start."""
    return candidate.measurement is not None and candidate.measurement.finished


def _measure_again(judged: Sequence[CandidatePlan], best: CandidatePlan) -> list[EngineConfig]:
    """The launches the stage's close calls need: the reference first, then each candidate (A B)."""
    again = [candidate for candidate in judged if candidate.again and _ended(candidate)]
    if not again:
        return []
    close_calls = [candidate for candidate in again if candidate.verdict is not None]
    reference = [best.config] if close_calls and _ended(best) else []
    return reference + [candidate.config for candidate in again]


def _resolved(
    candidate: CandidatePlan,
    first_of: dict[str, CandidatePlan],
    best: CandidatePlan,
    measurements: Mapping[str, Measurement],
) -> CandidatePlan:
    """A built candidate failed (cannot be built), reused (a configuration already in the stage) or
    with its measurement."""
    if candidate.error is not None:
        return replace(candidate, decision="failed", note=candidate.error)
    fingerprint = candidate.fingerprint
    if fingerprint in first_of:
        same = first_of[fingerprint]
        where = "the best so far" if same is best else "an earlier candidate"
        return replace(
            candidate,
            measurement=same.measurement,
            decision="reused",
            note=f"same configuration as {where} ({same.label}); its run is reused",
        )
    first_of[fingerprint] = candidate
    measurement = measurements.get(fingerprint)
    note = retry_note(measurement) if measurement is not None else None
    return replace(candidate, measurement=measurement, note=note)


@dataclass(frozen=True)
class Candidates:
    """The staged strategy: the stage's candidates on top of the best so far, decided together."""

    def step(self, stage: StageInput) -> StageStep:
        """The stage's candidates with their outcomes, and the configurations it still needs run."""
        best = stage.best
        first_of: dict[str, CandidatePlan] = {best.fingerprint: best}
        resolved = [_resolved(candidate, first_of, best, stage.measurements) for candidate in _build(stage)]
        wanted = [
            candidate.config
            for candidate in resolved
            if candidate.decision is None and candidate.measurement is None
        ]
        judged, winner, decided = decide_stage(resolved, best, stage.rules)
        wanted += _measure_again(judged, best)
        plan = StagePlan(stage.index, stage.spec.name, tuple(judged), best, winner, decided)
        return StageStep(plan, wanted=tuple(wanted))
