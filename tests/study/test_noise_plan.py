"""Studies decide with their noise by default: the balanced launch order, the sequential verdicts on
launches taken side by side, Holm's shares, noise unknown, too-short results; values drawn from seeded
noise models (known truth, no runs), decided through the planner as the coordinator drives it
(:class:`perflab.study.replay.Replay`)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from perflab.engines.config import EngineConfig
from perflab.sim.noise import NoiseModel
from perflab.study.noise import study_spread
from perflab.study.progress import study_rules
from perflab.study.replay import Replay
from perflab.study.spec import parse_spec
from perflab.study.study_plan import plan_study
from perflab.study.types import Measurement, Rules

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


def _host(text: str, gains: list[float], speed: Callable[[int], float]) -> tuple[Replay, list[str]]:
    """A replay of the spec whose launches measure truth × ``speed(launch number)``; the order of the
    configurations launched is kept as labels (``B`` the baseline, ``C0``, ``C1``… the candidates)."""
    spec = parse_spec(text)
    baseline = spec.baseline_config(1, 1)
    truth = {baseline.fingerprint(): (1000.0, "B")}
    for position, (candidate, gain) in enumerate(zip(spec.stages[0].candidates, gains, strict=True)):
        changed = baseline.model_copy(update=candidate.changes)
        truth[changed.fingerprint()] = (1000.0 * (1 + gain), f"C{position}")
    order: list[str] = []

    def measure(config: EngineConfig) -> float:
        value, label = truth[config.fingerprint()]
        order.append(label)
        return value * speed(len(order) - 1)

    return Replay(spec, measure, seed=3), order


def _noise(seed: int, run_cv: float = 2.0, launch_cv: float = 1.0) -> Callable[[int], float]:
    model = NoiseModel(run_cv_pct=run_cv, launch_cv_pct=launch_cv, seed=seed)
    return lambda launch: model.speed(launch, 0)


def test_the_reference_is_launched_before_and_after_every_round_of_candidates() -> None:
    replay, order = _host(SPEC, [0.02], _noise(11))
    replay.run()
    stage = order[: order.index("B", len(order) - 2)] if order.count("B") > 2 else order
    assert stage[:5] == ["B", "C0", "B", "C0", "B"]  # R C R C R: the candidate's launches sit between
    replay, order = _host(THREE, [0.02, 0.02, 0.02], _noise(12))
    replay.run()
    assert order[:9] == ["B", "C0", "C1", "C2", "B", "C2", "C1", "C0", "B"]  # mirrored in the next round


def test_a_linear_drift_of_the_host_cancels_from_every_comparison() -> None:
    # no noise at all, the host 2 % faster at each launch: a candidate that changes nothing
    replay, _ = _host(SPEC, [0.0], lambda launch: 1.0 + 0.02 * launch)
    looks = []
    replay.run(
        each=lambda plan: looks.extend(c.verdict for s in plan.stages for c in s.candidates if c.verdict)
    )
    # at every balanced look (after the reference's launch of the round) the drift cancels exactly; a
    # look before it may only stop the candidate, never keep it
    balanced = [verdict for verdict in looks if verdict.n_reference == verdict.n_candidate + 1]
    assert balanced and all(abs(verdict.gain_pct) < 1e-9 for verdict in balanced)
    assert all(verdict.outcome != "better" for verdict in looks)
    candidate = replay.plan().stages[0].candidates[0]
    assert candidate.decision != "winner"


def test_a_candidate_that_changes_nothing_is_not_kept_whatever_the_noise_says() -> None:
    for seed in range(8):
        replay, _ = _host(SPEC, [0.0], _noise(seed))
        plan = replay.run()
        candidate = plan.stages[0].candidates[0]
        assert plan.status == "done" and plan.best is plan.baseline and plan.confirmation is None
        verdict = candidate.verdict
        assert candidate.decision in ("within_noise", "not_better") and verdict.outcome == candidate.decision
        assert candidate.note.startswith(verdict.text())  # every decision carries its interval


def test_a_clear_gain_is_kept_and_published_on_launches_that_did_not_decide_it() -> None:
    replay, order = _host(SPEC, [0.10], _noise(11))
    plan = replay.run()
    winner = plan.stages[0].candidates[0]
    assert winner.decision == "winner" and plan.best.fingerprint == winner.fingerprint
    verdict = winner.verdict
    assert verdict.outcome == "better" and verdict.gain_pct - verdict.half_width_pct > 1.0
    # after the stage: the path again on fresh launches in a mirrored block (B C0 B or C0 B C0), and the
    # figure published from their means
    confirmation = plan.confirmation
    assert confirmation is not None and confirmation.measured and confirmation.confirmed
    assert order[-3:] == order[-3:][::-1] and sorted(set(order[-3:])) == ["B", "C0"]
    assert confirmation.alpha == 1.0  # one stage: no closing test
    fresh = {label: replay.values[fp][confirmation.before[fp] :] for fp, label in _labels(replay).items()}
    assert sorted(len(values) for values in fresh.values()) == [1, 2]
    # the ratio of means over the reference's n launches: E[ratio] is × (1 + CV²/n)
    unbiased = 1 + (replay.spread.cv_pct / 100) ** 2 / len(fresh["B"])
    ratio = (sum(fresh["C0"]) / len(fresh["C0"])) / (sum(fresh["B"]) / len(fresh["B"]))
    assert verdict.confirmed_gain_pct == pytest.approx((ratio / unbiased - 1) * 100)
    assert verdict.confirmed_launches == (len(fresh["C0"]), len(fresh["B"]))
    assert verdict.published_gain_pct == verdict.confirmed_gain_pct
    assert winner.note == f"{verdict.published_text()} over Baseline"


def test_a_linear_drift_cancels_from_the_published_gain() -> None:
    # no noise, the host 2 % faster at each launch, a candidate worth +20 %: the confirmation block's
    # launches have equal mean positions, so the ratio of their means is the truth exactly
    replay, order = _host(SPEC, [0.20], lambda launch: 1.0 + 0.02 * launch)
    plan = replay.run()
    winner = plan.stages[0].candidates[0]
    confirmation = plan.confirmation
    assert winner.decision == "winner" and confirmation is not None and confirmation.measured
    positions: dict[str, list[int]] = {}
    block = order[len(order) - len(confirmation.order) :]
    for position, label in enumerate(block):
        positions.setdefault(label, []).append(position)
    assert sum(positions["B"]) / len(positions["B"]) == sum(positions["C0"]) / len(positions["C0"])
    fresh = {label: replay.values[fp][confirmation.before[fp] :] for fp, label in _labels(replay).items()}
    ratio = (sum(fresh["C0"]) / len(fresh["C0"])) / (sum(fresh["B"]) / len(fresh["B"]))
    assert ratio == pytest.approx(1.20, abs=1e-12)
    unbiased = 1 + (replay.spread.cv_pct / 100) ** 2 / len(fresh["B"])
    assert winner.verdict.confirmed_gain_pct == pytest.approx((1.20 / unbiased - 1) * 100)


def _labels(replay: Replay) -> dict[str, str]:
    spec = replay.spec
    baseline = spec.baseline_config(1, 1)
    found = {baseline.fingerprint(): "B"}
    for position, candidate in enumerate(spec.stages[0].candidates):
        found[baseline.model_copy(update=candidate.changes).fingerprint()] = f"C{position}"
    return found


def test_a_stage_shares_its_error_rate_among_its_candidates() -> None:
    spec = parse_spec(THREE)
    baseline = spec.baseline_config()
    configs = [baseline.model_copy(update=candidate.changes) for candidate in spec.stages[0].candidates]
    values = {baseline.fingerprint(): [1000.0, 1010.0, 995.0, 1005.0]}
    values.update({config.fingerprint(): [1012.0, 1010.0, 1013.0] for config in configs})
    rules = study_rules(spec, study_spread(list(values.values())))
    plan = plan_study(baseline=baseline, stages=spec.stages, measurements=_measured(values), rules=rules)
    shared = plan.stages[0].candidates[0].verdict
    alone_values = {
        baseline.fingerprint(): values[baseline.fingerprint()],
        configs[0].fingerprint(): [1030.0] * 3,
    }
    alone_values[configs[0].fingerprint()] = values[configs[0].fingerprint()]
    alone = (
        plan_study(
            baseline=baseline,
            stages=parse_spec(SPEC).stages,
            measurements=_measured(alone_values),
            rules=study_rules(parse_spec(SPEC), study_spread(list(values.values()))),
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
    assert judged.note == "one measurement, noise unknown yet: nothing is kept on it"


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
