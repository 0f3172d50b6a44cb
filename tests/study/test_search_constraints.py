"""The search under SLOs: infeasible trials told to the sampler as constraints, constrained sampling
that reaches a tight space's feasible optimum, and predictions that seed and pre-screen proposals
(perflab's own offline simulator as the predictor) without ever standing for a measurement."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from perflab.engines.config import EngineConfig
from perflab.study.budget import fill_budget
from perflab.study.predictions import cached, simulator_predictor
from perflab.study.search import Observation, Trial, rebuild, step, with_outcomes
from perflab.study.search_sampler import MEASURED, objective_observations
from perflab.study.search_space import SearchSpec
from perflab.study.search_stage import slo_violation

OBJECTIVES = ("total_token_throughput",)
SEQS = [8, 16, 32, 64, 128, 256, 512]
LAYOUTS = [{"tp": 1}, {"tp": 2}, {"tp": 4}, {"tp": 8}]


def _builder(model: str, gpus: int) -> Callable[[dict[str, Any]], EngineConfig]:
    def build(params: dict[str, Any]) -> EngineConfig:
        tp = int(params["parallelism"][2:])
        return fill_budget(
            EngineConfig(engine="vllm", model=model, max_num_seqs=params["max_num_seqs"], tp=tp), gpus
        )

    return build


def _spec(seqs: list[int], layouts: list[dict[str, int]], *, launches: int, startup: int) -> SearchSpec:
    """A search over max-num-seqs × layouts, measured in full (no screening)."""
    return SearchSpec.model_validate(
        {
            "knobs": {"max_num_seqs": seqs},
            "parallelism": layouts,
            "budget": {"launches": launches},
            "screening": 1.0,
            "startup_trials": startup,
        }
    )


def _search(spec: SearchSpec, build, measure, **extra: Any) -> list[Trial]:  # type: ignore[no-untyped-def]
    """Drive ``step`` to its stop, each launch measured by ``measure(config)`` → (throughput, tpot)."""
    seen: dict[str, Observation] = {}
    trials: list[Trial] = []
    slos = extra.get("slos", {})
    while True:
        trials = with_outcomes(trials, seen)
        result = step(spec, OBJECTIVES, trials, build, **extra)
        trials = list(result.trials)
        if result.stop:
            return with_outcomes(trials, seen)
        for trial in result.proposed:
            throughput, tpot = measure(build(dict(trial.params)))
            violation = slo_violation({"mean_tpot_ms": tpot}, slos)
            seen[trial.fingerprint] = Observation("complete", None, (throughput,), (throughput,), violation)


def test_infeasible_trials_are_told_to_the_sampler_as_constraints() -> None:
    spec = SearchSpec.model_validate(
        {"knobs": {"max_num_seqs": SEQS}, "parallelism": LAYOUTS, "budget": {"launches": 6}}
    )

    def trial(number: int, **fields: Any) -> Trial:
        params = {"max_num_seqs": SEQS[number], "parallelism": "TP2"}
        return Trial(number, params, f"f{number}", **fields)

    told = [
        trial(0, status="complete", values=(100.0,), samples=(100.0,), violation=-0.2),
        trial(1, status="complete", values=(300.0,), samples=(300.0,), violation=0.4),  # breaks an SLO
        trial(2, status="infeasible", screening=250.0, violation=0.3),  # broke one at screening
        trial(3, status="infeasible", note="CUDA out of memory"),  # did not start
        trial(4, status="pruned", screening=90.0, violation=-0.1),
    ]
    study = rebuild(spec, OBJECTIVES, told)
    frozen = study.get_trials(deepcopy=False)
    assert [t.constraints["violation"] for t in frozen] == [-0.2, 0.4, 0.3, 1.0, -0.1]
    # the objective's model learns only from measured values: the screening of a configuration that
    # broke an SLO there too (the objective beyond the limit), not the stand-in of one that never ran
    assert [t.user_attrs.get(MEASURED) for t in frozen] == [True, True, True, False, None]
    assert [t.values for t in frozen[:4]] == [[100.0], [300.0], [250.0], [100.0]]
    # the sampler's position of an ordered knob's value: 32 lies between 16 and 64
    assert frozen[2].params["max_num_seqs"] == 2


def _landscape(config: EngineConfig) -> tuple[float, float]:
    """A node's throughput and TPOT: a wider batch decodes more per step and slower per token; tensor
    parallelism speeds each token up, fewer replicas share the node."""
    tpot = 3.0 + 0.08 * config.max_num_seqs / config.tp**0.8
    return config.replicas * config.max_num_seqs * 1000.0 / tpot, tpot


def test_constrained_sampling_reaches_the_feasible_optimum_of_a_tight_space() -> None:
    build = _builder("Qwen/Qwen3-32B", 8)
    points = [
        {"max_num_seqs": seqs, "parallelism": f"TP{layout['tp']}"} for seqs in SEQS for layout in LAYOUTS
    ]
    figures = {tuple(point.items()): _landscape(build(point)) for point in points}
    limit = 3.3
    feasible = [value for value, tpot in figures.values() if tpot <= limit]
    assert 0 < len(feasible) / len(figures) < 0.15  # a tight space: under 15 % of it meets the SLO
    optimum = max(feasible)
    budget = 8  # under 30 % of the 28 cells
    for seed in range(5):
        spec = SearchSpec.model_validate(
            {
                "knobs": {"max_num_seqs": SEQS},
                "parallelism": LAYOUTS,
                "budget": {"launches": budget},
                "screening": 1.0,
                "startup_trials": 3,
                "seed": seed,
            }
        )
        trials = _search(spec, build, _landscape, slos={"mean_tpot_ms": limit})
        launched = [trial for trial in trials if trial.launched]
        assert len(launched) == budget
        found = [trial.values[0] for trial in launched if trial.violation <= 0]
        assert found and max(found) >= 0.98 * optimum, f"seed {seed}: best feasible {max(found, default=0)}"


def test_predictions_seed_the_search_best_predicted_first() -> None:
    model, gpus = "meta-llama/Llama-3.1-8B-Instruct", 2
    build = _builder(model, gpus)
    predict = cached(simulator_predictor("H100", 512, 128, 64))
    seqs = [16, 64, 256]
    layouts = [{"tp": 1}, {"tp": 2}]
    spec = _spec(seqs, layouts, launches=2, startup=2)
    points = [{"max_num_seqs": s, "parallelism": f"TP{layout['tp']}"} for s in seqs for layout in layouts]
    predicted = {tuple(sorted(p.items())): predict(build(p)) for p in points}
    # an SLO that two of the six configurations are predicted to meet
    tpots = sorted(prediction.values["mean_tpot_ms"] for prediction in predicted.values())
    slos = {"mean_tpot_ms": (tpots[1] + tpots[2]) / 2}
    meeting = [p for p, prediction in predicted.items() if prediction.meets(slos)]
    ranked = sorted(meeting, key=lambda p: (-predicted[p].values["total_token_throughput"], repr(p)))
    assert len(ranked) == 2

    def measure(config: EngineConfig) -> tuple[float, float]:
        return 1000.0, 10.0

    trials = _search(spec, build, measure, predict=predict, slos=slos)
    launched = [trial.point for trial in trials if trial.launched]
    assert launched == ranked[:2]
    # a prediction is never a measurement: every launched trial carries the measured value
    assert all(trial.values == (1000.0,) for trial in trials if trial.launched)


def test_predicted_infeasible_configurations_are_not_launched() -> None:
    # Llama-3.1-70B in bf16 does not fit one H200: the simulator predicts TP1 out of memory
    model, gpus = "meta-llama/Llama-3.1-70B-Instruct", 2
    build = _builder(model, gpus)
    predict = cached(simulator_predictor("H200", 512, 128, 32))
    spec = SearchSpec.model_validate(
        {
            "knobs": {"max_num_seqs": [64, 128, 256]},
            "parallelism": [{"tp": 1}, {"tp": 2}],
            "budget": {"launches": 6},
            "screening": 1.0,
            "startup_trials": 1,
        }
    )
    trials = _search(spec, build, lambda config: (1000.0, 10.0), predict=predict)
    assert trials[-1].number == len(trials) - 1
    screened = [trial for trial in trials if trial.prescreened]
    assert screened and all(trial.params["parallelism"] == "TP1" for trial in screened)
    assert all(not trial.launched and trial.values is None for trial in screened)
    assert all(trial.status == "infeasible" and "predicted infeasible" in trial.note for trial in screened)
    assert {trial.params["parallelism"] for trial in trials if trial.launched} == {"TP2"}
    # the stored trial keeps why it was not launched (a resumed search does not launch it either)
    assert Trial(**screened[0].stored()).prescreened == screened[0].prescreened


def test_pruned_screenings_teach_the_objective_model_where_the_space_is_poor() -> None:
    # one ordered knob: two configurations measured in full, alike, in the middle; a pruned one below
    # them whose screening was a tenth of theirs. The untried points beside the middle pair are alike
    # but for the pruned one: the sampler must keep away from its side of the space.
    seqs = [8, 16, 32, 64, 128, 256, 512]
    spec = SearchSpec.model_validate(
        {
            "knobs": {"max_num_seqs": seqs},
            "parallelism": [{"tp": 1}],
            "budget": {"launches": 7},
            "screening": 0.25,
            "startup_trials": 2,
        }
    )
    build = _builder("Qwen/Qwen3-8B", 1)

    def trial(number: int, index: int, **fields: Any) -> Trial:
        params = {"max_num_seqs": seqs[index], "parallelism": "TP1"}
        return Trial(number, params, build(params).fingerprint(), **fields)

    told = [
        trial(0, 3, status="complete", screening=100.0, values=(100.0,), samples=(100.0,)),
        trial(1, 4, status="complete", screening=100.0, values=(100.0,), samples=(100.0,)),
        trial(2, 1, status="pruned", screening=10.0),
    ]
    proposed = step(spec, OBJECTIVES, told, build).proposed
    assert [trial.params["max_num_seqs"] for trial in proposed] in ([256], [512])


def test_a_pruned_screening_is_learned_on_the_full_profiles_scale() -> None:
    # the screenings of the two configurations measured in full were half their full values: a pruned
    # configuration's screening of 40 stands for 80 on the full profile
    spec = SearchSpec.model_validate(
        {"knobs": {"max_num_seqs": SEQS}, "parallelism": [{"tp": 1}], "budget": {"launches": 7}}
    )

    def trial(number: int, **fields: Any) -> Trial:
        return Trial(number, {"max_num_seqs": SEQS[number], "parallelism": "TP1"}, f"f{number}", **fields)

    told = [
        trial(0, status="complete", screening=50.0, values=(100.0,), samples=(100.0,)),
        trial(1, status="complete", screening=60.0, values=(120.0,), samples=(120.0,)),
        trial(2, status="pruned", screening=40.0),
        trial(3, status="infeasible", note="CUDA out of memory"),  # measured nothing: not learned
        trial(4, status="infeasible", screening=90.0, violation=0.3),  # broke an SLO at its screening
        trial(5, status="infeasible", screening=95.0, violation=0.4),
    ]
    frozen = rebuild(spec, OBJECTIVES, told).get_trials(deepcopy=False)
    measured = [t for t in frozen if t.user_attrs.get(MEASURED)]
    found = objective_observations(measured, frozen)
    # the screening that broke an SLO is learned as it is, and takes no part in the scale
    assert [(params["max_num_seqs"], value) for params, value in found] == [
        (0, 100.0),
        (1, 120.0),
        (4, 90.0),
        (5, 95.0),
        (2, 80.0),
    ]
    # with no trial measured in full yet, a screening is taken as it is
    alone = objective_observations([], frozen)
    assert [(params["max_num_seqs"], value) for params, value in alone] == [(2, 40.0)]


def test_configurations_measured_before_the_search_are_told_before_its_first_proposal() -> None:
    # the baseline is a point of the space: the sampler learns its launches before it proposes, and
    # it takes the place of one of the random first proposals
    build = _builder("Qwen/Qwen3-32B", 8)
    spec = _spec(SEQS, LAYOUTS, launches=6, startup=2)
    baseline = build({"max_num_seqs": 256, "parallelism": "TP1"}).fingerprint()
    earlier = {baseline: Observation("complete", None, (5000.0,), (5000.0, 5100.0), 0.8)}
    first = step(spec, OBJECTIVES, [], build, earlier=earlier)
    reused, proposal = first.trials
    assert reused.earlier and not reused.launched and reused.fingerprint == baseline
    assert (reused.status, reused.values, reused.violation) == ("complete", (5000.0,), 0.8)
    assert proposal.launched and proposal.status == "pending" and proposal.fingerprint != baseline
    # told to the sampler as a measured trial: with it, one random proposal completes the startup
    study = rebuild(spec, OBJECTIVES, [reused])
    assert [t.values for t in study.get_trials(deepcopy=False)] == [[5000.0]]
    # a search that has trials already (resumed from its stored ones) adds none
    done = replace(proposal, number=0, status="complete", values=(4000.0,), samples=(4000.0,))
    again = step(spec, OBJECTIVES, [done], build, earlier=earlier)
    assert again.trials[0] == done


def test_a_layout_is_a_point_of_its_degrees_of_parallelism() -> None:
    def embedded(layouts: list[dict[str, Any]]) -> dict[str, np.ndarray]:
        spec = SearchSpec.model_validate({"parallelism": layouts, "budget": {"launches": 4}, "moe": True})
        rows = spec.embeddings()["parallelism"]
        labels = [spec.from_sampler({"parallelism": index})["parallelism"] for index in range(len(rows))]
        return dict(zip(labels, np.array(rows), strict=True))

    # one degree: the positions the sampler would see, whatever order the spec lists the layouts in
    dense = embedded([{"tp": 8}, {"tp": 1}, {"tp": 4}, {"tp": 2}])
    assert {label: row.tolist() for label, row in dense.items()} == {
        "TP1": [0.0],
        "TP2": [1 / 3],
        "TP4": [2 / 3],
        "TP8": [1.0],
    }
    # two degrees: TP2 lies as near TP1 as TP2 EP2 does, not between them (as positions would put it)
    moe = embedded([{"tp": 1}, {"tp": 2}, {"tp": 2, "ep": 2}])

    def distance(a: str, b: str) -> float:
        return float(np.linalg.norm(moe[a] - moe[b]))

    assert distance("TP2", "TP1") == distance("TP2", "TP2 EP2") == 1.0
    assert distance("TP1", "TP2 EP2") == pytest.approx(math.sqrt(2.0))
    # attention-DP and a prefill/decode split each add their own axes; every coordinate lies in [0, 1]
    mixed = embedded(
        [
            {"tp": 2},
            {"tp": 2, "dp": 4, "ep": 8, "dp_attention": True},
            {"disaggregation": {"prefill": {"workers": 3, "tp": 2}, "decode": {"workers": 1, "tp": 2}}},
        ]
    )
    rows = np.array(list(mixed.values()))
    assert len({tuple(row) for row in rows}) == 3 and rows.min() == 0.0 and rows.max() == 1.0
    assert embedded([{"tp": 2}])["TP2"].tolist() == [0.0]  # one layout: nothing to tell apart


def test_a_moe_search_reaches_a_tight_optimum_that_lies_off_the_layouts_order() -> None:
    # Qwen3-30B-A3B on 2 × H200 (the simulator's figures, as made-3 of benchmarks/search_efficiency.py):
    # TP2 with few sequences meets a tight TPOT limit, TP2 EP2 misses it by a few per cent and TP1 by a
    # third. Ordered by accelerators, then expert parallelism, TP2 would lie between TP1 and TP2 EP2, and
    # the constraint's model would try the near misses of TP2 EP2 first (6 of 10 seeds reached the
    # optimum): as a point of its degrees, TP2 is one step from each.
    seqs, batched = [16, 32, 256, 512], [1024, 4096]

    def build(params: dict[str, Any]) -> EngineConfig:
        degrees = {word[:2].lower(): int(word[2:]) for word in params["parallelism"].split()}
        config = EngineConfig(
            engine="vllm",
            model="Qwen/Qwen3-30B-A3B",
            max_num_seqs=params["max_num_seqs"],
            max_num_batched_tokens=params["max_num_batched_tokens"],
            tp=degrees["tp"],
            ep=degrees.get("ep", 1),
        )
        return fill_budget(config, 2)

    predict = cached(simulator_predictor("H200", 1024, 256, 256))

    def measure(config: EngineConfig) -> tuple[float, float]:
        figures = predict(config)
        assert figures is not None and figures.values
        return figures.values["total_token_throughput"], figures.values["mean_tpot_ms"]

    points = [
        {"max_num_seqs": s, "max_num_batched_tokens": b, "parallelism": layout}
        for s in seqs
        for b in batched
        for layout in ("TP1", "TP2", "TP2 EP2")
    ]
    figures = [measure(build(point)) for point in points]
    tpots = sorted(tpot for _, tpot in figures)
    slos = {"mean_tpot_ms": math.sqrt(tpots[1] * tpots[2])}  # two of the 24 cells meet it
    optimum = max(value for value, tpot in figures if tpot <= slos["mean_tpot_ms"])
    baseline = build({"max_num_seqs": 256, "max_num_batched_tokens": 4096, "parallelism": "TP1"})
    value, tpot = measure(baseline)
    earlier = {
        baseline.fingerprint(): Observation(
            "complete", None, (value,), (value,), slo_violation({"mean_tpot_ms": tpot}, slos)
        )
    }
    reached = 0
    for seed in range(10):
        spec = SearchSpec.model_validate(
            {
                "knobs": {"max_num_seqs": seqs, "max_num_batched_tokens": batched},
                "parallelism": [{"tp": 1}, {"tp": 2}, {"tp": 2, "ep": 2}],
                "budget": {"launches": 6},  # a quarter of the grid
                "screening": 1.0,
                "startup_trials": 2,
                "seed": seed,
                "moe": True,
            }
        )
        trials = _search(spec, build, measure, slos=slos, earlier=earlier)
        found = [trial.values[0] for trial in trials if trial.launched and trial.violation <= 0]
        reached += bool(found) and max(found) >= 0.98 * optimum
    assert reached >= 9
