"""Running a study to its end in this process: a worker executes its runs while the study is advanced
and its progress reported, until it is done, failed or cancelled (``study run --wait``, tests)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy.engine import Engine

from db.crud.studies import FINISHED_STUDY_STATUSES
from db.models import Study
from db.session import new_session
from perflab.predict.store import prediction_line
from perflab.runner import RunnerOptions
from perflab.study.coordinator import advance
from perflab.study.predicting import start_predicting
from perflab.study.progress import StudyProgress, load_progress
from perflab.worker import Worker

ProgressHandler = Callable[[StudyProgress], None]


class StudyTimeout(TimeoutError):
    """The study did not finish in time (it is left as it is, for a worker to continue)."""


def wait_for_study(
    engine: Engine,
    study_id: int,
    *,
    hosts_path: str | Path | None = None,
    timeout_s: float = 3600.0,
    poll_s: float = 0.5,
    max_parallel_runs: int = 4,
    runner_options: RunnerOptions | None = None,
    on_progress: ProgressHandler | None = None,
) -> Study:
    """Execute study ``study_id`` with an in-process worker until it finishes; returns the study.

    ``on_progress`` is called with the study's progress whenever its candidates, status or predictions
    change. The study's configurations are predicted meanwhile (:mod:`perflab.study.predicting`); a
    finished study is returned once its predictions are made too (at most until ``timeout_s``).
    Raises :class:`StudyTimeout` after ``timeout_s`` (the worker is stopped, the study stays as it is).
    """
    worker = Worker(
        engine,
        inventory_path=hosts_path,
        poll_interval_s=poll_s,
        max_parallel_runs=max_parallel_runs,
        runner_options=runner_options,
    )
    worker.start()
    stop_predicting = threading.Event()
    predicting = start_predicting(engine, study_id, stop_predicting)
    deadline = time.monotonic() + timeout_s
    last_seen: object = None
    try:
        while True:
            advance(engine, study_id)
            with new_session(engine) as session:
                progress = load_progress(session, study_id=study_id)
            seen = (
                progress.study.status,
                [(c.decision, c.measurement) for c in progress.plan.candidates()],
                prediction_line(progress.study.state),
            )
            if on_progress is not None and seen != last_seen:
                on_progress(progress)
            last_seen = seen
            finished = progress.study.status in FINISHED_STUDY_STATUSES
            if finished and (not predicting.is_alive() or time.monotonic() > deadline):
                return progress.study
            if time.monotonic() > deadline:
                raise StudyTimeout(f"study {study_id} did not finish within {timeout_s:g} s")
            time.sleep(poll_s)
    finally:
        stop_predicting.set()
        worker.stop()
