"""Verdicts that stand: a decision is stored when made and later launches never flip it or restart a
stopped candidate; looks are bounded; no interval is printed from too few launches; a reused spread
from a quieter host is refused; the detectable gain belongs to the host and the design; the study's
false-change rate is closed by a test on fresh launches; Holm's family keeps no null candidate more
than α. Values from seeded noise models (known truth), decided through the planner as the coordinator
drives it (:class:`perflab.study.replay.Replay`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from perflab.engines.config import EngineConfig
from perflab.sim.noise import NoiseModel
from perflab.study.confirm import block_order, closing_alpha
from perflab.study.decide import decide_family, detectable_gain, detectable_text
from perflab.study.noise import REUSE_MARGIN, REUSE_TEST_ALPHA, ReusedSpread, StudySpread, study_spread
from perflab.study.progress import study_rules
from perflab.study.replay import Replay
from perflab.study.spec import parse_spec
from perflab.study.strategy import Evidence
from perflab.study.study_plan import STUDY_RECORD, plan_study
from perflab.study.types import CandidatePlan, Measurement, Rules, StagePlan, StageStep, StudyPlan
from perflab.study.verdict import MIN_DF
from tests.study.test_noise_plan import SPEC as ONE

FOUR = """
name: stand
model: Qwen/Qwen3-8B
hosts: [h]
baseline: {engine: vllm}
stages:
  - {name: A, candidates: [{extra_args: ["--seed=1"]}]}
  - {name: B, candidates: [{extra_args: ["--seed=2"]}]}
  - {name: C, candidates: [{extra_args: ["--seed=3"]}]}
  - {name: D, candidates: [{extra_args: ["--seed=4"]}]}
"""


def _study(text: str, gains: dict[str, float], speed: Callable[[int], float], seed: int = 1) -> Replay:
    """A replay whose configurations are worth 1000 × (1 + gain) for every flag (or the one stage's
    change, ``memory``) they carry, times ``speed`` of the launch."""
    launches = [0]

    def measure(config: EngineConfig) -> float:
        value = 1000.0
        for flag, gain in gains.items():
            if flag in config.extra_args or (flag == "memory" and config.gpu_memory_utilization == 0.85):
                value *= 1.0 + gain
        launches[0] += 1
        return value * speed(launches[0] - 1)

    return Replay(parse_spec(text), measure, seed=seed)


def _noise(seed: int, run_cv: float = 2.0, launch_cv: float = 1.0) -> Callable[[int], float]:
    model = NoiseModel(run_cv_pct=run_cv, launch_cv_pct=launch_cv, seed=seed)
    return lambda launch: model.speed(launch, 0)


def _candidate(plan: StudyPlan, stage: int = 1) -> CandidatePlan:
    return plan.stages[stage - 1].candidates[0]


def _decided_stage(replay: Replay) -> StudyPlan:
    """Advance until the first stage is decided (its winner or none stored)."""
    for _ in range(100):
        plan = replay.advance()
        if plan.stages and plan.stages[0].decided:
            return plan
    raise AssertionError("the stage was never decided")


def test_a_decided_stage_stands_when_later_launches_would_flip_it() -> None:
    replay = _study(ONE, {"memory": 0.10}, _noise(11))
    plan = _decided_stage(replay)
    kept = _candidate(plan)
    assert kept.decision == "winner"
    # the baseline's next launches come out far higher: judged afresh, the change would not be kept
    baseline = plan.baseline.fingerprint
    replay.values[baseline] += [1300.0, 1310.0, 1290.0]
    again = replay.plan()
    assert _candidate(again).decision == "winner" and again.stages[0].winner.fingerprint == kept.fingerprint
    assert _candidate(again).verdict.gain_pct == kept.verdict.gain_pct  # the verdict itself, as made
    afresh = Replay(replay.spec, replay.measure, values=replay.values).plan()  # nothing stored
    assert _candidate(afresh).decision != "winner"


def test_a_stopped_candidate_is_never_launched_again() -> None:
    replay = _study(ONE, {"memory": 0.0}, _noise(4))
    plan = _decided_stage(replay)
    stopped = _candidate(plan)
    assert stopped.decision in ("within_noise", "not_better")
    launched = len(replay.values[stopped.fingerprint])
    replay.values[plan.baseline.fingerprint] += [700.0, 690.0]  # now it would look like a clear gain
    final = replay.run()
    assert _candidate(final).decision == stopped.decision and final.best is final.baseline
    assert len(replay.values[stopped.fingerprint]) == launched


@pytest.mark.parametrize("seed", range(6))
def test_looks_are_bounded_by_max_launches(seed: int) -> None:
    replay = _study(
        FOUR, {"--seed=1": 0.03, "--seed=2": 0.02, "--seed=3": 0.04, "--seed=4": 0.03}, _noise(seed, 3, 2)
    )
    plan = replay.run()
    most = replay.rules.max_launches
    for stage in plan.stages:
        verdict = stage.candidates[0].verdict
        assert verdict is not None and verdict.n_candidate <= most and verdict.look <= verdict.looks <= most


def test_no_interval_is_printed_from_a_spread_on_too_few_launches() -> None:
    replay = _study(ONE, {"memory": 0.05}, _noise(2))
    notes = []
    replay.run(each=lambda plan: notes.extend(c.note for s in plan.stages for c in s.candidates if c.note))
    early = [note for note in notes if "no verdict yet" in note]
    assert early and all("±" not in note for note in early)
    assert "no verdict yet: the spread rests on 2 launches, measuring both again" in early
    assert not any("±" in note and "%, 95 %, 1 vs 2" in note for note in notes)


def test_a_spread_from_a_host_three_times_quieter_is_refused_by_a_test_with_power() -> None:
    # the probability that the gate pools a reused spread whose CV is a third of today's, at any df
    # today's launches may offer (from MIN_DF on: fewer cannot vouch for any)
    for df in range(MIN_DF, 41):
        quantile = stats.f.ppf(REUSE_TEST_ALPHA, df, 20)
        assert stats.f.cdf(REUSE_MARGIN**2 * quantile / 9.0, df, 20) < 0.015
    assert study_spread([[100.0, 101.0]], ReusedSpread(cv_pct=0.7, df=20, study_id=1)).reuse == "refused"
    # and a study on such a host never pools it at any look (seeded)
    spreads = []
    replay = _study(FOUR, {"--seed=2": 0.10}, _noise(5, 3, 2))
    replay.reused = ReusedSpread(cv_pct=math.sqrt(13) / 3, df=20, study_id=1)
    replay.run(each=lambda plan: spreads.append(replay.spread))
    assert spreads and all(spread.reuse == "refused" for spread in spreads)
    # while an alike one on many of today's df is pooled about half the time, as the F test gives
    assert stats.f.cdf(REUSE_MARGIN**2 * stats.f.ppf(REUSE_TEST_ALPHA, 20, 20), 20, 20) > 0.5


def test_the_detectable_gain_belongs_to_the_host_and_the_design_not_the_outcome() -> None:
    spec = parse_spec(ONE)

    def stated(cv: float, df: float, candidates: int = 1) -> float:
        spread = StudySpread(cv, df, cv, int(df), 2, int(df) + 2)
        gain = detectable_gain(study_rules(spec, spread), candidates)
        assert gain is not None
        return gain

    # a study that stopped early (few df) and one that went on (many) on one host state the same
    assert stated(3.6, 4.0) == stated(3.6, 40.0)
    assert stated(3.6, 4.0) < stated(7.2, 4.0)
    assert stated(3.6, 4.0, candidates=5) > stated(3.6, 4.0)  # Holm's share of five candidates
    # stated before the study has a spread of its own, from the one an earlier study offered it
    offered = ReusedSpread(cv_pct=3.6, df=20, study_id=1)
    before = study_spread([], offered)
    assert not before.known and detectable_gain(study_rules(spec, before)) == stated(3.6, 4.0)
    text = detectable_text(stated(3.6, 4.0))
    assert "4 times in 5" in text and "smaller true gains are kept less often" in text
    assert "cannot be told" not in text  # never a contradiction of a smaller kept gain


def test_the_closing_test_falls_back_to_the_baseline_when_kept_changes_do_not_hold_up() -> None:
    noise = _noise(8)
    replay = _study(FOUR, {}, noise)

    def measure(config: EngineConfig) -> float:
        confirming = len((replay.stored.get(STUDY_RECORD) or {}).get("stages") or {}) == 4
        kept = "--seed=1" in config.extra_args
        # the first stage's change is worth +12 % while stages decide, nothing on its fresh launches
        gain = 0.12 if kept and not confirming else 0.0
        return 1000.0 * (1.0 + gain) * noise(len(replay.launched))

    replay.measure = measure
    plan = replay.run()
    assert _candidate(plan, 1).decision == "winner"  # the stage's decision stands
    confirmation = plan.confirmation
    assert confirmation is not None and confirmation.alpha == pytest.approx(0.25)
    assert confirmation.confirmed is False and plan.best is plan.baseline
    assert "did not hold up on fresh launches" in confirmation.note
    assert confirmation.note.endswith("no change is recommended")
    assert closing_alpha(1, 0.95) == 1.0  # a study of one stage: its stage's own test is the study's


def test_the_confirmation_launches_come_after_every_decision_in_a_seeded_mirrored_block() -> None:
    replay = _study(FOUR, {"--seed=1": 0.15, "--seed=3": 0.15}, _noise(3))
    decided_at = []
    replay.run(
        each=lambda plan: decided_at.append(len(replay.launched)) if plan.confirmation is None else None
    )
    plan = replay.plan()
    confirmation = plan.confirmation
    assert confirmation is not None and confirmation.measured and confirmation.confirmed
    block = [config.fingerprint() for config in replay.launched[max(decided_at) :]]
    # the baseline and two winners in a random order, then backwards: every configuration's launches
    # have the same mean position in the block
    assert tuple(block) == confirmation.order and len(block) == 5 and block == block[::-1]
    path = [plan.baseline, *(stage.winner for stage in plan.stages if stage.winner)]
    assert set(block) == {candidate.fingerprint for candidate in path}
    orders = {block_order(path, seed) for seed in range(20)}
    assert len(orders) > 1
    for order in orders:
        assert order == order[::-1] and sorted(set(order)) == sorted(set(block)) and len(order) == 5


def test_a_family_keeps_no_null_candidate_more_often_than_alpha() -> None:
    rules = Rules(max_launches=1, spread=StudySpread.given(2.0))
    rng = np.random.default_rng(17)
    families, kept = 4000, 0
    for _ in range(families):
        reference = 1000.0 * np.exp(0.02 * rng.standard_normal(1))
        candidates = {
            k: list(1010.0 * np.exp(0.02 * rng.standard_normal(1))) for k in range(5)
        }  # every true gain at the minimum
        found = decide_family(candidates, list(reference), rules, final=True)
        kept += any(decision.outcome == "better" for decision in found.values())
    assert kept / families < 0.025 + 3 * math.sqrt(0.025 * 0.975 / families)


def test_holm_passes_the_share_of_a_kept_candidate_on() -> None:
    rules = Rules(max_launches=1, spread=StudySpread.given(1.0))
    candidates = {"clear": [1100.0], "also": [1090.0], "near": [1040.0]}
    found = decide_family(candidates, [1000.0], rules, final=True)
    assert [found[key].outcome for key in candidates] == ["better", "better", "better"]
    alone = decide_family({"near": [1040.0]}, [1000.0], rules, final=True, tested=3)
    assert alone["near"].outcome == "within_noise"  # a third of α was not enough for it alone


def test_a_reference_that_fails_on_a_later_launch_fails_the_study_with_the_reason() -> None:
    replay = _study(FOUR, {"--seed=1": 0.15}, _noise(3))
    for _ in range(100):
        plan = replay.advance()
        if plan.stages and plan.stages[0].decided and plan.stages[0].winner is not None:
            break
    winner = plan.stages[0].winner
    measurements = replay.measurements()
    measurements[winner.fingerprint] = Measurement("failed", 9, error="CUDA error: an illegal memory access")
    failed = plan_study(
        baseline=replay.spec.baseline_config(1, 1),
        stages=replay.spec.stages,
        measurements=measurements,
        rules=replay.rules,
        gpus=1,
        evidence=Evidence(stored=replay.stored),
    )
    assert failed.status == "failed" and failed.failure == (
        f"stage 2 (B): {winner.label}, the stage's reference, failed on a later launch: "
        "CUDA error: an illegal memory access"
    )


def test_the_path_stands_whatever_a_strategy_says_later() -> None:
    spec = parse_spec(FOUR)
    baseline = spec.baseline_config(1, 1)
    first, second = (baseline.model_copy(update={"extra_args": (flag,)}) for flag in ("--seed=1", "--seed=9"))

    def strategy(pick: EngineConfig) -> Callable[[object], object]:
        class Flipping:
            """A stage strategy that decides on whichever configuration it is told."""

            def step(self, stage):  # type: ignore[no-untyped-def]
                candidates = tuple(
                    CandidatePlan(stage.index, stage.spec.name, position, config.extra_args[0], {}, config)
                    for position, config in enumerate((first, second))
                )
                winner = replace(next(c for c in candidates if c.config == pick), decision="winner")
                candidates = tuple(winner if c.config == pick else c for c in candidates)
                return StageStep(
                    StagePlan(stage.index, stage.spec.name, candidates, stage.best, winner, True)
                )

        return lambda stage_spec: Flipping()

    measured = {
        config.fingerprint(): Measurement("measured", 1, 1000.0, 1.0, True)
        for config in (baseline, first, second)
    }
    rules = Rules(measures_noise=False)
    once = plan_study(
        baseline=baseline,
        stages=spec.stages[:1],
        measurements=measured,
        rules=rules,
        strategy_for=strategy(first),
    )
    assert once.stored["stages"] == {"1": {"winner": first.fingerprint()}}
    later = plan_study(
        baseline=baseline,
        stages=spec.stages[:1],
        measurements=measured,
        rules=rules,
        strategy_for=strategy(second),
        evidence=Evidence(stored={STUDY_RECORD: once.stored}),
    )
    assert later.stages[0].winner.fingerprint == first.fingerprint() and later.best.config == first
