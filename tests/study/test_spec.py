"""Study specs: the forms a candidate may take, profiles and objectives, and every problem of a bad
spec reported with its file, line and field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from perflab.profiles import PRESETS
from perflab.study.configs import CandidateConfigError, build_config, config_fields
from perflab.study.spec import StudySpecError, load_spec, parse_spec, spec_from_data
from perflab.study.views import STAGES_TEMPLATE, spec_from_upload
from tests.fixtures.study_data import form_spec

GOOD = """\
name: demo
model: Qwen/Qwen3-30B-A3B
hosts: [a, b]
baseline: {engine: vllm, max_model_len: 32768}
tuning_profile: {preset: sharegpt, num_prompts: 200}
validation_profiles: [short, {preset: long, title: Long 4K}]
scale: 0.5
stages:
  - name: Engine
    dimension: engine
    candidates: [sglang, trtllm]
  - name: Prefix cache
    dimension: prefix_cache
    candidates: [true]
  - name: Parallelism
    candidates:
      - {tp: 2, replicas: fill}
      - {label: TP2 EP2, set: {tp: 2, ep: 2}}
  - name: Flags
    dimension: flag
    candidates: ["--enable-chunked-prefill", "--disable-log-requests --foo bar"]
"""


def test_candidates_profiles_and_defaults() -> None:
    spec = parse_spec(GOOD, name="demo.yaml")
    engine, prefix, parallel, flags = spec.stages
    assert [(c.label, c.changes) for c in engine.candidates] == [
        ("SGLang", {"engine": "sglang"}),
        ("TensorRT-LLM", {"engine": "trtllm"}),
    ]
    assert prefix.candidates[0].changes == {"enable_prefix_caching": True}
    assert [c.label for c in parallel.candidates] == ["tp=2 · replicas=fill", "TP2 EP2"]
    assert flags.candidates[1].label == "--disable-log-requests --foo bar"
    assert spec.tuning().num_prompts == 100 and spec.tuning().name == "sharegpt"
    assert [p.title for p in spec.validation()] == ["Short Prompt", "Long 4K"]
    assert spec.validation()[0].num_prompts == PRESETS["short"].num_prompts // 2
    assert (spec.objective, spec.min_success_pct, spec.min_gain_pct) == ("total_token_throughput", 100.0, 1.0)
    assert spec.baseline_config().max_model_len == 32768
    # the stored form reads back as the same spec
    assert spec_from_data(spec.stored()) == spec


def test_changes_build_on_the_best_configuration() -> None:
    base = {"engine": "vllm", "model": "m", "extra_args": ("--a",), "env": {"X": "1"}}
    config = build_config(
        base, {"extra_args": "--b 2", "env": {"Y": "2"}, "tp": 2, "replicas": "fill"}, gpus_per_node=8
    )
    assert config.extra_args == ("--a", "--b", "2")
    assert config.env == {"X": "1", "Y": "2"}
    assert config.replicas == 4
    with pytest.raises(CandidateConfigError, match="needs 16 accelerators"):
        build_config(base, {"tp": 16}, gpus_per_node=8)
    with pytest.raises(CandidateConfigError, match="TensorRT-LLM has no performance-mode setting"):
        build_config({"engine": "vllm", "model": "m"}, {"engine": "trtllm", "performance_mode": "throughput"})


def test_every_problem_is_reported_with_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "name: bad\n"
        "model: m\n"
        "hosts: [a, a]\n"
        "baseline: {engine: vllm, tp: 0}\n"
        "tuning_profile: sharegptx\n"
        "objective: request_goodput\n"
        "slos: {p99_ttft: 3}\n"
        "stages:\n"
        "  - name: Engine\n"
        "    candidates: [vllm, {tpp: 3}]\n"
    )
    with pytest.raises(StudySpecError) as caught:
        load_spec(path)
    problems = caught.value.problems
    where = str(path)
    assert f"{where}:3: hosts: hosts must not repeat" in problems
    assert f"{where}:4: baseline: invalid configuration: tp: must be >= 1" in problems
    assert any(
        p.startswith(f"{where}:5: tuning_profile: unknown profile preset 'sharegptx'") for p in problems
    )
    assert f"{where}:7: slos: 'p99_ttft' is not a latency field (e.g. p99_ttft_ms, mean_tpot_ms)" in problems
    assert any(
        p.startswith(f"{where}:9: stages[0]: a bare value needs the stage's 'dimension'") for p in problems
    )
    assert problems == sorted(problems, key=lambda problem: int(problem.split(":")[1]))


def test_objectives_that_need_more_say_what() -> None:
    base = "name: x\nmodel: m\nhosts: [a]\nbaseline: {engine: vllm}\n"
    base += "stages: [{name: s, candidates: [{tp: 2}]}]\n"
    with pytest.raises(StudySpecError, match="needs 'goodput' SLOs"):
        parse_spec(base + "objective: request_goodput\n")
    with pytest.raises(StudySpecError, match="needs a tuning profile with a sweep"):
        parse_spec(base + "objective: max_load_within_slo\nslos: {p99_ttft_ms: 2000}\n")
    spec = parse_spec(base + "objective: request_goodput\ngoodput: {ttft_ms: 2000, tpot_ms: 50}\n")
    assert spec.tuning().goodput.as_pairs() == ["ttft:2000", "tpot:50"]
    with pytest.raises(StudySpecError, match="profile names repeat between tuning and validation: short"):
        parse_spec(base + "tuning_profile: short\nvalidation_profiles: [short]\n")


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(StudySpecError, match="missing.yaml: cannot read"):
        load_spec(tmp_path / "missing.yaml")
    with pytest.raises(StudySpecError, match=r"spec.yaml:2: not valid YAML or JSON"):
        parse_spec("name: x\n  - : [\n", name="spec.yaml")
    with pytest.raises(StudySpecError, match="a study spec is a mapping"):
        parse_spec("[1, 2]", name="spec.yaml")
    with pytest.raises(StudySpecError, match="up.yaml: not a UTF-8 text file"):
        spec_from_upload("up.yaml", b"\xff\xfe\x00")


def test_the_form_builds_a_spec_and_reports_stage_yaml_by_line() -> None:
    spec = form_spec(
        validation_profiles=["short"],
        stages_yaml="- name: Engine\n  dimension: engine\n  candidates: [sglang]\n",
        objective="output_throughput",
        scale=0.1,
        min_success_pct=95,
        min_gain_pct=2,
    )
    assert (spec.objective, spec.min_success_pct, spec.tuning().num_prompts) == ("output_throughput", 95, 100)
    with pytest.raises(StudySpecError, match=r"stages:3: not valid YAML"):
        form_spec(stages_yaml="- name: x\n  candidates: [\n")


def test_the_form_template_labels_claim_no_replica_count_their_configurations_lack() -> None:
    spec = form_spec(stages_yaml=STAGES_TEMPLATE.format(model="Qwen/Qwen3-8B"))
    base = config_fields(spec.baseline_config(8))
    for stage in spec.stages:
        for candidate in stage.candidates:
            config = build_config(base, candidate.changes, gpus_per_node=8)
            claimed = re.search(r"[x×]\s*(\d+)\b", candidate.label)
            assert claimed is None or int(claimed.group(1)) == config.replicas, (
                candidate.label,
                config.replicas,
            )


@pytest.mark.parametrize("preset", ["[short]", "{name: short}"])
def test_a_preset_that_is_not_a_name_is_a_problem_not_a_crash(preset: str) -> None:
    text = GOOD.replace(
        "tuning_profile: {preset: sharegpt, num_prompts: 200}", f"tuning_profile: {{preset: {preset}}}"
    )
    with pytest.raises(StudySpecError) as caught:
        parse_spec(text, name="spec.yaml")
    assert any(
        problem.startswith("spec.yaml:") and "unknown profile preset" in problem
        for problem in caught.value.problems
    )
