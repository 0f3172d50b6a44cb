"""Downloads of the run page: the whole run as JSON, and one CSV row of metrics per profile (cells a
spreadsheet would run as formulas written as text, ``perflab.csv_cells``)."""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import datetime
from typing import Any

import pandas as pd

from db.crud.run_list import RUN_LIST_COLUMNS
from perflab.csv_cells import frame_csv
from perflab.views.metrics import metric_value, result_metrics
from perflab.views.run_detail import RunDetail


def _plain(value: Any) -> Any:
    """``value`` with datetimes as ISO text and non-finite floats as strings (valid JSON)."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    cleaned = frame.astype(object).where(frame.notna(), None)
    return [dict(row) for row in cleaned.to_dict(orient="records")]


def run_json(detail: RunDetail) -> str:
    """The run, each profile's full result with its per-request records, and its samples, as JSON."""
    document = {
        "run": dataclasses.asdict(detail.run),
        "results": [
            {
                "profile": profile.profile,
                "sweep_point": profile.sweep_point,
                "result": profile.result,
                "text_block": profile.text_block,
                "requests": _records(profile.records),
            }
            for profile in detail.profiles
        ],
        "samples": _records(detail.samples),
    }
    return json.dumps(_plain(document), indent=2, allow_nan=False)


def run_csv(detail: RunDetail) -> str:
    """One row per profile result: the run's list columns, the profile, then every metric of the result."""
    metrics = result_metrics(profile.result for profile in detail.profiles)
    rows = []
    for profile in detail.profiles:
        row: dict[str, Any] = {f"run_{name}": getattr(detail.run, name) for name in RUN_LIST_COLUMNS}
        row["profile"] = profile.title
        row.update({metric.key: metric_value(profile.result, metric.key) for metric in metrics})
        rows.append(row)
    columns = [f"run_{name}" for name in RUN_LIST_COLUMNS] + ["profile"] + [metric.key for metric in metrics]
    return frame_csv(pd.DataFrame(rows, columns=columns))
