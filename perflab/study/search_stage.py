"""The search strategy: a stage's trials as candidates, what to run, and its winner.

:class:`Search` is the :class:`~perflab.study.strategy.StageStrategy` of a stage with ``search:``. The
trials it stored (``study.state["search_trials"]``, by stage index) are the proposals made so far,
stored with the reason the search stopped once it did (a stop stands: the final pick's launches may
change a trial's outcome, and with ``patience`` a finalist that comes to meet its SLOs would otherwise
count as a recent gain and reopen the search);
their outcomes come from the study's runs every time (:func:`observations`), so the sampler's history
is rebuilt from the stored measurements on each advance and nothing is kept in memory. A
configuration's run carries the screening profile (a fraction of the tuning prompts) first; the step
says which screened runs are not promising (the coordinator drops their remaining profiles), which
configurations need a run, and which finalists (and the best configuration before the stage, their
reference) need another launch (tuning only) for the final pick (:mod:`perflab.study.finalists`),
which also decides whether the pick is kept over that reference: a round of them at a time, queued in
the round's order, the pick looked at again once all of the round is back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from statistics import fmean
from typing import Any

from db.models import FINISHED_RUN_STATUSES, ProfileResult, Run
from perflab.accelerators import accelerators_of
from perflab.engines.config import EngineConfig
from perflab.profiles import BenchmarkProfile, scaled
from perflab.runner.evidence import unjudged_reason
from perflab.study.budget import fill_budget
from perflab.study.configs import build_config, config_fields
from perflab.study.decide import Decision
from perflab.study.finalists import FinalPick, final_pick
from perflab.study.measure import RunOutcome, complete_launch, launch_score
from perflab.study.objective import Score, combined_slos, score
from perflab.study.search import Observation, Trial, promising, step, with_outcomes
from perflab.study.search_space import SearchSpec
from perflab.study.strategy import StageInput
from perflab.study.types import CandidatePlan, Measurement, StagePlan, StageStep, gain_text

SEARCH_TRIALS = "search_trials"


def screening_profile(tuning: BenchmarkProfile, fraction: float) -> BenchmarkProfile:
    """The tuning profile cut to ``fraction`` of its prompts, under its own name, drawing other prompts
    than the tuning profile (a seed of its own): the tuning run that follows it on the same engine must
    not find them in the prefix cache."""
    screened = scaled(tuning, fraction).fresh_draw("screening")
    return screened.model_copy(update={"name": f"{tuning.name}-screening"})


def objectives_of(search: SearchSpec, study_objective: str) -> tuple[str, ...]:
    """The search's objectives: its own, or the study's."""
    return search.objectives or (study_objective,)


def slo_violation(result: Mapping[str, Any], slos: Mapping[str, float]) -> float:
    """How far the worst SLO is exceeded, as a fraction of its limit (<= 0: every SLO met; a field the
    result lacks breaks its SLO by 1)."""
    excess = [
        float(value) / limit - 1.0 if isinstance(value := result.get(name), (int, float)) else 1.0
        for name, limit in slos.items()
    ]
    return max(excess, default=0.0)


def run_gpu_hours(run: Run) -> float:
    """Accelerator-hours a run held: launch to end (or its last heartbeat) × its accelerators."""
    start, end = run.launching_at, run.finished_at or run.heartbeat_at
    if start is None or end is None:
        return 0.0
    return max(0.0, (end - start).total_seconds()) / 3600.0 * (accelerators_of(run) or 1)


@dataclass(frozen=True)
class SearchRuns:
    """What a study's runs say for a search stage: an observation per configuration fingerprint, and
    the configurations whose re-measurement is running."""

    observations: Mapping[str, Observation] = field(default_factory=dict)
    remeasuring: frozenset[str] = frozenset()


def _violation(found: Score | None, means: Mapping[str, float], slos: Mapping[str, float]) -> float:
    """How far the worst SLO is exceeded (a fraction of its limit; 1 for a swept profile with no load
    within them, which has no single value to measure it by)."""
    if found is not None and found.curve is not None:
        return 1.0 if found.violations else 0.0
    return slo_violation(means, slos)


def _means(launches: Sequence[Sequence[Score | None]], objectives: int) -> tuple[float, ...] | None:
    """Each objective's mean over the launches; None without a launch or when one lacks a value."""
    columns = [[scores[index] for scores in launches] for index in range(objectives)]
    if not launches or any(found is None or found.value is None for column in columns for found in column):
        return None
    return tuple(fmean(found.value for found in column) for column in columns)


def observations(
    runs: Sequence[Run],
    results: Mapping[int, Sequence[ProfileResult]],
    found: Mapping[str, RunOutcome],
    *,
    tuning: BenchmarkProfile,
    screening: BenchmarkProfile,
    objectives: Sequence[str],
    slos: Mapping[str, float],
    repeats: int = 1,
) -> SearchRuns:
    """Each configuration's observation from all its runs: a sample per complete launch (the mean of
    its runs of the tuning profile, :func:`perflab.study.measure.launch_score`), each objective's mean
    over them and the SLOs their means break, and its screening value from the launch that screened
    it — screened under the SLOs too: a screening that breaks one makes the configuration infeasible."""
    seen: dict[str, Observation] = {}
    remeasuring: set[str] = set()
    for fingerprint, outcome in found.items():
        launches: list[list[Score]] = []
        screened: Score | None = None
        short: str | None = None
        launched = [run for run in runs if run.config_fingerprint == fingerprint]
        for run in launched:
            stored = results.get(run.id, ())
            screens = [r for r in stored if r.profile_name == screening.name]
            pairs = [(r.sweep_point, r.result) for r in screens]
            if screened is None and pairs:
                screened = score(objectives[0], pairs, slos=slos)
                # a screening too short to judge is shown, but prunes nothing and breaks no SLO
                short = next((reason for r in screens if (reason := unjudged_reason(r.result))), None)
            scores = [launch_score(stored, tuning, name, slos) for name in objectives]
            if (
                scores[0] is not None
                and scores[0].value is not None
                and complete_launch(run, stored, tuning, repeats)
            ):
                launches.append(scores)
        first = screened.value if screened is not None else None
        firsts = [scores[0] for scores in launches]
        means, reasons = combined_slos(firsts, slos)
        values = _means(launches, len(objectives))
        measurement = outcome.measurement
        if values is not None:
            violation = _violation(firsts[-1], means, slos)
            note = f"breaks the SLOs: {'; '.join(reasons)}" if violation > 0 else None
            samples = tuple(found_score.value for found_score in firsts)
            seen[fingerprint] = Observation("complete", first, values, samples, violation, note, short)
            if outcome.run.status not in FINISHED_RUN_STATUSES:
                remeasuring.add(fingerprint)
            continue
        judged = screened is not None and short is None
        screen_violation = _violation(screened, screened.slo_values, slos) if judged else 0.0
        screen_note = (
            f"screening breaks the SLOs: {'; '.join(screened.violations)}" if screen_violation > 0 else None
        )
        if measurement is None:
            continue  # an infrastructure failure waits for its retry: nothing to tell
        if measurement.state in ("unmeasured", "too_short"):
            seen[fingerprint] = Observation("unmeasured", note=measurement.error)
        elif outcome.run.status not in FINISHED_RUN_STATUSES or measurement.state == "pending":
            status = "screened" if first is not None else "pending"
            if len(launched) > 1:  # launched again after its screening: a final pick's round
                remeasuring.add(fingerprint)
            seen[fingerprint] = Observation(
                status, first, violation=screen_violation, note=screen_note, screening_short=short
            )
        elif screen_note is not None:
            seen[fingerprint] = Observation("infeasible", first, violation=screen_violation, note=screen_note)
        elif first is not None and outcome.run.status == "done":
            seen[fingerprint] = Observation(
                "pruned", first, violation=screen_violation, note=f"screening: {first:.2f}, not promising"
            )
        else:
            seen[fingerprint] = Observation("infeasible", note=measurement.error or "failed")
    return SearchRuns(seen, frozenset(remeasuring))


@dataclass(frozen=True)
class SearchState:
    """A search stage as its step left it: the spec, the objectives, every trial with its outcome, why
    it stopped and why its pick was made (None while it goes on)."""

    search: SearchSpec
    objectives: tuple[str, ...]
    trials: tuple[Trial, ...]
    stop: str | None = None
    pick: str | None = None


def _builder(search: SearchSpec, best: CandidatePlan, gpus: int | None):
    def build(params: dict[str, Any]) -> EngineConfig:
        config = build_config(
            config_fields(best.config), {**search.changes(params), "replicas": 1}, gpus_per_node=gpus
        )
        return fill_budget(config, gpus) if gpus else config

    return build


def _label(trial: Trial) -> str:
    return f"#{trial.number} " + " · ".join(f"{name}={value}" for name, value in sorted(trial.params.items()))


# A pruned trial (its screening was not promising) is recorded as not better, its note says why.
_DECISIONS = {"infeasible": "failed", "pruned": "not_better", "unmeasured": "unmeasured"}


def _candidate(
    stage_index: int, name: str, trial: Trial, search: SearchSpec, config: EngineConfig | None
) -> CandidatePlan:
    measurement = None
    if trial.status == "complete" and trial.samples:
        mean = sum(trial.samples) / len(trial.samples)
        measurement = Measurement("measured", None, mean, None, finished=True, values=tuple(trial.samples))
    decision = "reused" if trial.repeat_of is not None or trial.earlier else _DECISIONS.get(trial.status)
    if decision is None and trial.status == "complete" and trial.violation > 0:
        decision = "infeasible"  # measured, and it breaks an SLO
    return CandidatePlan(
        stage_index=stage_index,
        stage_name=name,
        position=trial.number,
        label=_label(trial),
        changes=search.changes(dict(trial.params)),
        config=config,
        error=trial.refused,
        measurement=measurement,
        decision=decision,
        note=trial.note,
    )


def _runs_of(stage: StageInput, search: SearchSpec, objectives: Sequence[str]) -> SearchRuns:
    evidence = stage.evidence
    if evidence.tuning is None:
        return SearchRuns()
    return observations(
        evidence.runs,
        evidence.results,
        evidence.found,
        tuning=evidence.tuning,
        screening=screening_profile(evidence.tuning, search.screening),
        objectives=objectives,
        slos=evidence.slos,
        repeats=evidence.repeats,
    )


def _against(decision: Decision, label: str, measured: str = "") -> str:
    """A finalist's decision against the reference ``label``: its gain over it (``measured`` says on
    what), or, when the reference breaks an SLO and no verdict was needed, why it beats it."""
    return f"{decision.gain} over {label}{measured}" if decision.verdict is not None else decision.gain


@dataclass(frozen=True)
class Search:
    """The search strategy (see the module)."""

    def step(self, stage: StageInput) -> StageStep:
        """Where the search stage stands: its trials (a new proposal appended when one is due)."""
        search = stage.spec.search
        objectives = objectives_of(search, stage.evidence.objective)
        runs = _runs_of(stage, search, objectives)
        stored, stopped = read_record(stage.evidence.stored.get(str(stage.index), ()))
        gpu_hours = sum(run_gpu_hours(run) for run in stage.evidence.runs)
        return _search_step(stage, search, objectives, stored, runs, gpu_hours, stopped)


def read_record(record: Any) -> tuple[list[Mapping[str, Any]], str | None]:
    """The stored trials of a search stage, and why it stopped once it did: ``{"trials", "stop"}``, or
    the list of trials alone (a record written before stops were kept)."""
    if isinstance(record, Mapping):
        return list(record.get("trials") or ()), record.get("stop")
    return list(record or ()), None


def _search_step(
    stage: StageInput,
    search: SearchSpec,
    objectives: Sequence[str],
    stored: Sequence[Mapping[str, Any]],
    runs: SearchRuns,
    gpu_hours: float,
    stopped: str | None,
) -> StageStep:
    """Where the search stage stands: its trials (a new proposal appended when one is due)."""
    stage_index, name, best, rules = stage.index, stage.spec.name, stage.best, stage.rules
    build = _builder(search, best, stage.gpus or stage.gpus_per_node)
    min_gain_pct = rules.min_gain * 100.0
    trials = with_outcomes([Trial(**dict(item)) for item in stored], runs.observations)
    configs: dict[int, EngineConfig] = {}
    for trial in trials:
        if trial.refused is None:
            configs[trial.number] = build(dict(trial.params))
    trials = [
        replace(trial, accelerators=configs[t].gpus_needed, batch=configs[t].max_num_seqs)
        if (t := trial.number) in configs
        else trial
        for trial in trials
    ]
    result = step(
        search,
        objectives,
        trials,
        build,
        gpu_hours=gpu_hours,
        min_gain_pct=min_gain_pct,
        propose=stage.propose,
        earlier={fp: seen for fp, seen in runs.observations.items() if fp in stage.earlier},
        predict=stage.evidence.predict,
        slos=stage.evidence.slos,
        stopped=stopped,
    )
    trials = list(result.trials)
    for trial in trials:
        if trial.number not in configs and trial.refused is None:
            configs[trial.number] = build(dict(trial.params))
    wanted = [configs[t.number] for t in trials if t.launched and t.fingerprint not in runs.observations]
    not_promising = frozenset(
        t.fingerprint
        for t in trials
        if t.launched and t.status == "screened" and not promising(search, objectives, trials, t.number)
    )
    candidates = [_candidate(stage_index, name, t, search, configs.get(t.number)) for t in trials]
    screen = {config.fingerprint(): search.screening for config in wanted} if search.screening < 1.0 else {}
    common = {"stored": {"trials": [trial.stored() for trial in trials], "stop": result.stop}}
    if result.stop is None:
        return StageStep(
            StagePlan(stage_index, name, tuple(candidates), best),
            wanted=tuple(wanted),
            screen=screen,
            drop=not_promising,
            detail=SearchState(search, tuple(objectives), tuple(trials)),
            **common,
        )
    if not any(trial.refused is None for trial in trials):
        failure = f"no configuration of its space can be built ({len(trials)} proposals): {trials[0].refused}"
        stage_plan = StagePlan(stage_index, name, tuple(candidates), best)
        detail = SearchState(search, tuple(objectives), tuple(trials), result.stop)
        return StageStep(stage_plan, detail=detail, failure=failure, **common)
    pick = final_pick(
        search, objectives, trials, rules=rules, reference=best.measurement, reference_label=best.label
    )
    # a round of the final pick still running: the pick is looked at once all its launches are back
    in_flight = bool(runs.remeasuring) or best.measurement.state == "pending"
    reason = "measuring the final pick's round of launches" if in_flight else pick.reason
    detail = SearchState(search, tuple(objectives), tuple(trials), result.stop, reason)
    if pick.waiting or in_flight:
        launches = () if in_flight else pick.order
        again = [best.config if number is None else configs[number] for number in launches]
        remeasure = frozenset(config.fingerprint() for config in again)
        stage_plan = StagePlan(stage_index, name, tuple(candidates), best)
        return StageStep(
            stage_plan,
            wanted=(*wanted, *again),
            screen=screen,
            tuning_only=remeasure,
            detail=detail,
            **common,
        )
    decided = _decided(candidates, pick, best)
    winner = next((candidate for candidate in decided if candidate.decision == "winner"), None)
    stage_plan = StagePlan(stage_index, name, tuple(decided), best, winner, decided=True)
    return StageStep(stage_plan, wanted=tuple(wanted), screen=screen, detail=detail, **common)


def _decided(
    candidates: Sequence[CandidatePlan], pick: FinalPick, best: CandidatePlan
) -> list[CandidatePlan]:
    """The trials decided once the pick stands: the pick is the winner when it was kept over the best
    before the stage, every other measured trial not better. Each note speaks of its own trial: the
    pick's of its comparisons, a finalist's of its decision against that reference, the others' of their
    mean against the pick's (or against the best finalist's when nothing was kept)."""
    chosen = candidates[pick.trial.number] if pick.trial is not None else None
    kept = pick.decision
    leader = chosen or (candidates[pick.finalists[0]] if pick.finalists else None)
    decided = []
    for candidate in candidates:
        position = candidate.position
        decision = pick.kept.get(position)
        if candidate.decision is not None or candidate.value is None:
            decided.append(candidate)
        elif candidate is chosen and kept is not None:
            note = f"{pick.reason}; {_against(kept, best.label, ' on its confirmation launches')}"
            decided.append(replace(candidate, decision="winner", note=note, verdict=kept.verdict))
        elif decision is not None and decision.outcome == "better":
            note = f"a finalist, {_against(decision, best.label)}; trial {chosen.position} is the pick"
            decided.append(replace(candidate, decision="not_better", note=note, verdict=decision.verdict))
        elif decision is not None:
            note = f"a finalist, not kept over {best.label}: {decision.note}"
            decided.append(replace(candidate, decision="not_better", note=note, verdict=decision.verdict))
        elif leader is None:
            decided.append(replace(candidate, decision="not_better", note=pick.reason))
        else:
            gain = gain_text(candidate.value, leader.value)
            whose = "the search's pick" if chosen is not None else "the best finalist"
            note = f"mean {candidate.value:.2f}, {gain} against trial {leader.position}, {whose}"
            decided.append(replace(candidate, decision="not_better", note=note))
    return decided
