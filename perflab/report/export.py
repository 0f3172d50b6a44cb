"""Writing a report out: ``report.md``, ``charts/*.png``, ``results.csv`` and ``results.json``, into a
directory or a zip file (what the study page offers for download)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

from perflab.csv_cells import records_csv
from perflab.report.charts import png_bytes, report_charts
from perflab.report.costs import cost_json
from perflab.report.markdown import render_markdown
from perflab.report.model import Figures, Report

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


def results_json(report: Report) -> str:
    """The report's conclusions and every number, as JSON."""
    payload: dict[str, Any] = {
        **_fields(report, "title", "model", "objective", "recommended_command", "recommended_replicas"),
        "provisional_best": report.provisional_best,
        "unmeasured": [_fields(item, "stage", "label", "reason") for item in report.unmeasured],
        "comparison": [
            {
                "case": row.case,
                "baseline_total_tps": _figure(row.baseline, "total_tps"),
                "optimized_total_tps": _figure(row.optimized, "total_tps"),
                "baseline_mean_tpot_ms": _figure(row.baseline, "mean_tpot_ms"),
                "optimized_mean_tpot_ms": _figure(row.optimized, "mean_tpot_ms"),
                "change": row.change,
            }
            for row in report.comparison
        ],
        "costs": cost_json(report.costs),
        "summary": [
            _fields(row, "option", "improvement", "versus_baseline", "note") for row in report.summary
        ],
        "stages": [
            {
                **_fields(stage, "index", "name", "winner"),
                "candidates": [
                    _fields(candidate, "label", "serve_command", "decision", "note", "value", "run_id")
                    for candidate in stage.candidates
                ],
            }
            for stage in report.stages
        ],
        "results": list(report.records),
    }
    return json.dumps(payload, indent=2, default=str)


def report_files(report: Report, *, charts: bool = True) -> dict[str, bytes]:
    """Every file of the export, by relative path."""
    files: dict[str, bytes] = {}
    paths: dict[str, str] = {}
    if charts:
        for name, chart in report_charts(report).items():
            path = f"{CHART_DIR}/{name}.png"
            files[path] = png_bytes(chart)
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
