"""The objective of a study: one number per measured configuration, higher is better except for the
objectives of :data:`LOWER_IS_BETTER`.

- ``total_token_throughput`` (default), ``output_throughput``, ``request_throughput``: the result
  field of that name. Results are node totals: the benchmark spreads requests over every replica, so a
  configuration with N replicas per node is measured as the whole node serves.
- ``request_goodput``: requests/s meeting the per-request goodput SLOs set on the tuning profile.
- ``max_load_within_slo``: on a swept tuning profile, the highest load (request rate or concurrency)
  whose point meets every SLO of the study (0 when none does).
- ``cost_per_mtok`` (lower is better): money per 1M total tokens at the measured throughput, from the
  team's prices (:mod:`perflab.cost`); ``tokens_per_joule``: output tokens per joule over the benchmark
  window, from sampled power. The study adds both to each result before scoring; a result without a
  price or without measured energy has no value. On a swept tuning profile with SLOs both are taken at
  the highest load that meets every SLO ("$0.21 per 1M tokens at p99 TTFT ≤ 2 s"; no value when no load
  does), without SLOs at the curve's best point.

For a swept tuning profile the throughput objectives take the curve's peak. The success rate of a
result is completed ÷ (completed + failed), or completed ÷ the prompts sent when the result does not
count failures (results imported from printed blocks).

The study's ``slos`` constrain every objective, swept or not. A score says which SLOs its result
breaks (``violations``, worded ``mean_tpot_ms 303.4 > 100``): an unswept result is checked as it is
(its SLO fields are kept in ``slo_values`` so means over runs and launches can be checked too); a
swept one takes the throughput objectives at their best among the loads that meet every SLO, and
breaks them when no load does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from perflab.study.loadcurve import LoadCurve, curve_from_results, slo_violations

SweepResult = tuple[Mapping[str, Any] | None, Mapping[str, Any]]
# Objectives whose values the team pays for: the smaller the better.
LOWER_IS_BETTER: frozenset[str] = frozenset({"cost_per_mtok"})
# Objectives read at a swept profile's SLO limit when the study sets SLOs.
AT_SLO_LIMIT: frozenset[str] = frozenset({"cost_per_mtok", "tokens_per_joule"})


@dataclass(frozen=True)
class Score:
    """A configuration's objective value on the tuning profile, the success rate behind it, its load
    curve when the tuning profile is swept, the SLOs it breaks and (unswept) its SLO fields' values."""

    value: float | None
    success_rate: float | None
    curve: LoadCurve | None = None
    violations: tuple[str, ...] = ()
    slo_values: Mapping[str, float] = field(default_factory=dict)


def combined_slos(
    scores: Sequence[Score], slos: Mapping[str, float]
) -> tuple[dict[str, float], tuple[str, ...]]:
    """The SLO fields' means over ``scores`` (the runs of one launch, or a configuration's launches)
    and the SLOs those means break; swept scores keep every violation any of them has."""
    if any(found.curve is not None for found in scores):
        return {}, tuple(dict.fromkeys(reason for found in scores for reason in found.violations))
    names = {name for found in scores for name in found.slo_values}
    means = {
        name: fmean(found.slo_values[name] for found in scores if name in found.slo_values) for name in names
    }
    return means, slo_violations(means, slos)


def slo_fields(result: Mapping[str, Any], slos: Mapping[str, float]) -> dict[str, float]:
    """The result's values of the fields ``slos`` bound (a field it lacks is left out)."""
    return {name: float(result[name]) for name in slos if _field_value(result, name) is not None}


def success_rate(result: Mapping[str, Any], expected: int | None = None) -> float | None:
    """completed ÷ (completed + failed), else completed ÷ ``expected``; None when neither is known."""
    completed = result.get("completed")
    if not isinstance(completed, (int, float)):
        return None
    failed = result.get("failed")
    counted = isinstance(failed, (int, float))
    total = completed + failed if counted else expected or result.get("num_prompts")
    if not isinstance(total, (int, float)) or total <= 0:
        return None
    return min(1.0, completed / total)


def _field_value(result: Mapping[str, Any], objective: str) -> float | None:
    value = result.get(objective)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def score(
    objective: str,
    results: Sequence[SweepResult],
    *,
    slos: Mapping[str, float] | None = None,
    expected_prompts: int | None = None,
) -> Score:
    """The objective over the tuning profile's stored ``(sweep_point, result)`` pairs, under ``slos``."""
    limits = dict(slos or {})
    if not results:
        return Score(None, None)
    curve = curve_from_results(results, limits)
    if curve is None:
        result = results[0][1]
        return Score(
            _field_value(result, objective),
            success_rate(result, expected_prompts),
            violations=slo_violations(result, limits),
            slo_values=slo_fields(result, limits),
        )
    by_load = {float(point["value"]): result for point, result in results if point}
    met = limits and curve.slo_limit is not None
    if limits and not met:
        rates = [
            rate
            for result in by_load.values()
            if (rate := success_rate(result, expected_prompts)) is not None
        ]
        bounds = ", ".join(f"{name} ≤ {limit:g}" for name, limit in limits.items())
        unmet = (f"no load meets the SLOs ({bounds})",)
        if objective == "max_load_within_slo" or objective in AT_SLO_LIMIT:
            value = 0.0 if objective == "max_load_within_slo" else None
            return Score(value, min(rates, default=None), curve, violations=unmet)
        best = _best_point(objective, by_load, expected_prompts, curve)
        return Score(best.value, best.success_rate, curve, violations=unmet)
    if objective == "max_load_within_slo":
        limit = curve.slo_limit
        return Score(limit.load, success_rate(by_load[limit.load], expected_prompts), curve)
    if objective in AT_SLO_LIMIT and met:
        at_limit = by_load[curve.slo_limit.load]
        return Score(_field_value(at_limit, objective), success_rate(at_limit, expected_prompts), curve)
    within = {point.load: by_load[point.load] for point in curve.points if point.meets_slos or not limits}
    return _best_point(objective, within, expected_prompts, curve)


def _best_point(
    objective: str,
    among: Mapping[float, Mapping[str, Any]],
    expected_prompts: int | None,
    curve: LoadCurve,
) -> Score:
    """The curve's best point for the objective among the loads of ``among``."""
    values = ((_field_value(result, objective), result) for result in among.values())
    valued = [(value, result) for value, result in values if value is not None]
    if not valued:
        return Score(None, None, curve)
    pick = min if objective in LOWER_IS_BETTER else max
    value, best = pick(valued, key=lambda item: item[0])
    return Score(value, success_rate(best, expected_prompts), curve)
