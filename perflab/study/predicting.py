"""A study's predictions made before its measurements: which configurations, run where, stored how.

:func:`predict_study` predicts every configuration of the study not predicted yet — the baseline,
every candidate its plan has reached (a search's trials as they are proposed), and whatever a search
asked of its stored predictor (:mod:`perflab.study.stored_predictions`) and found missing — with the
process's shared :class:`~perflab.predict.predictor.Predictor` (AIConfigurator beside perflab's
simulator), writing each result into the study's stored predictions as soon as it is made
(:mod:`perflab.predict.store`) and, before each, the progress ("predicting 3 of 12 configurations
(AIConfigurator 0.12.0, ~15 s each)"). perflab's simulator resolves each at the engine version the study's
hosts share (:func:`~perflab.study.hosts.shared_versions`).
A study AIConfigurator cannot predict at all (not installed, model, accelerator, engine or workload
not covered) stores the one line that says why and goes on without it.

Predictions take seconds to minutes each, so they never run inside an advance: :func:`start_predicting`
runs them in a background thread of this process (one per study, while the study is unfinished; the
estimates themselves are subprocesses), which ``study run --wait`` and the worker start.
"""

from __future__ import annotations

import logging
import os
import threading

from sqlalchemy.engine import Engine

from db import crud
from db.crud.studies import FINISHED_STUDY_STATUSES
from db.session import new_session
from perflab.engines import EngineConfig
from perflab.predict.case import NotCovered, case_of
from perflab.predict.installation import COMMAND_ENV, NotInstalled
from perflab.predict.predictor import Predictor
from perflab.predict.store import read_predictions, write_predictions
from perflab.profiles import BenchmarkProfile
from perflab.study.hosts import ENGINE_VERSIONS
from perflab.study.progress import load_progress
from perflab.study.stored_predictions import take_wanted

logger = logging.getLogger(__name__)

POLL_S = 2.0

_predictors: dict[str, Predictor] = {}
_threads: dict[tuple[int, int], threading.Thread] = {}
_lock = threading.Lock()


def shared_predictor() -> Predictor:
    """This process's predictor for the configured AIConfigurator (one per ``PERFLAB_AICONFIGURATOR``)."""
    key = os.environ.get(COMMAND_ENV, "")
    with _lock:
        if key not in _predictors:
            _predictors[key] = Predictor()
        return _predictors[key]


def _configs(engine: Engine, study_id: int) -> tuple[list[EngineConfig], BenchmarkProfile, dict]:
    """The study's configurations (and those a search wanted), its tuning profile and its state."""
    with new_session(engine) as session:
        progress = load_progress(session, study_id=study_id, propose=False)
    configs: dict[str, EngineConfig] = {}
    for candidate in progress.plan.candidates():
        if candidate.config is not None:
            configs.setdefault(candidate.fingerprint or "", candidate.config)
    configs.update(take_wanted(study_id))
    state = dict(progress.study.state or {})
    return list(configs.values()), progress.spec.tuning(), state


def predict_study(engine: Engine, study_id: int, predictor: Predictor | None = None) -> int:
    """Predict the study's configurations not predicted yet (see the module); returns how many."""
    predictor = predictor or shared_predictor()
    configs, tuning, state = _configs(engine, study_id)
    stored = read_predictions(state)
    if predictor.unavailable is not None:
        if stored.unavailable == predictor.unavailable:
            return 0
        with new_session(engine) as session:
            write_predictions(session, study_id, source=predictor.source, unavailable=predictor.unavailable)
        return 0
    todo = [config for config in configs if not stored.known(config.fingerprint())]
    cases, skipped = [], {}
    versions = state.get(ENGINE_VERSIONS) or {}
    for config in todo:
        try:
            case = case_of(config, state.get("accelerator"), tuning, versions.get(config.engine))
            predictor.tables(case)
        except (NotCovered, NotInstalled) as reason:
            skipped[config.fingerprint()] = {"not_covered": str(reason)}
        else:
            cases.append((config, case))
    if skipped or stored.source is None:
        with new_session(engine) as session:
            write_predictions(session, study_id, configs=skipped, source=predictor.source, unavailable=None)
    seconds = [prediction.seconds for prediction in stored.predictions.values() if prediction.seconds > 0]
    for done, (config, case) in enumerate(cases):
        each = sum(seconds) / len(seconds) if seconds else None
        with new_session(engine) as session:
            write_predictions(
                session, study_id, progress={"done": done, "total": len(cases), "seconds_each": each}
            )
        prediction = predictor.predict(config, case)
        if prediction.seconds > 0:
            seconds.append(prediction.seconds)
        with new_session(engine) as session:
            write_predictions(session, study_id, configs={config.fingerprint(): prediction.to_dict()})
    if cases:
        with new_session(engine) as session:
            write_predictions(session, study_id, progress=None)
    return len(cases)


def _keep_predicting(engine: Engine, study_id: int, stop: threading.Event) -> None:
    """Predict the study's new configurations until it is finished (or ``stop`` is set)."""
    while not stop.is_set():
        try:
            predicted = predict_study(engine, study_id)
            with new_session(engine) as session:
                study = crud.get_study(session, study_id=study_id)
            status = study.status if study is not None else "cancelled"
        except Exception:
            logger.exception("predicting study %s failed", study_id)
            return
        if shared_predictor().unavailable is not None or (
            status in FINISHED_STUDY_STATUSES and not predicted
        ):
            return
        stop.wait(POLL_S)


def start_predicting(engine: Engine, study_id: int, stop: threading.Event | None = None) -> threading.Thread:
    """The background thread predicting study ``study_id`` in this process, started unless one runs."""
    key = (id(engine), study_id)
    with _lock:
        thread = _threads.get(key)
        if thread is None or not thread.is_alive():
            thread = threading.Thread(
                target=_keep_predicting,
                args=(engine, study_id, stop or threading.Event()),
                name=f"perflab-predict-{study_id}",
                daemon=True,
            )
            _threads[key] = thread
            thread.start()
        return thread
