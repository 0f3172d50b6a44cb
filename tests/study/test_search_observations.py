"""What a search stage reads from its runs: a configuration whose screening broke an SLO, launched again
for the final pick, is a re-measurement in flight while that launch runs (the stage says it is measuring
the final pick's round), not a screening that waits for its full profile."""

from __future__ import annotations

from db.models import ProfileResult, Run
from perflab.runner.profile_spec import parse_profile
from perflab.study.measure import RunOutcome
from perflab.study.search_stage import observations, screening_profile
from perflab.study.types import Measurement

TUNING = parse_profile("random:in=512,out=128,n=200,concurrency=16,name=tuning")
SCREENING = screening_profile(TUNING, 0.25)
SLOS = {"mean_tpot_ms": 10.0}
FINGERPRINT = "f" * 16


def _screening(run_id: int) -> ProfileResult:
    """A screening long enough to judge whose mean TPOT is 3 % past the limit."""
    result = {"completed": 60, "failed": 0, "duration": 20.0, "total_token_throughput": 900.0}
    return ProfileResult(run_id=run_id, profile_name=SCREENING.name, result={**result, "mean_tpot_ms": 10.3})


def _observe(runs: list[Run], latest: Run, measurement: Measurement) -> tuple[str, bool]:
    results = {runs[0].id: [_screening(runs[0].id)]}
    outcome = RunOutcome(latest, tuple(results.get(latest.id, ())), None, measurement, 1)
    found = observations(
        runs,
        results,
        {FINGERPRINT: outcome},
        tuning=TUNING,
        screening=SCREENING,
        objectives=("total_token_throughput",),
        slos=SLOS,
    )
    return found.observations[FINGERPRINT].status, FINGERPRINT in found.remeasuring


def test_a_screened_out_configuration_launched_again_is_a_remeasurement_in_flight() -> None:
    screened = Run(id=1, config_fingerprint=FINGERPRINT, status="done")
    again = Run(id=2, config_fingerprint=FINGERPRINT, status="benchmarking")
    pending = Measurement("pending", run_id=2)
    # its first launch alone, ended after the screening: infeasible, nothing in flight
    assert _observe([screened], screened, Measurement("measured", run_id=1)) == ("infeasible", False)
    # launched again for the final pick: the screening stands, and the launch is a re-measurement
    assert _observe([screened, again], again, pending) == ("screened", True)
    # its first launch, still running its full profile after the screening: not a re-measurement
    running = Run(id=1, config_fingerprint=FINGERPRINT, status="benchmarking")
    assert _observe([running], running, Measurement("pending", run_id=1)) == ("screened", False)
