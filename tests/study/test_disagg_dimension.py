"""Aggregated against disaggregated serving as a study dimension: a split is a stage candidate or a search
layout on the study's accelerator budget (prefill + decode = the budget), refused in one line when it does
not fit; an aggregated layout after a split replaces it."""

from __future__ import annotations

import pytest

from perflab.study.configs import CandidateConfigError, build_config, config_fields
from perflab.study.search_space import SearchSpec, layout_label
from perflab.study.spec import StudySpecError, parse_spec

SPEC = """
name: layouts
model: Qwen/Qwen3-32B
hosts: [local-sim]
baseline: {{engine: sglang, tp: 2}}
tuning_profile: {{preset: sharegpt, num_prompts: 20}}
gpus: 8
slos: {{mean_tpot_ms: 12}}
stages:
  - name: Serving layout
    candidates:
      - {{tp: 4}}
      - {{label: 3P1D, set: {{disaggregation: {split}}}}}
"""
FITS = "{prefill: {workers: 3, tp: 2}, decode: {workers: 1, tp: 2}, transfer_backend: mooncake}"
TOO_BIG = "{prefill: {workers: 3, tp: 2}, decode: {workers: 1, tp: 4}}"


def test_a_split_is_a_candidate_on_the_budget() -> None:
    spec = parse_spec(SPEC.format(split=FITS))
    baseline = config_fields(spec.baseline_config())
    split = build_config(baseline, spec.stages[0].candidates[1].changes, gpus=8)
    assert split.disaggregation is not None and split.gpus_needed == 8
    assert (split.tp, split.replicas) == (1, 1)
    assert split.disaggregation.label() == "3P1D (P TP2, D TP2)"
    back = build_config(config_fields(split), {"tp": 4}, gpus=8)
    assert back.disaggregation is None and (back.tp, back.replicas) == (4, 2)


def test_a_split_that_does_not_fit_the_budget_is_refused_on_its_line() -> None:
    with pytest.raises(StudySpecError) as caught:
        parse_spec(SPEC.format(split=TOO_BIG), name="study.yaml")
    problems = caught.value.problems
    assert len(problems) == 1
    assert problems[0].endswith(
        "stages[0].candidates[1] (3P1D): disaggregated 3P1D (P TP2, D TP4) uses 10 accelerators "
        "(prefill 6 + decode 4), but the study's budget is 8"
    )
    baseline = config_fields(parse_spec(SPEC.format(split=FITS)).baseline_config())
    with pytest.raises(CandidateConfigError, match="uses 10 accelerators"):
        build_config(
            baseline, {"disaggregation": {"prefill": {"workers": 3, "tp": 2}, "decode": {"tp": 4}}}, gpus=8
        )


def test_search_layouts_mix_aggregated_and_split() -> None:
    search = SearchSpec.model_validate(
        {
            "parallelism": [
                {"tp": 2},
                {"disaggregation": {"prefill": {"workers": 3, "tp": 2}, "decode": {"workers": 1, "tp": 2}}},
            ],
            "budget": {"launches": 4},
        }
    )
    labels = [search.from_sampler({"parallelism": index})["parallelism"] for index in range(2)]
    assert labels == ["TP2", "3P1D (P TP2, D TP2)"]  # ordered by accelerators per replica: 2, then 8
    changes = search.changes({"parallelism": "3P1D (P TP2, D TP2)"})
    assert changes["disaggregation"]["prefill"] == {"workers": 3, "tp": 2}
    assert search.changes({"parallelism": "TP2"})["disaggregation"] is None
    assert layout_label({"tp": 4, "ep": 4}) == "TP4 EP4"
    with pytest.raises(ValueError, match=r"\[0\]: disaggregation.prefill.workers: Input should be greater"):
        SearchSpec.model_validate(
            {"parallelism": [{"disaggregation": {"prefill": {"workers": 0}}}], "budget": {"launches": 4}}
        )
