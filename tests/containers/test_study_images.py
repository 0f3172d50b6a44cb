"""A study stage that compares images (engine versions) as a dimension: the spec reads it, the planner
launches one configuration per image and keeps the faster one; a bad reference is a spec problem."""

from __future__ import annotations

import pytest

from perflab.study import parse_spec
from perflab.study.spec import StudySpecError
from perflab.study.study_plan import plan_study
from perflab.study.types import Measurement, Rules

SPEC = """\
name: vLLM v0.10 vs v0.11 on H100
model: Qwen/Qwen3-8B
hosts: [gpu-a]
baseline: {engine: vllm, image: "vllm/vllm-openai:v0.10.2"}
gpus: 1
tuning_profile: short
stages:
  - name: Engine version
    dimension: image
    candidates: ["vllm/vllm-openai:v0.11.0"]
"""


def test_a_stage_compares_two_images_and_keeps_the_faster() -> None:
    """The stage's mechanics on one measurement each (the rule for imported write-ups): the verdicts a
    study makes on its measured noise are tested in tests/study/test_noise_plan.py."""
    rules = Rules(measures_noise=False)
    spec = parse_spec(SPEC, name="study.yaml")
    baseline = spec.baseline_config()
    assert baseline.image == "vllm/vllm-openai:v0.10.2"
    first = plan_study(baseline=baseline, stages=spec.stages, measurements={}, rules=rules)
    assert first.wanted == (baseline,)
    done = Measurement("measured", value=1000.0, success_rate=1.0, finished=True)
    measured = {baseline.fingerprint(): done}
    second = plan_study(baseline=baseline, stages=spec.stages, measurements=measured, rules=rules)
    (newer,) = second.wanted
    assert newer.image == "vllm/vllm-openai:v0.11.0" and newer.fingerprint() != baseline.fingerprint()
    measured[newer.fingerprint()] = Measurement("measured", value=1200.0, success_rate=1.0, finished=True)
    decided = plan_study(baseline=baseline, stages=spec.stages, measurements=measured, rules=rules)
    assert decided.best.config.image == "vllm/vllm-openai:v0.11.0"
    assert decided.best.label == "image=vllm/vllm-openai:v0.11.0"


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        (
            'candidates: ["vllm/vllm-openai:v0.11.0"]',
            'candidates: ["--privileged"]',
            "study.yaml:10: stages[0].candidates[0].changes: image '--privileged' is not an image reference",
        ),
        (
            'candidates: ["vllm/vllm-openai:v0.11.0"]',
            "candidates: [11]",
            "study.yaml:10: stages[0].candidates[0].changes: image must be an image reference",
        ),
        (
            'image: "vllm/vllm-openai:v0.10.2"',
            'image: "Vllm/Openai"',
            "study.yaml:4: baseline: invalid configuration: image: image 'Vllm/Openai' is not an image",
        ),
    ],
)
def test_a_bad_image_is_a_spec_problem_with_its_line(old: str, new: str, problem: str) -> None:
    with pytest.raises(StudySpecError) as caught:
        parse_spec(SPEC.replace(old, new), name="study.yaml")
    assert caught.value.problems[0].startswith(problem)
