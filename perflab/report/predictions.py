"""The predictions part of a study's result: each configuration's predicted figures beside its measured
ones, built once from what the study stored (:mod:`perflab.predict.store`) and its measured results,
and rendered by the page, the markdown, the JSON and the CSV from here.

A row per predicted configuration, in the plan's order: AIConfigurator's output tokens/s per
accelerator, mean TPOT and mean TTFT, the measured means of the tuning profile's results (output
throughput over the configuration's accelerators), perflab's simulator's figures for the same case,
and the disagreement between the two predictors (more than 1.5× either way). The section's ``line``
says what predicted and from which engine version's tables, or, where nothing was predicted,
"No prediction: …" with the reason.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perflab.predict.figures import PredictedFigures, Prediction
from perflab.predict.store import read_predictions
from perflab.views.formatting import MISSING


@dataclass(frozen=True)
class Measured:
    """A configuration's measured means on the tuning profile (None: not measured yet)."""

    output_tps_per_gpu: float | None = None
    mean_tpot_ms: float | None = None
    mean_ttft_ms: float | None = None


@dataclass(frozen=True)
class PredictionRow:
    """One configuration: predicted, measured and simulated figures, and what to say of them."""

    label: str
    fingerprint: str
    predicted: PredictedFigures | None
    measured: Measured
    simulated: PredictedFigures | None
    disagreement: str | None = None
    note: str | None = None  # why it has no prediction, or the knobs it ignored
    seconds: float | None = None


@dataclass(frozen=True)
class PredictionSection:
    """The study's predictions (see the module)."""

    line: str
    rows: tuple[PredictionRow, ...] = ()
    progress: str | None = None


def _number(value: float | None, digits: int = 0) -> str:
    return MISSING if value is None else f"{value:,.{digits}f}"


def _mean(values: Sequence[Any]) -> float | None:
    numbers = [float(value) for value in values if isinstance(value, (int, float))]
    return statistics.fmean(numbers) if numbers else None


def measured_means(
    records: Sequence[Mapping[str, Any]], fingerprint: str, tuning: str, gpus: int
) -> Measured:
    """The means of the configuration's tuning results among the report's ``records``."""
    rows = [row for row in records if row.get("fingerprint") == fingerprint and row.get("profile") == tuning]
    output = _mean([row.get("output_throughput") for row in rows])
    return Measured(
        output_tps_per_gpu=output / gpus if output is not None and gpus > 0 else None,
        mean_tpot_ms=_mean([row.get("mean_tpot_ms") for row in rows]),
        mean_ttft_ms=_mean([row.get("mean_ttft_ms") for row in rows]),
    )


def _line(
    source: str | None, predictions: Mapping[str, Prediction], versions: Sequence[tuple[str, str]]
) -> str:
    tables = sorted({prediction.tables for prediction in predictions.values()})
    ran = ", ".join(f"{engine} {version}" for engine, version in versions)
    return (
        f"Predicted by {source or 'AIConfigurator'} from its {', '.join(tables)} tables"
        + (f" (the runs used {ran})" if ran else "")
        + "; perflab's simulator predicted the same cases, and a difference over 1.5× between the two "
        "is flagged."
    )


def prediction_section(
    state: Mapping[str, Any] | None,
    configurations: Sequence[tuple[str, str]],
    records: Sequence[Mapping[str, Any]],
    *,
    tuning: str,
    engine_versions: Sequence[tuple[str, str]] = (),
) -> PredictionSection | None:
    """The section from a study's stored ``state``, its ``configurations`` (label, fingerprint) in plan
    order and its result ``records``; None when predictions were never attempted for it."""
    stored = read_predictions(state)
    if stored.source is None and stored.unavailable is None:
        return None
    rows = []
    for label, fingerprint in configurations:
        prediction = stored.predictions.get(fingerprint)
        if prediction is None and fingerprint not in stored.not_covered:
            continue
        if prediction is None:
            rows.append(
                PredictionRow(
                    label, fingerprint, None, Measured(), None, note=stored.not_covered[fingerprint]
                )
            )
            continue
        ignored = f"ignores {', '.join(prediction.ignored)}" if prediction.ignored else None
        rows.append(
            PredictionRow(
                label,
                fingerprint,
                prediction.figures,
                measured_means(records, fingerprint, tuning, prediction.gpus),
                prediction.simulated,
                prediction.disagreement(),
                prediction.error or ignored,
                prediction.seconds or None,
            )
        )
    line = stored.no_prediction() or _line(stored.source, stored.predictions, engine_versions)
    return PredictionSection(line, tuple(rows), stored.progress_text())


def _figure(figures: PredictedFigures | Measured | None, name: str) -> float | None:
    return getattr(figures, name) if figures is not None else None


def row_fields(row: PredictionRow) -> dict[str, Any]:
    """One row's figures by name, as the JSON, the CSV and the page's table carry them."""
    fields: dict[str, Any] = {}
    for name in ("output_tps_per_gpu", "mean_tpot_ms", "mean_ttft_ms"):
        fields[f"predicted_{name}"] = _figure(row.predicted, name)
        fields[f"measured_{name}"] = _figure(row.measured, name)
        fields[f"simulated_{name}"] = _figure(row.simulated, name)
    fields["prediction_disagreement"] = row.disagreement
    fields["prediction_note"] = row.note
    return fields


def prediction_json(section: PredictionSection | None) -> dict[str, Any] | None:
    """The section as ``results.json``/``study show --json`` hold it."""
    if section is None:
        return None
    return {
        "line": section.line,
        "progress": section.progress,
        "rows": [
            {"label": row.label, "fingerprint": row.fingerprint, "seconds": row.seconds, **row_fields(row)}
            for row in section.rows
        ],
    }


def with_predictions(
    records: Sequence[dict[str, Any]], section: PredictionSection | None
) -> list[dict[str, Any]]:
    """The CSV's rows with each configuration's predicted and simulated figures beside its measured ones."""
    if section is None:
        return list(records)
    by_fingerprint = {row.fingerprint: row_fields(row) for row in section.rows}
    added = (
        [name for name in row_fields(section.rows[0]) if not name.startswith("measured_")]
        if section.rows
        else []
    )
    return [
        {**record, **{name: by_fingerprint.get(record.get("fingerprint"), {}).get(name) for name in added}}
        for record in records
    ]


def table_rows(section: PredictionSection) -> list[dict[str, Any]]:
    """The page's table: one row per configuration, figures rounded for reading."""
    return [
        {
            "Configuration": row.label,
            "Predicted tok/s/GPU": _number(_figure(row.predicted, "output_tps_per_gpu")),
            "Measured tok/s/GPU": _number(row.measured.output_tps_per_gpu),
            "Simulated tok/s/GPU": _number(_figure(row.simulated, "output_tps_per_gpu")),
            "Predicted TPOT (ms)": _number(_figure(row.predicted, "mean_tpot_ms"), 1),
            "Measured TPOT (ms)": _number(row.measured.mean_tpot_ms, 1),
            "Simulated TPOT (ms)": _number(_figure(row.simulated, "mean_tpot_ms"), 1),
            "Predicted TTFT (ms)": _number(_figure(row.predicted, "mean_ttft_ms"), 1),
            "Measured TTFT (ms)": _number(row.measured.mean_ttft_ms, 1),
            "Flag": row.disagreement or row.note or "",
        }
        for row in section.rows
    ]


def prediction_lines(section: PredictionSection | None, escape: Any) -> list[str]:
    """The markdown section ("### Predictions"): its line, then a table of every row; ``escape`` makes
    user text safe in markdown."""
    if section is None:
        return []
    lines = ["### Predictions", "", escape(section.line), ""]
    if section.progress:
        lines += [escape(section.progress), ""]
    rows = table_rows(section)
    if rows:
        names = list(rows[0])
        lines += ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
        lines += ["| " + " | ".join(escape(str(row[name])) for name in names) + " |" for row in rows]
        lines.append("")
    return lines
