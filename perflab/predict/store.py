"""A study's predictions as stored in ``study.state["predictions"]``, read and written.

The stored shape: ``source`` (``AIConfigurator 0.12.0``), ``unavailable`` (the one line saying why
AIConfigurator cannot be used here, else null), ``progress`` (``{done, total, seconds_each}`` while
predictions run, null after), and ``configs``: per configuration fingerprint, a
:class:`~perflab.predict.figures.Prediction` as a dict, or ``{"not_covered": reason}``. Every write
locks the study row and merges into what is stored then (:func:`db.crud.change_study`), so it never
undoes a write of the study's coordinator, and pages, reports and later runs read predictions from here
instead of computing them again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session

from db import crud
from db.models import Study
from perflab.predict.figures import Prediction

STATE_KEY = "predictions"


@dataclass(frozen=True)
class StoredPredictions:
    """What a study has stored of its predictions (see the module)."""

    source: str | None = None
    unavailable: str | None = None
    progress: Mapping[str, Any] | None = None
    predictions: Mapping[str, Prediction] = field(default_factory=dict)
    not_covered: Mapping[str, str] = field(default_factory=dict)

    def known(self, fingerprint: str) -> bool:
        return fingerprint in self.predictions or fingerprint in self.not_covered

    def progress_text(self) -> str | None:
        """``predicting 3 of 12 configurations (AIConfigurator 0.12.0, ~40 s each)`` while predictions
        run, else None."""
        progress = self.progress
        if not progress:
            return None
        each = progress.get("seconds_each")
        pace = f", ~{each:.0f} s each" if isinstance(each, (int, float)) and each > 0 else ""
        return (
            f"predicting {progress.get('done', 0) + 1} of {progress.get('total', 0)} configurations "
            f"({self.source or 'AIConfigurator'}{pace})"
        )

    def no_prediction(self) -> str | None:
        """``No prediction: …`` when the study has none and none is coming: AIConfigurator is not
        installed, or it covers none of the configurations it was asked about; else None."""
        if self.predictions or self.progress:
            return None
        if self.unavailable is not None:
            return f"No prediction: {self.unavailable}"
        reasons = list(dict.fromkeys(self.not_covered.values()))
        return f"No prediction: {reasons[0]}" if reasons else None


def read_predictions(state: Mapping[str, Any] | None) -> StoredPredictions:
    """The predictions stored in a study's ``state`` (entries that cannot be read are left out)."""
    stored = (state or {}).get(STATE_KEY)
    if not isinstance(stored, Mapping):
        return StoredPredictions()
    predictions: dict[str, Prediction] = {}
    not_covered: dict[str, str] = {}
    for fingerprint, entry in dict(stored.get("configs") or {}).items():
        if not isinstance(entry, Mapping):
            continue
        if "not_covered" in entry:
            not_covered[str(fingerprint)] = str(entry["not_covered"])
        elif (prediction := Prediction.from_dict(entry)) is not None:
            predictions[str(fingerprint)] = prediction
    progress = stored.get("progress")
    return StoredPredictions(
        source=stored.get("source"),
        unavailable=stored.get("unavailable"),
        progress=progress if isinstance(progress, Mapping) else None,
        predictions=predictions,
        not_covered=not_covered,
    )


def write_predictions(
    session: Session,
    study_id: int,
    *,
    configs: Mapping[str, Mapping[str, Any]] | None = None,
    **fields: Any,
) -> Study:
    """Merge ``configs`` (fingerprint → stored entry) and top-level ``fields`` (``source``,
    ``unavailable``, ``progress``) into the study's stored predictions."""

    def decide(study: Study) -> dict[str, Any]:
        state = dict(study.state or {})
        stored = dict(state.get(STATE_KEY) or {})
        stored.update(fields)
        stored["configs"] = {**dict(stored.get("configs") or {}), **dict(configs or {})}
        return {"state": {**state, STATE_KEY: stored}}

    return crud.change_study(session, study_id=study_id, decide=decide)


def prediction_line(state: Mapping[str, Any] | None) -> str | None:
    """A study's prediction progress in one line, or why it has no prediction (None: nothing to say)."""
    stored = read_predictions(state)
    return stored.progress_text() or stored.no_prediction()
