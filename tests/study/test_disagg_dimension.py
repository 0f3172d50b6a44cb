"""Aggregated against disaggregated serving as a study dimension: a split is a stage candidate or a search
layout on the study's accelerator budget (prefill + decode = the budget), refused in one line when it does
not fit; an aggregated layout after a split replaces it. MoE layouts (vLLM's -dp ranks with or without
expert parallel, SGLang's attention data parallel) are search layouts within the budget too, the vLLM
ones read by vLLM 0.32's own serve parser."""

from __future__ import annotations

import json
import subprocess

import pytest

from perflab.engines import get_adapter
from perflab.study.budget import fill_budget
from perflab.study.configs import CandidateConfigError, build_config, config_fields, serve_command
from perflab.study.search_space import SearchSpec, layout_label
from perflab.study.spec import StudySpecError, parse_spec
from tests.fixtures.real_vllm import require_real_vllm, vllm_python

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


def _built(engine: str, layouts: list[dict]) -> list:
    """Each layout of a MoE search space built as the search builds a point, on a budget of 8."""
    search = SearchSpec.model_validate({"parallelism": layouts, "moe": True, "budget": {"launches": 4}})
    base = {"engine": engine, "model": "Qwen/Qwen3-30B-A3B"}
    built = []
    for layout in layouts:
        changes = {**search.changes({"parallelism": layout_label(layout)}), "replicas": 1}
        built.append(fill_budget(build_config(base, changes, gpus_per_node=8), 8))
    return built


VLLM_MOE = [{"dp": 8, "ep": 8}, {"tp": 2, "dp": 4, "ep": 8}, {"tp": 2, "dp": 4}, {"dp": 2, "ep": 2}]


def test_vllm_moe_layouts_are_search_layouts_within_the_budget() -> None:
    configs = _built("vllm", VLLM_MOE)
    assert [(c.tp, c.dp, c.ep, c.replicas) for c in configs] == [
        (1, 8, 8, 1),
        (2, 4, 8, 1),
        (2, 4, 1, 1),
        (1, 2, 2, 4),
    ]
    assert all(config.gpus_needed == 8 and config.dp_attention is None for config in configs)
    commands = [serve_command(config) for config in configs]
    assert commands[0].endswith("-dp 8 --enable-expert-parallel")
    assert commands[1].endswith("-tp 2 -dp 4 --enable-expert-parallel")
    assert commands[2].endswith("-tp 2 -dp 4")
    # vLLM's expert parallel spans every tp×dp rank: another size is refused when the point is built
    with pytest.raises(CandidateConfigError, match=r"vLLM: ep must be 1 or TP×DP = 4"):
        _built("vllm", [{"dp": 4, "ep": 2}])
    with pytest.raises(CandidateConfigError, match="vLLM runs the -dp ranks of a MoE model as attention"):
        _built("vllm", [{"dp": 8, "ep": 8, "dp_attention": True}])


def test_sglang_moe_layouts_name_attention_dp_and_fill_the_budget() -> None:
    layouts = [{"tp": 2, "dp": 4, "ep": 8, "dp_attention": True}, {"dp": 2, "dp_attention": True}, {"tp": 8}]
    assert [layout_label(layout) for layout in layouts] == [
        "TP2 DP4 EP8 attention-DP",
        "DP2 attention-DP",
        "TP8",
    ]
    expert, attention, tensor = _built("sglang", layouts)
    assert serve_command(expert).endswith("--tp-size 8 --attn-dp-size 4 --ep-size 8")
    assert (attention.tp, attention.dp, attention.replicas, attention.dp_attention) == (1, 2, 4, True)
    assert (tensor.tp, tensor.dp_attention) == (8, None)
    assert SearchSpec.model_validate(
        {"parallelism": [{"dp": 2, "dp_attention": True}], "budget": {"launches": 2}}
    ).moe_layouts()
    with pytest.raises(ValueError, match=r"\[0\]: dp_attention is true or false"):
        SearchSpec.model_validate(
            {"parallelism": [{"dp": 2, "dp_attention": 1}], "moe": True, "budget": {"launches": 2}}
        )


VLLM_PARALLEL = """
import json, sys
from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.utils.argparse_utils import FlexibleArgumentParser
top = FlexibleArgumentParser(prog="vllm")
ServeSubcommand().subparser_init(top.add_subparsers(dest="subparser"))
found = []
for line in sys.stdin.read().splitlines():
    ns = top.parse_args(json.loads(line))
    found.append([ns.tensor_parallel_size, ns.data_parallel_size, ns.enable_expert_parallel])
print(json.dumps(found))
"""


@pytest.mark.real_engine
@pytest.mark.parser_only
def test_vllms_own_parser_reads_the_moe_layouts_the_search_builds() -> None:
    require_real_vllm()
    configs = _built("vllm", VLLM_MOE)
    argvs = [get_adapter("vllm").serve_argv(config, port=8000)[1:] for config in configs]
    completed = subprocess.run(
        [str(vllm_python()), "-c", VLLM_PARALLEL],
        input="\n".join(json.dumps(argv) for argv in argvs),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    parsed = json.loads(completed.stdout.strip().splitlines()[-1])
    # --enable-expert-parallel makes every tp×dp rank an expert-parallel rank (ep = tp × dp)
    assert (
        parsed
        == [[c.tp, c.dp, c.ep > 1] for c in configs]
        == [
            [1, 8, True],
            [2, 4, True],
            [2, 4, False],
            [1, 2, True],
        ]
    )
