"""The accelerator budget: every configuration of a study filled to exactly ``gpus`` accelerators."""

from __future__ import annotations

import pytest

from perflab.engines.config import EngineConfig
from perflab.study.budget import fill_budget
from perflab.study.configs import CandidateConfigError, build_config
from perflab.study.spec import StudySpecError, parse_spec

SPEC = """
name: budget
model: Qwen/Qwen3-8B
hosts: [local-sim]
baseline: {engine: vllm}
tuning_profile: {preset: sharegpt, num_prompts: 20}
gpus: 8
stages:
  - name: Parallelism
    candidates: [{tp: 2}, {tp: 4, replicas: fill}, {tp: 8}]
"""


def test_replicas_fill_the_budget() -> None:
    config = EngineConfig(engine="vllm", model="m", tp=4)
    filled = fill_budget(config, 8)
    assert (filled.tp, filled.replicas, filled.gpus_needed) == (4, 2, 8)
    assert fill_budget(EngineConfig(engine="vllm", model="m", tp=2, dp=2), 8).replicas == 2
    assert fill_budget(filled, 8) is filled


@pytest.mark.parametrize(
    "tp, gpus, reason",
    [
        (
            3,
            8,
            r"TP3 uses 3 accelerators per replica, and 8 is not a whole number of replicas of it "
            r"\(8 ÷ 3 = 2.67\)",
        ),
        (8, 4, "TP8 needs 8 accelerators per replica, more than the study's budget of 4"),
    ],
)
def test_a_budget_that_cannot_be_filled_says_why(tp: int, gpus: int, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        fill_budget(EngineConfig(engine="vllm", model="m", tp=tp), gpus)


def test_every_candidate_of_a_study_uses_the_budget() -> None:
    spec = parse_spec(SPEC)
    baseline = spec.baseline_config()
    assert (baseline.tp, baseline.replicas) == (1, 8)
    for changes, replicas in (({"tp": 2}, 4), ({"tp": 4, "replicas": "fill"}, 2), ({"tp": 8}, 1)):
        config = build_config(baseline.model_dump(exclude={"gpu_ids", "port"}), changes, gpus=8)
        assert config.replicas == replicas and config.gpus_needed == 8
    with pytest.raises(CandidateConfigError, match="replicas: 3 of TP2 uses 6 accelerators"):
        build_config(baseline.model_dump(exclude={"gpu_ids", "port"}), {"tp": 2, "replicas": 3}, gpus=8)


def test_an_inexact_fill_is_refused_when_the_spec_is_read() -> None:
    with pytest.raises(StudySpecError) as caught:
        parse_spec(SPEC.replace("{tp: 8}", "{tp: 3}"))
    assert "stages[0].candidates[2] (tp=3): TP3 uses 3 accelerators per replica" in str(caught.value)


def test_the_default_budget_is_the_node_of_the_smallest_host() -> None:
    spec = parse_spec(SPEC.replace("gpus: 8\n", "").replace(", {tp: 8}", ""))
    assert spec.budget(4) == 4
    assert spec.budget(None) == 1  # nothing known of the hosts: the baseline as written
    with pytest.raises(StudySpecError, match=r"gpus: 4 \(the node of the smallest host\): .*TP3 uses 3"):
        parse_spec(SPEC.replace("gpus: 8\n", "").replace("{tp: 8}", "{tp: 3}")).budget(4)
    # a candidate larger than the whole budget fails as a candidate, as one larger than the node does
    assert parse_spec(SPEC.replace("gpus: 8\n", "")).budget(4) == 4
    with pytest.raises(StudySpecError, match="gpus: 8 accelerators per configuration, but a node has 2"):
        parse_spec(SPEC).budget(2)


def test_the_forms_defaults_on_an_8_gpu_host_put_every_configuration_on_the_node() -> None:
    from perflab.study.study_plan import plan_study
    from perflab.study.types import Measurement, Rules
    from perflab.study.views import STAGES_TEMPLATE, spec_from_form

    spec = spec_from_form(
        name="demo",
        model="Qwen/Qwen3-8B",
        hosts=["local-sim"],
        engine="vllm",
        tuning_profile="sharegpt",
        validation_profiles=[],
        stages_yaml=STAGES_TEMPLATE.format(model="Qwen/Qwen3-8B"),
        objective="total_token_throughput",
        scale=0.1,
        min_success_pct=100.0,
        min_gain_pct=1.0,
    )
    gpus = spec.budget(8)
    baseline = spec.baseline_config(8, gpus)
    assert (gpus, baseline.gpus_needed) == (8, 8)
    values = {baseline.fingerprint(): Measurement("measured", 1, 100.0, 1.0, finished=True)}
    plan = plan_study(
        baseline=baseline, stages=spec.stages, measurements=values, rules=Rules(), gpus_per_node=8, gpus=gpus
    )
    built = [candidate.config for stage in plan.stages for candidate in stage.candidates if candidate.config]
    assert built and all(config.gpus_needed == 8 for config in built)
