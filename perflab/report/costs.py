"""The cost rows of a study report: per benchmark case, what the baseline and the optimized
configuration cost per 1M tokens and how many output tokens they served per joule.

A swept case is priced where a team budgets it: at the highest load that meets the study's SLOs
("$0.21 per 1M tokens at p99_ttft_ms ≤ 2000"), else at its best-throughput point. The change is the
optimized cost ÷ the baseline's − 1 (money is linear: −38 % is 38 % cheaper), coloured as a gain when
negative.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from db.models import ProfileResult
from perflab.cost.figures import CostFigures
from perflab.cost.prices import CURRENCY_SYMBOLS
from perflab.report.model import CostRow
from perflab.report.sections import headline
from perflab.report.summary import coloured, percent_text
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


def cost_cell(figures: CostFigures | None) -> str:
    """``$0.21 per 1M tokens<br>1.25 tok/J``, saying what is not known."""
    if figures is None:
        return "not measured"
    cost = figures.cost_per_mtok_total
    money = f"{figures.price.money(cost)} per 1M tokens" if figures.price and cost is not None else "no price"
    energy = figures.output_tokens_per_joule
    return f"{money}<br>{f'{energy:.3g} tok/J' if energy is not None else 'energy not measured'}"


def cost_table_rows(rows: Sequence[CostRow], decimals: int) -> list[str]:
    """Rows for the Conclusion's baseline-vs-optimized table, one per case with a measured side."""
    lines = []
    for row in rows:
        if row.baseline is None and row.optimized is None:
            continue
        optimized = cost_cell(row.optimized)
        change = row.change
        if change is not None:
            symbol = CURRENCY_SYMBOLS.get(row.currency or "", row.currency or "")
            optimized += " " + coloured(f"({percent_text(change, decimals)} {symbol} per 1M tokens)", -change)
        at = f" at {row.at}" if row.at else ""
        lines.append(f"| **{row.case}** cost{at} | {cost_cell(row.baseline)} | {optimized} |")
    return lines


def cost_json(rows: Sequence[CostRow]) -> list[dict[str, object]]:
    """The cost rows for results.json."""
    return [
        {
            "case": row.case,
            "at": row.at,
            "currency": row.currency,
            "baseline_cost_per_mtok": row.baseline.cost_per_mtok_total if row.baseline else None,
            "optimized_cost_per_mtok": row.optimized.cost_per_mtok_total if row.optimized else None,
            "baseline_tokens_per_joule": row.baseline.output_tokens_per_joule if row.baseline else None,
            "optimized_tokens_per_joule": row.optimized.output_tokens_per_joule if row.optimized else None,
            "change": row.change,
        }
        for row in rows
    ]
