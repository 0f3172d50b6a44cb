"""The search's pure parts: the space spec's checks, determinism of proposals rebuilt from stored
trials, and the final pick."""

from __future__ import annotations

from dataclasses import replace

import pytest

from perflab.engines.config import EngineConfig
from perflab.study.budget import fill_budget
from perflab.study.search import Trial, pareto_front, promising, step, stop_reason, with_outcomes
from perflab.study.search_space import SearchSpec
from perflab.study.search_stage import read_record, slo_violation
from perflab.study.spec import StudySpecError, parse_spec

SPACE = {
    "knobs": {"max_num_seqs": [64, 128, 256]},
    "parallelism": [{"tp": 1}, {"tp": 2}],
    "budget": {"launches": 4},
}


def _spec(search: str, baseline: str = "{engine: vllm}", model: str = "Qwen/Qwen3-8B") -> str:
    return f"""
name: s
model: {model}
hosts: [h]
baseline: {baseline}
tuning_profile: short
stages:
  - name: Search
    search: {search}
"""


def test_space_checks_name_the_problem() -> None:
    spec = parse_spec(
        _spec("{knobs: {max_num_seqs: [64, 128]}, parallelism: [{tp: 2}], budget: {launches: 3}}")
    )
    assert spec.stages[0].search.size() == 2
    cases = {
        "{knobs: {kv_cache_dtype: [auto, fp9]}, budget: {launches: 3}}": "fp9",
        "{parallelism: [{tp: 4, ep: 4}], budget: {launches: 3}}": "mixture-of-experts",
        "{knobs: {max_num_seqs: {low: 64, high: 8}}, budget: {launches: 3}}": "below low",
        "{knobs: {max_num_seqs: [64]}, budget: {}}": "launches",
        "{knobs: {max_num_seqs: [64]}, objectives: [p99_ttft_ms], budget: {launches: 3}}": "first objective",
        "{knobs: {tp: [1, 2]}, budget: {launches: 3}}": "parallelism",
    }
    for search, expected in cases.items():
        with pytest.raises(StudySpecError, match=expected):
            parse_spec(_spec(search))
    ranged = SearchSpec.model_validate(
        {
            "knobs": {"max_num_batched_tokens": {"low": 2048, "high": 8192, "step": 2048}},
            "budget": {"launches": 2},
        }
    )
    assert ranged.size() == 4


def test_moe_layouts_need_a_model_the_catalogue_or_the_search_calls_a_mixture_of_experts() -> None:
    """Expert parallelism and attention DP: a catalogued MoE model takes them as it is, a catalogued dense
    one is refused, a model the catalogue does not list needs ``moe: true``, and ``moe`` said wins."""
    moe_layouts = "{parallelism: [{tp: 2}, {tp: 2, ep: 2}, {dp: 2}], budget: {launches: 3}%s}"
    accepted = parse_spec(_spec(moe_layouts % "", model="Qwen/Qwen3-30B-A3B"))
    assert accepted.stages[0].search.moe is None and accepted.stages[0].search.moe_layouts()
    refused = {
        ("Qwen/Qwen3-32B", ""): "mixture-of-experts models: Qwen/Qwen3-32B is a dense model",
        ("acme/house-model", ""): "set moe: true if acme/house-model is one",
        ("Qwen/Qwen3-30B-A3B", ", moe: false"): "the search says moe: false",
    }
    for (model, said), expected in refused.items():
        with pytest.raises(StudySpecError, match=expected):
            parse_spec(_spec(moe_layouts % said, model=model))
    assert parse_spec(_spec(moe_layouts % ", moe: true", model="acme/house-model")).stages[0].search.moe
    dense_only = parse_spec(_spec("{parallelism: [{tp: 1}, {tp: 2}], budget: {launches: 2}}", model="acme/m"))
    assert not dense_only.stages[0].search.moe_layouts()


def _staged(model: str, stages: str, baseline: str = "{engine: vllm, tp: 2}") -> str:
    return (
        f"name: s\nmodel: {model}\nhosts: [h]\nbaseline: {baseline}\ntuning_profile: short\nstages:\n{stages}"
    )


def test_stage_candidates_that_need_a_mixture_of_experts_are_refused_on_a_dense_model() -> None:
    """An expert-parallel or attention-DP candidate (or baseline) would measure a catalogued dense model
    twice under two names: refused before anything launches, unless a stage may change the model to one
    that is not dense."""
    expert = "  - name: P\n    candidates: [{label: TP2 EP2, set: {tp: 2, ep: 2}}]\n"
    with pytest.raises(StudySpecError, match=r"stages\[0\]\.candidates\[0\] \(TP2 EP2\): expert parallelism"):
        parse_spec(_staged("Qwen/Qwen3-32B", expert))
    with pytest.raises(
        StudySpecError, match="baseline: expert parallelism .*Qwen/Qwen3-32B is a dense model"
    ):
        parse_spec(
            _staged(
                "Qwen/Qwen3-32B",
                "  - name: B\n    dimension: max_num_seqs\n    candidates: [64]\n",
                "{engine: vllm, tp: 2, ep: 2}",
            )
        )
    assert parse_spec(_staged("Qwen/Qwen3-30B-A3B", expert)).stages[0].candidates[0].changes["ep"] == 2
    assert parse_spec(
        _staged("acme/house-model", expert)
    )  # the catalogue does not know it: the engine decides
    model_stage = "  - name: M\n    dimension: model\n    candidates: [Qwen/Qwen3-30B-A3B]\n"
    assert parse_spec(_staged("Qwen/Qwen3-32B", model_stage + expert)).models() == (
        "Qwen/Qwen3-32B",
        "Qwen/Qwen3-30B-A3B",
    )


def _build(params: dict) -> EngineConfig:
    return fill_budget(
        EngineConfig(
            engine="vllm", model="m", max_num_seqs=params["max_num_seqs"], tp=int(params["parallelism"][2:])
        ),
        2,
    )


def _measure(trials: list[Trial], value) -> list[Trial]:  # type: ignore[no-untyped-def]
    from perflab.study.search import Observation

    seen = {
        t.fingerprint: Observation("complete", None, (value(t.params),), (value(t.params),))
        for t in trials
        if t.launched
    }
    return with_outcomes(trials, seen)


def test_proposals_rebuilt_from_stored_trials_are_the_same() -> None:
    spec = SearchSpec.model_validate({**SPACE, "seed": 5, "startup_trials": 2})

    def value(params: dict) -> float:
        return params["max_num_seqs"] * (2 if params["parallelism"] == "TP2" else 1)

    trials: list[Trial] = []
    while True:
        result = step(spec, ("total_token_throughput",), _measure(trials, value), _build)
        if result.stop:
            break
        # the next proposal again, from the stored part only (a restart): the same
        stored = [Trial(**trial.stored()) for trial in result.trials]
        again = step(spec, ("total_token_throughput",), _measure(stored[:-1], value), _build)
        assert [t.stored() for t in again.trials] == [t.stored() for t in result.trials]
        trials = list(result.trials)
    assert result.stop == "budget: 4 launches of 4"
    fingerprints = [t.fingerprint for t in trials if t.launched]
    assert len(fingerprints) == len(set(fingerprints)) == 4


def test_slos_make_a_configuration_infeasible_and_budgets_stop_the_search() -> None:
    limits = {"p99_ttft_ms": 200.0, "mean_tpot_ms": 50.0}
    assert slo_violation({"p99_ttft_ms": 300.0, "mean_tpot_ms": 40.0}, limits) == 0.5
    assert slo_violation({"p99_ttft_ms": 100.0}, {"p99_ttft_ms": 200.0}) == -0.5
    hours = SearchSpec.model_validate({**SPACE, "budget": {"gpu_hours": 2.5}})
    assert stop_reason(hours, ("total_token_throughput",), [], gpu_hours=1.0) is None
    assert (
        stop_reason(hours, ("total_token_throughput",), [], gpu_hours=2.6) == "budget: 2.60 GPU-hours of 2.5"
    )


def test_two_objectives_give_a_pareto_front() -> None:
    objectives = ("total_token_throughput", "p99_ttft_ms")
    points = {0: (100.0, 50.0), 1: (120.0, 80.0), 2: (90.0, 60.0), 3: (130.0, 200.0), 4: (110.0, 90.0)}
    trials = [Trial(n, {}, str(n), status="complete", values=v, samples=v[:1]) for n, v in points.items()]
    # 2 is beaten by 0 on both; 4 by 1 on both
    assert [t.number for t in pareto_front(trials, objectives)] == [0, 1, 3]
    spec = SearchSpec.model_validate({**SPACE, "objectives": list(objectives), "startup_trials": 2})
    result = step(spec, objectives, [], _build)
    (proposal,) = result.proposed
    assert proposal.params["max_num_seqs"] in (64, 128, 256) and result.stop is None


def test_screening_under_slos_breaks_them_or_is_judged_among_feasible_screenings() -> None:
    spec = SearchSpec.model_validate({**SPACE, "screening": 0.5})
    objectives = ("total_token_throughput",)

    def screened(number: int, value: float, **fields: object) -> Trial:
        params = (
            {"max_num_seqs": 64, "parallelism": "TP1"}
            if number % 2
            else {"max_num_seqs": 128, "parallelism": "TP2"}
        )
        return Trial(number, params, f"f{number}", status="screened", screening=value, **fields)

    # fast screenings of configurations that broke an SLO set no bar for one that meets them
    fast_but_infeasible = [
        replace(
            screened(n, 1000.0 + n), status="complete", values=(3000.0,), samples=(3000.0,), violation=0.4
        )
        for n in range(4)
    ]
    slower = screened(4, 500.0)
    assert promising(spec, objectives, [*fast_but_infeasible, slower], 4)
    # a screening that breaks an SLO is not promising, however fast
    assert not promising(spec, objectives, [*fast_but_infeasible, screened(4, 5000.0, violation=0.2)], 4)
    # among feasible screenings the percentile pruner still judges
    feasible = [
        replace(screened(n, 1000.0 + n), status="complete", values=(3000.0,), samples=(3000.0,))
        for n in range(4)
    ]
    assert not promising(spec, objectives, [*feasible, slower], 4)


def test_a_stop_once_given_stands_when_a_final_pick_launch_turns_a_trial_into_a_gain() -> None:
    """With ``patience`` 2, three launches without a 1 % gain stop the search. A final-pick launch then
    brings the mean of the trial that broke its SLO within it, 20 % above the best: counted afresh, the
    last two launches hold a gain and the search would propose again. The stop it gave stands."""
    spec = SearchSpec.model_validate({**SPACE, "budget": {"launches": 6}, "patience": 2})
    objectives = ("total_token_throughput",)
    points = [{"max_num_seqs": seqs, "parallelism": "TP1"} for seqs in (64, 128, 256)]
    trials = [
        Trial(n, p, _build(p).fingerprint(), status="complete", values=(v,), samples=(v,), violation=x)
        for n, (p, v, x) in enumerate(zip(points, (100.0, 99.0, 105.0), (0.0, 0.0, 0.02), strict=True))
    ]
    stopped = step(spec, objectives, trials, _build)
    assert stopped.stop == "no gain of 1% in the last 2 launches" and stopped.proposed == []
    feasible_now = [*trials[:2], replace(trials[2], values=(120.0,), samples=(105.0, 135.0), violation=-0.01)]
    assert stop_reason(spec, objectives, feasible_now) is None
    assert step(spec, objectives, feasible_now, _build).proposed  # counted afresh, it would search on
    kept = step(spec, objectives, feasible_now, _build, stopped=stopped.stop)
    assert kept.stop == stopped.stop and kept.proposed == [] and len(kept.trials) == 3


def test_a_search_stages_record_keeps_its_stop_and_reads_a_record_without_one() -> None:
    trial = {"number": 0, "params": {"max_num_seqs": 64}, "fingerprint": "f"}
    assert read_record({"trials": [trial], "stop": "budget: 1 launches of 1"}) == (
        [trial],
        "budget: 1 launches of 1",
    )
    assert read_record({"trials": [trial], "stop": None}) == ([trial], None)
    assert read_record([trial]) == ([trial], None)
    assert read_record(()) == ([], None)
