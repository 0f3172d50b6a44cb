"""The cost rows of a study report: per benchmark case, what the baseline and the optimized
configuration cost per 1M tokens and how many output tokens they served per joule.

A configuration's cost on a case is priced at its published throughput — the mean over its launches
of each launch's mean, the Total TPS of the comparison table — on its accelerators at their price, not
averaged over per-launch costs (the mean of inverses is not the inverse of the mean); its energy is
the mean over the launches whose window measured it (the energy module says why one did not)
(:func:`cost_side`). A swept case is priced where a team budgets it: at the highest load that meets the
study's SLOs ("$0.21 per 1M tokens at p99_ttft_ms ≤ 2000"), else at its best-throughput point. The
change is the optimized cost ÷ the baseline's − 1 (money is linear: −38 % is 38 % cheaper), coloured
as a gain when negative, and follows from the case's published throughput gain and the two sides'
spend per hour, with its interval where the gain has one (:func:`perflab.report.published.cost_change`).
Every text that comes from a user (a case title, a price label, a currency) is escaped where it is
written: :func:`cost_text` for plain tables, :func:`cost_cell` for markdown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import fmean

from db.models import ProfileResult
from perflab.cost.energy import NotMeasured
from perflab.cost.figures import CostFigures, cost_per_mtok
from perflab.cost.prices import CURRENCY_SYMBOLS
from perflab.markdown_text import md_text
from perflab.report.model import CostRow, CostSide
from perflab.report.published import percent_text
from perflab.report.sections import headline
from perflab.report.summary import coloured
from perflab.study.loadcurve import curve_from_results


def slo_text(slos: Mapping[str, float]) -> str:
    """``p99_ttft_ms ≤ 2000, mean_tpot_ms ≤ 50``."""
    return ", ".join(f"{name} ≤ {limit:g}" for name, limit in slos.items())


def priced_result(results: Sequence[ProfileResult], slos: Mapping[str, float]) -> ProfileResult | None:
    """The result a case is priced at: a swept case's point at its SLO limit (none when no point meets
    the SLOs), else the case's headline result."""
    curve = curve_from_results([(result.sweep_point, result.result) for result in results], slos)
    if curve is None or not curve.slos:
        return headline(results)
    if curve.slo_limit is None:
        return None
    load = curve.slo_limit.load
    return next(r for r in results if r.sweep_point and float(r.sweep_point["value"]) == load)


def _two_level_mean(groups: Sequence[Sequence[float | None]]) -> tuple[float | None, int]:
    """The mean over groups of each group's mean (values that are None left out), and how many groups
    had a value."""
    means = [fmean(known) for group in groups if (known := [value for value in group if value is not None])]
    return (fmean(means) if means else None), len(means)


def cost_side(launches: Sequence[Sequence[CostFigures]]) -> CostSide | None:
    """One configuration's cost and energy on a case from each launch's figures (one per run of the
    case on it): the cost at the mean over launches of each launch's mean throughput, the energy the mean
    over launches of each launch's mean; None without a launch."""
    launches = [figures for figures in launches if figures]
    if not launches:
        return None
    flat = [found for figures in launches for found in figures]
    throughput, _ = _two_level_mean([[found.total_tps for found in figures] for figures in launches])
    price = next((found.price for found in flat if found.price is not None), None)
    accelerators = next((found.accelerators for found in flat if found.accelerators is not None), None)
    energy, measured = _two_level_mean(
        [[found.output_tokens_per_joule for found in figures] for figures in launches]
    )
    reasons = [found.energy.reason for found in flat if isinstance(found.energy, NotMeasured)]
    return CostSide(
        price=price,
        cost_per_mtok=cost_per_mtok(throughput, accelerators, price),
        tokens_per_joule=energy,
        launches=len(launches),
        energy_launches=measured,
        energy_not_measured=reasons[-1] if reasons and energy is None else None,
        accelerators=accelerators,
        total_tps=throughput,
    )


def _parts(side: CostSide) -> tuple[str, str]:
    """The money and the energy of one side, as plain text."""
    cost = side.cost_per_mtok
    money = f"{side.price.money(cost)} per 1M tokens" if side.price and cost is not None else "no price"
    if side.tokens_per_joule is None:
        why = side.energy_not_measured
        return money, f"energy not measured: {why}" if why else "energy not measured"
    energy = f"{side.tokens_per_joule:.3g} output tokens per joule"
    if side.energy_launches < side.launches:
        energy += (
            f" (mean of the {side.energy_launches} of {side.launches} launches whose energy was measured)"
        )
    elif side.launches > 1:
        energy += f" (mean of {side.launches} launches)"
    return money, energy


def cost_text(side: CostSide | None) -> str:
    """``$0.21 per 1M tokens; 1.25 output tokens per joule`` for a plain table cell, saying what is not
    known."""
    return "not measured" if side is None else "; ".join(_parts(side))


def cost_cell(side: CostSide | None) -> str:
    """``$0.21 per 1M tokens<br>1.25 output tokens per joule`` for a markdown cell, its texts escaped."""
    return "not measured" if side is None else "<br>".join(md_text(part) for part in _parts(side))


def currency_text(row: CostRow) -> str:
    """The row's currency as its symbol, else its code."""
    return CURRENCY_SYMBOLS.get(row.currency or "", row.currency or "")


def cost_change_text(row: CostRow, decimals: int) -> str | None:
    """``-9.2% $ per 1M tokens, -19.4% to +3.0%`` (plain text; None without a change)."""
    change = row.change
    if change is None:
        return None
    interval = change.interval_text(decimals)
    text = f"{percent_text(change.change, decimals)} {currency_text(row)} per 1M tokens"
    return f"{text}, {interval}" if interval else text


def cost_table_rows(rows: Sequence[CostRow], decimals: int) -> list[str]:
    """Rows for the Conclusion's baseline-vs-optimized table, one per case with a measured side."""
    lines = []
    for row in rows:
        if row.baseline is None and row.optimized is None:
            continue
        optimized = cost_cell(row.optimized)
        text = cost_change_text(row, decimals)
        if text is not None and row.change is not None:
            optimized += " " + coloured(md_text(f"({text})"), -row.change.change)
        at = f" at {md_text(row.at)}" if row.at else ""
        lines.append(f"| **{md_text(row.case)}** cost{at} | {cost_cell(row.baseline)} | {optimized} |")
    return lines


def cost_json(rows: Sequence[CostRow]) -> list[dict[str, object]]:
    """The cost rows for results.json."""
    return [
        {
            "case": row.case,
            "at": row.at,
            "currency": row.currency,
            "baseline_cost_per_mtok": row.baseline.cost_per_mtok if row.baseline else None,
            "optimized_cost_per_mtok": row.optimized.cost_per_mtok if row.optimized else None,
            "baseline_tokens_per_joule": row.baseline.tokens_per_joule if row.baseline else None,
            "optimized_tokens_per_joule": row.optimized.tokens_per_joule if row.optimized else None,
            "baseline_energy_launches": row.baseline.energy_launches if row.baseline else 0,
            "optimized_energy_launches": row.optimized.energy_launches if row.optimized else 0,
            "baseline_total_tps": row.baseline.total_tps if row.baseline else None,
            "optimized_total_tps": row.optimized.total_tps if row.optimized else None,
            "change": row.change.change if row.change else None,
            "change_low": row.change.low if row.change else None,
            "change_high": row.change.high if row.change else None,
        }
        for row in rows
    ]
