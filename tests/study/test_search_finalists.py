"""The search's final pick: finalists confirmed on launches of their own, measured (with their
reference) until decided, kept over the reference only by those launches, and separated by verdicts."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from perflab.study.finalists import MAX_FINALISTS, final_pick
from perflab.study.noise import StudySpread, study_spread
from perflab.study.search import Trial
from perflab.study.search_space import SearchSpec
from perflab.study.types import Measurement, Rules

SPEC = SearchSpec.model_validate(
    {"knobs": {"max_num_seqs": [64, 128, 256, 512]}, "budget": {"launches": 4}, "max_measurements": 3}
)
OBJECTIVES = ("total_token_throughput",)


def _trial(
    number: int, samples: tuple[float, ...], *, accelerators: int = 8, violation: float = 0.0
) -> Trial:
    return Trial(
        number,
        {"max_num_seqs": 64 * 2**number},
        f"config-{number}",
        status="complete",
        values=(sum(samples) / len(samples),),
        samples=samples,
        violation=violation,
        accelerators=accelerators,
        batch=64 * 2**number,
    )


def _reference(values: tuple[float, ...], *violations: str) -> Measurement:
    return Measurement(
        "measured", value=sum(values) / len(values), values=values, finished=True, violations=violations
    )


def _conclude(
    first: dict[int, float],
    truth: Callable[[int, int], float],
    reference: tuple[float, ...],
    *,
    build: Callable[[dict[int, tuple[float, ...]]], list[Trial]] | None = None,
    spread: StudySpread | None = None,
) -> tuple[object, dict[int, tuple[float, ...]], tuple[float, ...], list[object]]:
    """Drive the final pick to its end: each asked launch of trial ``n`` (its ``k``-th) measures
    ``truth(n, k)``, the reference's ``truth(-1, k)``. ``build`` makes the trials from every trial's
    launches so far (by default a complete, feasible trial each); ``spread`` is the study's (by default
    pooled from the launches). Returns the pick, every trial's launches, the reference's launches and
    every intermediate pick."""
    samples = {number: (value,) for number, value in first.items()}
    seen = []
    while True:
        trials = build(samples) if build else [_trial(number, values) for number, values in samples.items()]
        groups = [*samples.values(), reference]
        rules = Rules(min_gain=0.01, spread=spread or study_spread(groups))
        pick = final_pick(
            SPEC, OBJECTIVES, trials, rules=rules, reference=_reference(reference), reference_label="Baseline"
        )
        seen.append(pick)
        if not pick.waiting:
            return pick, samples, reference, seen
        assert len(seen) < 20, "the final pick never ends"
        for number in pick.order:  # the round's launches, in its order (None: the reference)
            if number is None:
                reference = (*reference, truth(-1, len(reference)))
            else:
                launches = samples.get(number, ())
                samples[number] = (*launches, truth(number, len(launches)))


def test_a_pick_on_one_launch_against_a_spread_on_one_df_is_measured_until_decided() -> None:
    # the search saw +981.9 % on one launch, the baseline two launches: a spread on 1 df
    jitter = [1.0, 1.004, 0.997, 1.002, 0.999, 1.003]

    def truth(number: int, launch: int) -> float:
        base = {-1: 100.0, 0: 1080.0, 1: 150.0, 2: 120.0}[number]
        return base * jitter[launch % len(jitter)]

    pick, samples, reference, seen = _conclude({0: 1081.9, 1: 160.0, 2: 118.0}, truth, (100.0, 100.4))
    # first the finalists are confirmed, nothing is dropped on the one-launch comparison
    assert seen[0].remeasure == (0, 1, 2) and seen[0].trial is None and not seen[0].kept
    # the pick is the truly best configuration, kept over the baseline on its confirmation launches
    assert pick.trial is not None and pick.trial.number == 0
    kept = pick.decision
    assert kept is not None and kept.outcome == "better" and kept.verdict is not None
    assert kept.verdict.n_candidate == len(samples[0]) - 1  # the launch that selected it is left out
    assert all(len(values) >= 2 for values in samples.values())
    assert len(pick.finalists) == MAX_FINALISTS


def test_a_close_call_launches_the_finalist_and_the_reference_to_the_same_count() -> None:
    wobble = [1.0, 1.03, 0.97, 1.02, 0.98, 1.01]

    def truth(number: int, launch: int) -> float:
        return {-1: 100.0, 0: 104.0}[number] * wobble[launch % len(wobble)]

    pick, samples, reference, seen = _conclude({0: 107.0}, truth, (100.0, 97.0))
    # every round launches the finalist beside the reference, and it is judged on the reference's
    # launches of the same rounds: as many as its confirmation launches, not the two before
    assert all(step.reference_again for step in seen if step.remeasure)
    judged = pick.kept[0].verdict
    assert judged.n_candidate == judged.n_reference == len(samples[0]) - 1 == len(reference) - 2
    # it ends decided: kept, or not kept after every confirmation launch allowed
    if pick.trial is None:
        assert len(samples[0]) - 1 == SPEC.max_measurements
        assert "no finalist beat Baseline" in pick.reason
    else:
        assert pick.decision.outcome == "better"


def test_a_lucky_first_launch_is_not_kept_on_its_confirmations() -> None:
    # best of the search by its first launch (+30 %), but its confirmations equal the baseline's
    flat = [100.0, 100.5, 99.5, 100.2]

    def truth(number: int, launch: int) -> float:
        return flat[launch % len(flat)]

    pick, samples, _, _ = _conclude({0: 130.0}, truth, (100.0, 100.4))
    assert pick.trial is None
    assert pick.kept[0].outcome in ("not_better", "within_noise")
    assert "no finalist beat Baseline" in pick.reason


def test_finalists_against_a_reference_that_breaks_an_slo_are_separated_by_verdicts() -> None:
    trials = [
        _trial(0, (200.0, 201.0, 199.0, 200.5), accelerators=8),
        _trial(1, (200.2, 200.0, 200.4, 199.8), accelerators=4),
        _trial(2, (150.0, 151.0)),
        _trial(3, (400.0,), violation=0.3),  # breaks an SLO: never a finalist
    ]
    spread = study_spread([trial.samples for trial in trials])
    pick = final_pick(
        SPEC,
        OBJECTIVES,
        trials,
        rules=Rules(min_gain=0.01, spread=spread),
        reference=_reference((300.0, 301.0), "mean_tpot_ms 12 > 10"),
        reference_label="Baseline",
    )
    assert pick.finalists == (1, 0, 2)
    assert all(decision.outcome == "better" for decision in pick.kept.values())
    # 0 and 1 are equivalent (the interval lies within the 1 % minimum gain): the cheaper is picked
    assert not pick.waiting and pick.trial.number == 1
    assert "equivalent to trial" in pick.reason and "cheaper" in pick.reason


def test_a_finalist_on_a_spread_of_too_few_launches_has_no_verdict_yet_and_is_measured_again() -> None:
    # one confirmation launch and the reference's two: a spread on 2 degrees of freedom gives no look
    trials = [_trial(0, (130.0, 129.0))]
    reference = (100.0, 100.5)
    rules = Rules(min_gain=0.01, spread=study_spread([trials[0].samples, reference]))
    pick = final_pick(
        SPEC, OBJECTIVES, trials, rules=rules, reference=_reference(reference), reference_label="Baseline"
    )
    assert pick.trial is None and pick.remeasure == (0,) and pick.reference_again
    assert pick.kept[0].outcome == "undecided"
    assert pick.reason.startswith("no verdict yet against Baseline, measuring again")
    assert "no verdict yet: the spread rests on 4 launches" in pick.reason


def _on_a_drifting_host(drift: float) -> tuple[object, list[object]]:
    """The final pick of three finalists as fast as the reference (a small fixed jitter each launch) on a
    host whose speed grows by ``drift`` of its first launch's at every launch: the reference's two
    launches, then the search's twelve, then the pick's rounds in the order it asks for them, under a
    known spread of 1 % (``noise_cv_pct``)."""
    spec = SPEC.model_copy(update={"noise_cv_pct": 1.0})
    jitter = [1.0, 1.004, 0.997, 1.002, 0.999, 1.003, 0.998]
    clock = iter(range(100))

    def launch() -> float:
        at = next(clock)
        return 100.0 * (1.0 + drift * at) * jitter[at % len(jitter)]

    reference = (launch(), launch())
    search = [launch() for _ in range(12)]
    samples = {0: (search[-1],), 1: (search[-2],), 2: (search[-4],)}  # the latest read fastest
    seen = []
    while True:
        trials = [_trial(number, values) for number, values in samples.items()]
        rules = Rules(min_gain=0.01, spread=study_spread([*samples.values(), reference]))
        pick = final_pick(
            spec, OBJECTIVES, trials, rules=rules, reference=_reference(reference), reference_label="Baseline"
        )
        seen.append(pick)
        if not pick.waiting:
            return pick, seen
        assert len(seen) < 20, "the final pick never ends"
        for number in pick.order:
            if number is None:
                reference = (*reference, launch())
            else:
                samples[number] = (*samples[number], launch())


def test_each_round_launches_the_reference_beside_the_finalists_in_an_order_that_mirrors() -> None:
    pick, seen = _on_a_drifting_host(0.01)
    # R F1 F2 F3, then F3 F2 F1 R: over the two rounds every configuration's mean launch position is
    # the same, so the drift cancels from each comparison
    assert seen[0].order == (None, 0, 1, 2)
    assert seen[1].order == (2, 1, 0, None)
    # each finalist is judged on the reference's launches of the same rounds, not its launches before
    for decision in pick.kept.values():
        assert decision.verdict is not None
        assert decision.verdict.n_candidate == decision.verdict.n_reference == 2


@pytest.mark.parametrize("drift", [0.005, 0.01, 0.02])
def test_a_drift_alone_is_not_kept_as_a_gain(drift: float) -> None:
    # every configuration as fast as the reference: the finalists, launched after the search, read
    # 7-30 % faster than the reference's launches before it; beside it in mirrored rounds, ~0 %
    pick, _ = _on_a_drifting_host(drift)
    assert pick.trial is None
    assert "no finalist beat Baseline" in pick.reason
    for decision in pick.kept.values():
        assert abs(decision.verdict.gain_pct) < 1.0


def _screened_out(number: int, screening: float, violation: float) -> Trial:
    """A trial whose screening broke an SLO by ``violation`` (its full profile never ran)."""
    return Trial(
        number,
        {"max_num_seqs": 64 * 2**number},
        f"config-{number}",
        status="infeasible",
        screening=screening,
        violation=violation,
        accelerators=8,
        batch=64 * 2**number,
    )


@pytest.mark.parametrize(("past", "launches"), [(0.035, 2), (0.02, 4)])
def test_a_trial_just_past_an_slo_is_launched_until_the_mean_of_its_launches_settles_it(
    past: float, launches: int
) -> None:
    """With a known 2 % launch spread a trial past an SLO by at most 4 % of its limit on one launch is
    borderline, and by at most 4 % / √n on the mean of n launches: 3.5 % past is settled by two launches
    (beyond 2.8 %), 2 % past only when its launches run out (the search's and three confirmations)."""
    jitter = [1.0, 1.004, 0.997, 1.002, 0.999, 1.003]
    throughput = {-1: 100.0, 0: 150.0, 1: 120.0, 3: 152.0}
    # how far past the SLO each was on its launch during the search (0 only had a screening, 3 % past)
    searched = {1: -0.2, 3: 0.03}
    # and truly: 0 is within it (its screening was unlucky), 3 is past it
    excess = {0: -0.01, 1: -0.2, 3: past}

    def truth(number: int, launch: int) -> float:
        return throughput[number] * jitter[launch % len(jitter)]

    def build(samples: dict[int, tuple[float, ...]]) -> list[Trial]:
        """The trials, each judged on its search launch until the pick launches it, then on the mean
        of its launches."""
        trials = [_screened_out(2, 200.0, 0.10)]  # past the SLO by five spreads: never a finalist
        if 0 not in samples:
            trials.append(_screened_out(0, 150.0, 0.03))
        for number, values in samples.items():
            violation = searched[number] if len(values) == 1 and number in searched else excess[number]
            trials.append(_trial(number, values, violation=violation))
        return trials

    pick, samples, _, seen = _conclude(
        {1: 120.0, 3: 152.0}, truth, (100.0, 100.4), build=build, spread=StudySpread.given(2.0)
    )
    # the screened-out trial and the one launch past the SLO are finalists beside the feasible one
    assert seen[0].finalists == (3, 0, 1) and set(seen[0].remeasure) == {0, 1, 3}
    # 3 is launched until its mean settles that it breaks the SLO, then leaves the finalists; until then
    # no pick is made, so a mean past a limit is never picked
    assert len(samples[3]) == launches and 3 not in seen[-1].finalists
    unsettled = [pick for pick in seen if 3 in pick.finalists and pick.kept]
    assert len(unsettled) == launches - 2
    assert all(pick.trial is None and "SLOs within the noise" in pick.reason for pick in unsettled)
    assert 2 not in samples and all(2 not in pick.finalists for pick in seen)
    # 0 met the SLO on its launches and is kept like any finalist, on its launches after the first
    # (which counts as the search's): a 50 % gain on a known spread
    assert pick.trial is not None and pick.trial.number == 0 and pick.kept[0].outcome == "better"
    assert 2 <= len(samples[0]) <= launches


def test_without_a_launch_spread_no_trial_past_an_slo_is_a_finalist() -> None:
    trials = [_screened_out(0, 150.0, 0.01), _trial(1, (120.0,)), _trial(2, (152.0,), violation=0.01)]
    pick = final_pick(
        SPEC,
        OBJECTIVES,
        trials,
        rules=Rules(min_gain=0.01, spread=None),
        reference=_reference((100.0, 100.4)),
        reference_label="Baseline",
    )
    assert pick.finalists == (1,)
