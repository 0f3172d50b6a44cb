"""The objective and load-curve analysis on hand-written results: success rates, the peak, the
saturation point, the SLO limit and the highest-load-within-SLO objective."""

from __future__ import annotations

from typing import Any

import pytest

from perflab.study.loadcurve import analyze, curve_from_results
from perflab.study.objective import score, success_rate
from perflab.study.views import shown_value


def _point(output: float, ttft: float, tpot: float = 20.0, failed: int = 0) -> dict[str, Any]:
    return {
        "completed": 100 - failed,
        "failed": failed,
        "output_throughput": output,
        "total_token_throughput": output * 3,
        "p99_ttft_ms": ttft,
        "mean_tpot_ms": tpot,
    }


CURVE = [(1.0, _point(100, 50)), (2.0, _point(195, 60)), (4.0, _point(380, 900)), (8.0, _point(400, 4000))]
SLOS = {"p99_ttft_ms": 1000.0, "mean_tpot_ms": 50.0}


def test_success_rate_counts_failures_or_the_prompts_sent() -> None:
    assert success_rate({"completed": 95, "failed": 5}) == 0.95
    assert success_rate({"completed": 516}, expected=1000) == 0.516
    assert success_rate({"completed": 10, "num_prompts": 40}) == 0.25
    assert success_rate({"completed": 10}) is None


def test_peak_saturation_and_slo_limit() -> None:
    curve = analyze("request_rate", CURVE, SLOS)
    assert [point.load for point in curve.points] == [1.0, 2.0, 4.0, 8.0]
    assert curve.peak.load == 8.0
    assert curve.saturation.load == 4.0  # 380 is within 10 % of the 400 peak
    assert curve.slo_limit.load == 4.0
    assert curve.points[-1].violations == ("p99_ttft_ms 4000.0 > 1000",)
    assert curve.unit == "req/s"


def test_a_rising_curve_has_no_saturation_and_failures_break_slos() -> None:
    rising = analyze(
        "max_concurrency", [(1, _point(100, 10)), (2, _point(200, 10)), (4, _point(400, 10, failed=3))], SLOS
    )
    assert rising.saturation is None and rising.peak.load == 4
    assert rising.slo_limit.load == 2
    assert rising.points[-1].violations == ("3 failed requests",)
    assert analyze("request_rate", CURVE, {}).slo_limit is None


def test_scores() -> None:
    single = [(None, _point(300, 10))]
    assert score("output_throughput", single).value == 300
    assert score("total_token_throughput", single).value == 900
    assert score("total_token_throughput", single).curve is None
    swept = [({"kind": "request_rate", "value": load}, result) for load, result in CURVE]
    assert score("total_token_throughput", swept).value == 1200  # the peak, 8 req/s
    # under the SLOs, the best load that meets them: 4 req/s (8 req/s breaks p99 TTFT)
    constrained = score("total_token_throughput", swept, slos=SLOS)
    assert (constrained.value, constrained.success_rate, constrained.violations) == (1140, 1.0, ())
    within = score("max_load_within_slo", swept, slos=SLOS)
    assert (within.value, within.success_rate) == (4.0, 1.0)
    assert within.curve.slo_limit.load == 4.0
    none_within = score("max_load_within_slo", swept, slos={"p99_ttft_ms": 1.0})
    assert none_within.value == 0.0 and none_within.violations == (
        "no load meets the SLOs (p99_ttft_ms ≤ 1)",
    )
    no_load = score("total_token_throughput", swept, slos={"p99_ttft_ms": 1.0})
    assert no_load.value == 1200 and no_load.violations == none_within.violations
    assert score("total_token_throughput", []).value is None
    assert curve_from_results([(None, _point(1, 1))]) is None


def test_slos_constrain_an_unswept_result_too() -> None:
    result = {"total_token_throughput": 9000.0, "mean_tpot_ms": 303.4, "p99_ttft_ms": 900.0}
    found = score("total_token_throughput", [(None, result)], slos={"mean_tpot_ms": 100.0})
    assert found.value == 9000.0 and found.violations == ("mean_tpot_ms 303.4 > 100",)
    assert found.slo_values == {"mean_tpot_ms": 303.4}
    met = score("total_token_throughput", [(None, result)], slos={"p99_ttft_ms": 1000.0})
    assert met.violations == ()
    missing = score("total_token_throughput", [(None, result)], slos={"p99_tpot_ms": 50.0})
    assert missing.violations == ("p99_tpot_ms not measured",)


@pytest.mark.parametrize(
    ("value", "limit", "shown"),
    [(303.4, 100.0, "303.4 > 100"), (0.2701, 0.262, "0.270 > 0.262"), (52.41, 52.4, "52.41 > 52.4")],
)
def test_a_figure_past_its_slo_reads_above_the_limit(value: float, limit: float, shown: str) -> None:
    # one decimal rounded 0.2701 to "0.3" and 52.41 to "52.4 > 52.4"
    found = score(
        "total_token_throughput",
        [(None, {"total_token_throughput": 1.0, "mean_tpot_ms": value})],
        slos={"mean_tpot_ms": limit},
    )
    assert found.violations == (f"mean_tpot_ms {shown}",)


@pytest.mark.parametrize("field", ["request_throughput", "request_goodput"])
def test_a_missing_field_has_no_value(field: str) -> None:
    assert score(field, [(None, _point(300, 10))]).value is None


def priced_point(point: dict[str, Any]) -> dict[str, Any]:
    return {**point, "cost_per_mtok": 1 / point["total_token_throughput"]}


def test_cost_is_read_at_the_slo_limit_and_lower_is_better_without_slos() -> None:
    priced = [({"kind": "request_rate", "value": load}, priced_point(point)) for load, point in CURVE]
    # the SLO limit is 4 req/s (1140 tok/s): the cost there, not at the cheaper 8 req/s point
    assert score("cost_per_mtok", priced, slos=SLOS).value == pytest.approx(1 / 1140)
    assert score("cost_per_mtok", priced).value == pytest.approx(1 / 1200)
    assert score("cost_per_mtok", priced, slos={"p99_ttft_ms": 1.0}).value is None
    unpriced = [(point, {**result, "cost_per_mtok": None}) for point, result in priced]
    assert score("cost_per_mtok", unpriced).value is None
    assert score("tokens_per_joule", [(None, {"tokens_per_joule": 2.5})]).value == 2.5


def test_small_objective_values_keep_significant_digits_in_the_candidates_table() -> None:
    assert [shown_value(v) for v in (3792.504, 0.004237, None)] == [3792.5, 0.00424, None]
