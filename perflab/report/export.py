"""Writing a report out: ``report.md``, ``charts/*.png``, ``results.csv`` and ``results.json``, into a
directory or a zip file (what the study page offers for download)."""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from perflab.chart_png import chart_png
from perflab.csv_cells import records_csv
from perflab.report.charts import report_charts
from perflab.report.costs import cost_json
from perflab.report.markdown import render_markdown
from perflab.report.model import CandidateSection, Figures, Report, SearchSection
from perflab.report.predictions import prediction_json
from perflab.report.published import PublishedGain, published_gain
from perflab.study.noise import Spread
from perflab.study.verdict import Verdict

REPORT_FILE = "report.md"
CSV_FILE = "results.csv"
JSON_FILE = "results.json"
CHART_DIR = "charts"


def results_csv(report: Report) -> str:
    """Every number of the report, one row per stored result (names a spreadsheet would run as
    formulas written as text)."""
    columns: list[str] = []
    for row in report.records:
        columns += [name for name in row if name not in columns]
    return records_csv(columns, report.records)


def _fields(item: object, *names: str) -> dict[str, Any]:
    """``{name: item.name}`` for each of ``names``."""
    return {name: getattr(item, name) for name in names}


def _figure(figures: Figures | None, name: str) -> float | None:
    return getattr(figures, name) if figures is not None else None


def _verdict(verdict: Verdict | None, published: PublishedGain | None = None) -> dict[str, Any] | None:
    """The verdict's fields, with the gain it publishes (``published``: gain and interval, as every table
    shows it; given for the recommendation, whose published gain may be its one kept stage's)."""
    if verdict is None:
        return None
    return {**verdict.to_dict(), "published": (published or published_gain(verdict)).to_json()}


def _gain(gain: PublishedGain | None) -> dict[str, Any] | None:
    return gain.to_json() if gain is not None else None


def _spread(spread: Spread | None) -> dict[str, Any] | None:
    return {**asdict(spread), "text": spread.text()} if spread is not None else None


def _candidate(candidate: CandidateSection) -> dict[str, Any]:
    return {
        **_fields(candidate, "label", "state", "decision", "note", "run_id", "status", "serve_command"),
        "mean": candidate.value,
        "launches": candidate.launches,
        "sample": candidate.figures.sample_text if candidate.figures else None,
        "verdict": _verdict(candidate.verdict),
        "fingerprint": candidate.fingerprint,
        "config": candidate.config,
    }


def _search(search: SearchSection) -> dict[str, Any]:
    return {
        **_fields(search, "stage", "name", "space_size", "budget", "stop", "pick", "over_budget"),
        "objectives": list(search.objectives),
        "launches": {**asdict(search.launches), "total": search.launches.total},
        "trials": [
            {**asdict(trial), "params": dict(trial.params), "launches": len(trial.samples)}
            for trial in search.trials
        ],
        "convergence": [dict(point) for point in search.convergence],
        "front": list(search.front),
        "importances": dict(search.importances) if search.importances is not None else None,
        "importance_note": search.importance_note,
    }


def report_json(report: Report) -> dict[str, Any]:
    """The study's result as JSON-ready data: what ``results.json`` and ``study show --json`` hold."""
    spread = report.spread
    return {
        **_fields(report, "study_id", "name", "status", "phase", "kind", "title", "model", "objective"),
        **_fields(report, "objective_unit", "recommended_command", "recommended_replicas", "best"),
        **_fields(report, "failure", "incomplete", "provisional_best", "tuning"),
        "hosts": list(report.hosts),
        "slos": dict(report.slos),
        "unmeasured": [_fields(item, "stage", "label", "reason") for item in report.unmeasured],
        "recommendation_verdict": _verdict(report.recommendation_verdict, report.published),
        "published": _gain(report.published),
        "spread": {
            "study": spread.study.to_dict() if spread.study is not None else None,
            "baseline": _spread(spread.baseline),
            "detectable_gain_pct": spread.detectable_gain_pct,
        },
        "verdicts": [
            {"stage": row.stage, "label": row.label, "decision": row.decision, **_verdict(row.verdict)}
            for row in report.verdicts
        ],
        "comparison": [
            {
                "case": row.case,
                "baseline_total_tps": _figure(row.baseline, "total_tps"),
                "optimized_total_tps": _figure(row.optimized, "total_tps"),
                "baseline_mean_tpot_ms": _figure(row.baseline, "mean_tpot_ms"),
                "optimized_mean_tpot_ms": _figure(row.optimized, "mean_tpot_ms"),
                "baseline_sample": row.baseline.sample_text if row.baseline else None,
                "optimized_sample": row.optimized.sample_text if row.optimized else None,
                "change": row.gain.change if row.gain else None,
                "gain": _gain(row.gain),
                "writeup_change": row.writeup,
            }
            for row in report.comparison
        ],
        "costs": cost_json(report.costs),
        "summary": [
            {
                "option": row.option,
                "improvement": _gain(row.improvement),
                "versus_baseline": _gain(row.versus_baseline),
                "note": row.note,
            }
            for row in report.summary
        ],
        "baseline": _candidate(report.baseline) if report.baseline is not None else None,
        "stages": [
            {
                **_fields(stage, "index", "name", "winner", "decided"),
                "candidates": [_candidate(candidate) for candidate in stage.candidates],
            }
            for stage in report.stages
        ],
        "searches": [_search(search) for search in report.searches],
        "layouts": [choice.to_dict() for choice in report.layouts],
        "launches": [{**asdict(launch), "marks": list(launch.marks)} for launch in report.launches],
        "notes": list(report.notes),
        "caveats": list(report.caveats),
        "predictions": prediction_json(report.predictions),
        "results": list(report.records),
    }


def results_json(report: Report) -> str:
    """The report's conclusions and every number, as JSON."""
    return json.dumps(report_json(report), indent=2, default=str)


def report_files(report: Report, *, charts: bool = True) -> dict[str, bytes]:
    """Every file of the export, by relative path."""
    files: dict[str, bytes] = {}
    paths: dict[str, str] = {}
    if charts:
        for name, chart in report_charts(report).items():
            path = f"{CHART_DIR}/{name}.png"
            files[path] = chart_png(chart)
            paths[name] = path
    files[REPORT_FILE] = render_markdown(report, paths).encode()
    files[CSV_FILE] = results_csv(report).encode()
    files[JSON_FILE] = results_json(report).encode()
    return files


def zip_bytes(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, content in sorted(files.items()):
            archive.writestr(path, content)
    return buffer.getvalue()


def write_report(report: Report, out: str | Path, *, charts: bool = True) -> list[Path]:
    """Write the export to ``out``: a ``.zip`` file, or a directory (created); returns what was written."""
    target = Path(out)
    files = report_files(report, charts=charts)
    if target.suffix.lower() == ".zip":
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(zip_bytes(files))
        return [target]
    written = []
    for path, content in files.items():
        destination = target / path
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(content)
        written.append(destination)
    return written
