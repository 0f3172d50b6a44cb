"""Studies that measure their noise: relaunches, A B A B close calls and "within noise", on values drawn
from the simulator's seeded noise model (known truth, no runs)."""

from __future__ import annotations

from perflab.sim.noise import NoiseModel
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
RULES = Rules(min_gain=0.01, relaunches=2, max_launches=3, measures_noise=True)


def _run_plan(truth: dict[str, float], noise: NoiseModel) -> tuple[StudyPlan, list[str]]:
    """Plan, launch what it wants (values = truth × the model's speed of that launch), until it stops."""
    spec = parse_spec(SPEC)
    baseline = spec.baseline_config()
    values: dict[str, list[float]] = {}
    order: list[str] = []
    launches = 0
    while True:
        measured = {
            fingerprint: Measurement(
                "measured", 1, sum(found) / len(found), 1.0, finished=True, values=tuple(found)
            )
            for fingerprint, found in values.items()
        }
        plan = plan_study(baseline=baseline, stages=spec.stages, measurements=measured, rules=RULES)
        if not plan.wanted:
            return plan, order
        for config in plan.wanted:
            fingerprint = config.fingerprint()
            values.setdefault(fingerprint, []).append(truth[fingerprint] * noise.speed(launches, 0))
            order.append("A" if config == baseline else "B")
            launches += 1


def _truth(gain: float) -> dict[str, float]:
    spec = parse_spec(SPEC)
    baseline = spec.baseline_config()
    candidate = baseline.model_copy(update={"gpu_memory_utilization": 0.85})
    return {baseline.fingerprint(): 1000.0, candidate.fingerprint(): 1000.0 * (1 + gain)}


def test_a_candidate_that_changes_nothing_ends_within_noise_after_a_b_a_b() -> None:
    plan, order = _run_plan(_truth(0.0), NoiseModel(run_cv_pct=2.0, launch_cv_pct=1.0, seed=11))
    candidate = plan.stages[0].candidates[0]
    assert plan.status == "done" and plan.best is plan.baseline
    verdict = candidate.verdict
    assert candidate.decision == "within_noise" and verdict.outcome == "within_noise"
    # two launches each first (relaunches: 2), then the close call once more, reference first
    assert order == ["A", "A", "B", "B", "A", "B"]
    assert (verdict.n_candidate, verdict.n_reference) == (3, 3)
    assert (
        candidate.note
        == f"{verdict.text()}: within noise (±{verdict.half_width_pct:.1f} %), neither kept nor beaten"
    )


def test_a_clear_gain_is_kept_with_its_interval() -> None:
    plan, _ = _run_plan(_truth(0.10), NoiseModel(run_cv_pct=2.0, launch_cv_pct=1.0, seed=11))
    winner = plan.stages[0].candidates[0]
    assert winner.decision == "winner" and plan.best is winner
    verdict = winner.verdict
    assert verdict.outcome == "better" and verdict.gain_pct - verdict.half_width_pct > 1.0
    assert winner.note.startswith(f"{verdict.text()} over Baseline")


def test_without_measured_noise_a_single_launch_decides_as_before() -> None:
    spec = parse_spec(SPEC)
    truth = _truth(0.05)
    measured = {key: Measurement("measured", 1, value, 1.0, finished=True) for key, value in truth.items()}
    plan = plan_study(
        baseline=spec.baseline_config(), stages=spec.stages, measurements=measured, rules=Rules()
    )
    assert plan.stages[0].candidates[0].decision == "winner" and plan.stages[0].candidates[0].verdict is None
