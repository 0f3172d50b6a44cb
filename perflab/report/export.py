"""Writing a report out: ``report.md``, ``charts/*.png``, ``results.csv`` and ``results.json``, into a
directory or a zip file (what the study page offers for download)."""

from __future__ import annotations

import csv
import io
import json
import zipfile
from pathlib import Path
from typing import Any

from perflab.report.charts import png_bytes, report_charts
from perflab.report.markdown import render_markdown
from perflab.report.model import Report

REPORT_FILE = "report.md"
CSV_FILE = "results.csv"
JSON_FILE = "results.json"
CHART_DIR = "charts"


def results_csv(report: Report) -> str:
    """Every number of the report, one row per stored result."""
    columns: list[str] = []
    for row in report.records:
        columns += [name for name in row if name not in columns]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(report.records)
    return buffer.getvalue()


def results_json(report: Report) -> str:
    """The report's conclusions and every number, as JSON."""
    payload: dict[str, Any] = {
        "title": report.title,
        "model": report.model,
        "objective": report.objective,
        "recommended_command": report.recommended_command,
        "recommended_replicas": report.recommended_replicas,
        "comparison": [
            {
                "case": row.case,
                "baseline_total_tps": row.baseline.total_tps if row.baseline else None,
                "optimized_total_tps": row.optimized.total_tps if row.optimized else None,
                "baseline_mean_tpot_ms": row.baseline.mean_tpot_ms if row.baseline else None,
                "optimized_mean_tpot_ms": row.optimized.mean_tpot_ms if row.optimized else None,
                "change": row.change,
            }
            for row in report.comparison
        ],
        "summary": [
            {
                "option": row.option,
                "improvement": row.improvement,
                "versus_baseline": row.versus_baseline,
                "note": row.note,
            }
            for row in report.summary
        ],
        "stages": [
            {
                "index": stage.index,
                "name": stage.name,
                "winner": stage.winner,
                "candidates": [
                    {
                        "label": c.label,
                        "serve_command": c.serve_command,
                        "decision": c.decision,
                        "note": c.note,
                        "value": c.value,
                        "run_id": c.run_id,
                    }
                    for c in stage.candidates
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
