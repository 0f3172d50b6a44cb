"""Studies decide with their noise by default: the baseline's second launch, the sequential verdicts, Holm's
shares, noise unknown, too-short results; values drawn from the simulator's seeded noise model (known
truth, no runs), decided through the planner and the rules a study's progress builds."""

from __future__ import annotations

from perflab.sim.noise import NoiseModel
from perflab.study.noise import study_spread
from perflab.study.progress import study_rules
from perflab.study.spec import parse_spec
from perflab.study.study_plan import plan_study
from perflab.study.types import Measurement, Rules, StudyPlan

SPEC = """
name: noise
model: Qwen/Qwen3-8B
hosts: [h]
baseline: {engine: vllm}
stages:
  - name: Memory
    candidates: [{gpu_memory_utilization: 0.85}]
"""
THREE = """
name: noise
model: Qwen/Qwen3-8B
hosts: [h]
baseline: {engine: vllm}
stages:
  - name: Memory
    candidates:
      - {gpu_memory_utilization: 0.85}
      - {gpu_memory_utilization: 0.8}
      - {gpu_memory_utilization: 0.75}
"""


def _measured(values: dict[str, list[float]]) -> dict[str, Measurement]:
    return {
        fingerprint: Measurement(
            "measured", 1, sum(found) / len(found), 1.0, finished=True, values=tuple(found)
        )
        for fingerprint, found in values.items()
    }


def _run_plan(text: str, gains: list[float], noise: NoiseModel) -> tuple[StudyPlan, list[str]]:
    """Plan with the rules of the spec's defaults at the spread measured so far, launch what it wants
    (truth × the model's speed of that launch), until it stops."""
    spec = parse_spec(text)
    baseline = spec.baseline_config()
    truth = {baseline.fingerprint(): 1000.0}
    for candidate, gain in zip(spec.stages[0].candidates, gains, strict=True):
        changed = baseline.model_copy(update=candidate.changes)
        truth[changed.fingerprint()] = 1000.0 * (1 + gain)
    values: dict[str, list[float]] = {}
    order: list[str] = []
    while True:
        rules = study_rules(spec, study_spread(list(values.values())))
        plan = plan_study(baseline=baseline, stages=spec.stages, measurements=_measured(values), rules=rules)
        if not plan.wanted:
            return plan, order
        for config in plan.wanted:
            fingerprint = config.fingerprint()
            values.setdefault(fingerprint, []).append(truth[fingerprint] * noise.speed(len(order), 0))
            order.append("A" if config == baseline else "B")


def test_the_baseline_is_launched_twice_so_every_study_measures_its_spread() -> None:
    plan, order = _run_plan(SPEC, [0.0], NoiseModel(run_cv_pct=2.0, launch_cv_pct=1.0, seed=11))
    assert order[:3] == ["A", "A", "B"]
    assert plan.baseline.measurement.launches >= 2


def test_a_candidate_that_changes_nothing_is_not_kept_whatever_the_noise_says() -> None:
    for seed in range(8):
        plan, _ = _run_plan(SPEC, [0.0], NoiseModel(run_cv_pct=2.0, launch_cv_pct=1.0, seed=seed))
        candidate = plan.stages[0].candidates[0]
        assert plan.status == "done" and plan.best is plan.baseline
        verdict = candidate.verdict
        assert candidate.decision in ("within_noise", "not_better") and verdict.outcome == candidate.decision
        assert candidate.note.startswith(verdict.text())  # every decision carries its interval


def test_a_clear_gain_is_kept_with_its_interval_and_a_gain_adjusted_for_selection() -> None:
    plan, _ = _run_plan(SPEC, [0.10], NoiseModel(run_cv_pct=2.0, launch_cv_pct=1.0, seed=11))
    winner = plan.stages[0].candidates[0]
    assert winner.decision == "winner" and plan.best is winner
    verdict = winner.verdict
    assert verdict.outcome == "better" and verdict.gain_pct - verdict.half_width_pct > 1.0
    assert verdict.adjusted_gain_pct < verdict.gain_pct
    assert winner.note == f"{verdict.published_text()} over Baseline"


def test_a_stage_shares_its_error_rate_among_its_candidates() -> None:
    spec = parse_spec(THREE)
    baseline = spec.baseline_config()
    configs = [baseline.model_copy(update=candidate.changes) for candidate in spec.stages[0].candidates]
    values = {baseline.fingerprint(): [1000.0, 1010.0]}
    values.update({config.fingerprint(): [1030.0] for config in configs})
    rules = study_rules(spec, study_spread(list(values.values())))
    plan = plan_study(baseline=baseline, stages=spec.stages, measurements=_measured(values), rules=rules)
    shared = plan.stages[0].candidates[0].verdict
    alone = (
        plan_study(
            baseline=baseline,
            stages=parse_spec(SPEC).stages,
            measurements=_measured(
                {baseline.fingerprint(): [1000.0, 1010.0], configs[0].fingerprint(): [1030.0]}
            ),
            rules=study_rules(parse_spec(SPEC), study_spread([[1000.0, 1010.0], [1030.0]])),
        )
        .stages[0]
        .candidates[0]
        .verdict
    )
    # one of three candidates gets a third of α: a wider interval on the same launches
    assert shared.half_width_pct > alone.half_width_pct


def test_without_any_spread_nothing_is_kept_and_the_verdict_says_why() -> None:
    spec = parse_spec(SPEC)
    baseline = spec.baseline_config()
    candidate = baseline.model_copy(update={"gpu_memory_utilization": 0.85})
    values = {baseline.fingerprint(): [1000.0, 1000.0], candidate.fingerprint(): [1300.0]}
    rules = Rules(max_launches=1, spread=None)
    plan = plan_study(baseline=baseline, stages=spec.stages, measurements=_measured(values), rules=rules)
    judged = plan.stages[0].candidates[0]
    assert judged.decision == "noise_unknown" and plan.best is plan.baseline
    assert judged.note == "+30.0 %, one measurement, noise unknown: nothing is kept on one measurement"


def test_an_imported_write_up_decides_on_its_one_measurement_and_says_so() -> None:
    spec = parse_spec(SPEC)
    baseline = spec.baseline_config()
    candidate = baseline.model_copy(update={"gpu_memory_utilization": 0.85})
    measured = {
        baseline.fingerprint(): Measurement("measured", 1, 1000.0, 1.0, finished=True),
        candidate.fingerprint(): Measurement("measured", 2, 1050.0, 1.0, finished=True),
    }
    rules = Rules(measures_noise=False)
    plan = plan_study(baseline=baseline, stages=spec.stages, measurements=measured, rules=rules)
    winner = plan.stages[0].candidates[0]
    assert winner.decision == "winner" and winner.verdict is None
    assert winner.note == "+5.0% (one measurement, noise unknown) over Baseline"


def test_a_baseline_too_short_to_judge_fails_the_study_with_the_fix() -> None:
    spec = parse_spec(SPEC)
    reason = "too short to judge: 1.2 s and 40 requests"
    measured = {
        spec.baseline_config().fingerprint(): Measurement("too_short", 1, error=reason, finished=True)
    }
    plan = plan_study(
        baseline=spec.baseline_config(), stages=spec.stages, measurements=measured, rules=Rules()
    )
    assert plan.status == "failed"
    fix = "raise the study's scale or the tuning profile's prompts"
    assert plan.failure == f"the baseline's tuning benchmark is {reason}: {fix}"


def test_a_candidate_too_short_to_judge_is_neither_kept_nor_beaten() -> None:
    spec = parse_spec(SPEC)
    baseline = spec.baseline_config()
    candidate = baseline.model_copy(update={"gpu_memory_utilization": 0.85})
    measured = _measured({baseline.fingerprint(): [1000.0, 1010.0]})
    measured[candidate.fingerprint()] = Measurement(
        "too_short", 2, error="too short to judge: 3.0 s", finished=True
    )
    rules = study_rules(spec, study_spread([[1000.0, 1010.0]]))
    plan = plan_study(baseline=baseline, stages=spec.stages, measurements=measured, rules=rules)
    judged = plan.stages[0].candidates[0]
    assert judged.decision == "too_short" and plan.best is plan.baseline and plan.status == "done"
