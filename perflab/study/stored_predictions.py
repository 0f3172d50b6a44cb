"""A study's stored predictions as the search's predictor (:mod:`perflab.study.predictions`).

Predictions are made outside the advances (:mod:`perflab.study.predicting`, in a background thread) and
stored in the study's state; an advance only reads them. :func:`stored_predictor` answers a
configuration with AIConfigurator's figures as the result fields a study judges, and None where nothing
is stored yet, the configuration is not covered, or the estimate failed — a failed estimate (a timeout,
an error of the tool) is never read as "infeasible": the configuration is launched and its measurement
decides. A configuration asked for and not stored yet is remembered (:func:`take_wanted`) and
predicted next by the study's background thread.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from perflab.engines import EngineConfig
from perflab.predict.store import read_predictions
from perflab.study.predictions import Prediction, Predictor

_wanted: dict[int, dict[str, EngineConfig]] = {}
_lock = threading.Lock()


def stored_predictor(study_id: int, state: Mapping[str, Any] | None) -> Predictor:
    """Study ``study_id``'s predictions stored in ``state``, as the search's predictor."""
    stored = read_predictions(state)

    def predict(config: EngineConfig) -> Prediction | None:
        fingerprint = config.fingerprint()
        if not stored.known(fingerprint) and stored.unavailable is None:
            with _lock:
                _wanted.setdefault(study_id, {})[fingerprint] = config
        found = stored.predictions.get(fingerprint)
        values = found.values() if found is not None else {}
        if not values:
            return None
        return Prediction(values=values, source=f"AIConfigurator ({found.tables} tables)")

    return predict


def take_wanted(study_id: int) -> dict[str, EngineConfig]:
    """The configurations of study ``study_id`` a search asked for and found unpredicted (by fingerprint),
    forgotten once taken."""
    with _lock:
        return _wanted.pop(study_id, {})
