"""The seam between a study and its stage strategies: a third strategy, written here, is driven by the
pure planner and by the coordinator against a real database, exactly as the staged plan and the search
are — it proposes, remembers its proposals in ``study.state``, decides with the shared decision
service, and the study recommends its winner."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.engines.config import EngineConfig
from perflab.study.configs import serve_command
from perflab.study.decide import decide
from perflab.study.measure import study_runs
from perflab.study.spec import StageSpec, parse_spec
from perflab.study.strategy import Evidence, StageInput, StageStrategy
from perflab.study.study_plan import plan_study
from perflab.study.types import CandidatePlan, Measurement, Rules, StagePlan, StageStep
from tests.study.by_hand import drive, measure_once

SPEC = """
name: doubling
model: Qwen/Qwen3-8B
hosts: [gpu-a]
baseline: {engine: vllm, max_num_seqs: 64}
tuning_profile: {name: tune, title: Tune, dataset: random, input_len: 128, output_len: 64, num_prompts: 50,
  max_concurrency: 4}
stages:
  - name: Doubling
    dimension: max_num_seqs
    candidates: [64]
"""
# Throughput by max_num_seqs: it pays to double twice, not a third time.
LANDSCAPE = {64: 1000.0, 128: 1500.0, 256: 1800.0, 512: 1700.0}


@dataclass(frozen=True)
class Doubling:
    """Doubles max_num_seqs of the best configuration while that wins, up to ``rounds`` times."""

    rounds: int = 4

    def _candidate(self, stage: StageInput, position: int, size: int) -> CandidatePlan:
        config = stage.best.config.model_copy(update={"max_num_seqs": size})
        return CandidatePlan(
            stage_index=stage.index,
            stage_name=stage.spec.name,
            position=position,
            label=f"max_num_seqs={size}",
            changes={"max_num_seqs": size},
            config=config,
            measurement=stage.measurements.get(config.fingerprint()),
        )

    def step(self, stage: StageInput) -> StageStep:
        sizes = list(stage.evidence.stored.get(str(stage.index)) or [])
        reference = stage.best
        kept: list[CandidatePlan] = []
        for position, size in enumerate(sizes):
            candidate = self._candidate(stage, position, size)
            if candidate.value is None:
                wanted = (candidate.config,) if candidate.measurement is None else ()
                plan = StagePlan(stage.index, stage.spec.name, (*kept, candidate), stage.best)
                return StageStep(plan, wanted=wanted, stored=sizes)
            # one measurement each: the seam, not the statistics
            rules = replace(stage.rules, measures_noise=False)
            decision = decide(candidate.measurement.samples, reference.measurement.samples, rules)
            if decision.outcome != "better":
                return self._decided(
                    stage, kept, replace(candidate, decision="not_better", note=decision.note), sizes
                )
            kept.append(candidate)
            reference = candidate
        if len(sizes) >= self.rounds:
            return self._decided(stage, kept, None, sizes)
        if not stage.propose:
            return StageStep(StagePlan(stage.index, stage.spec.name, tuple(kept), stage.best), stored=sizes)
        sizes.append((reference.config.max_num_seqs or 0) * 2)
        candidate = self._candidate(stage, len(sizes) - 1, sizes[-1])
        plan = StagePlan(stage.index, stage.spec.name, (*kept, candidate), stage.best)
        return StageStep(plan, wanted=(candidate.config,), stored=sizes)

    def _decided(
        self, stage: StageInput, kept: list[CandidatePlan], last: CandidatePlan | None, sizes: list[int]
    ) -> StageStep:
        winner = replace(kept[-1], decision="winner", note="the last doubling that won") if kept else None
        beaten = [replace(candidate, decision="not_better", note="doubled again") for candidate in kept[:-1]]
        candidates = (*beaten, *([winner] if winner else []), *([last] if last else []))
        plan = StagePlan(stage.index, stage.spec.name, candidates, stage.best, winner, decided=True)
        return StageStep(plan, stored=sizes)


def _doubling(stage: StageSpec) -> StageStrategy:
    return Doubling()


def test_the_planner_drives_a_third_strategy_through_the_seam() -> None:
    spec = parse_spec(SPEC)
    baseline = spec.baseline_config()
    measured: dict[str, Measurement] = {}
    stored: dict[str, Any] = {}
    launched: list[int] = []
    for _ in range(10):
        plan = plan_study(
            baseline=baseline,
            stages=spec.stages,
            measurements=measured,
            rules=Rules(measures_noise=False),  # one measurement each: the seam, not the statistics
            evidence=Evidence(stored=stored),
            strategy_for=_doubling,
        )
        stored = {str(step.stage.index): step.stored for step in plan.steps if step.stored is not None}
        if plan.status == "done":
            break
        for config in plan.wanted:
            launched.append(config.max_num_seqs)
            value = LANDSCAPE[config.max_num_seqs]
            measured[config.fingerprint()] = Measurement("measured", len(launched), value, 1.0, finished=True)
    assert plan.status == "done"
    assert launched == [64, 128, 256, 512]  # the baseline, then one doubling at a time
    assert plan.best.label == "max_num_seqs=256" and plan.best.config.max_num_seqs == 256
    decisions = [(c.label, c.decision) for c in plan.stages[0].candidates]
    assert decisions == [
        ("max_num_seqs=128", "not_better"),
        ("max_num_seqs=256", "winner"),
        ("max_num_seqs=512", "not_better"),
    ]
    assert "-5.6% (one measurement, noise unknown): lower than previous" in plan.stages[0].candidates[-1].note
    # read as a page reads it, the strategy proposes nothing
    quiet = plan_study(
        baseline=baseline,
        stages=spec.stages,
        measurements={baseline.fingerprint(): measured[baseline.fingerprint()]},
        rules=Rules(measures_noise=False),
        strategy_for=_doubling,
        propose=False,
    )
    assert quiet.wanted == () and quiet.steps[0].stored == []


def _measure(engine: Engine, run_id: int) -> None:
    with new_session(engine) as session:
        value = LANDSCAPE[crud.require_run(session, run_id=run_id).config["max_num_seqs"]]
    measure_once(engine, run_id, {"completed": 10, "failed": 0, "total_token_throughput": value})


def test_the_coordinator_drives_a_third_strategy_through_the_seam(db_engine: Engine) -> None:
    study = drive(db_engine, SPEC, lambda _, run_id: _measure(db_engine, run_id), strategy_for=_doubling)
    study_id = study.id
    assert study.status == "done", study.state
    with new_session(db_engine) as session:
        runs = study_runs(session, study_id=study_id)
        rows = crud.list_candidates(session, study_id=study_id)
    # the baseline, then one doubling at a time, each decided on one measurement; then the study's path
    # (the baseline and the winner) again on fresh launches, in a mirrored block (A B A or B A B)
    sizes = [run.config["max_num_seqs"] for run in runs]
    block = sizes[4:]
    assert sizes[:4] == [64, 128, 256, 512] and sorted(set(block)) == [64, 256]
    assert len(block) == 3 and block == block[::-1]
    assert study.state["stage_state"]["1"] == [128, 256, 512]
    assert study.state["stage_state"]["study"]["stages"] == {"1": {"winner": runs[2].config_fingerprint}}
    winner = EngineConfig.model_validate(runs[2].config)
    assert study.recommended_command == serve_command(winner)
    assert [(row.label, row.decision) for row in rows if row.stage_index == 1] == [
        ("max_num_seqs=128", "not_better"),
        ("max_num_seqs=256", "winner"),
        ("max_num_seqs=512", "not_better"),
    ]
