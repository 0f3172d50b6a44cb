"""Which studies a worker advances, and when: only those due (``study.wake_at``), one worker each.

A study is due when something about it changed — a run of it ended or stored a result, its status
was changed (created, resumed, sent back to measure what is missing) — or, as a safety net for a
change no one marked, :data:`STUDY_RECHECK_S` after a worker last took it. :func:`advance_due_studies`
takes the due studies one at a time (:func:`db.crud.claim_due_study`: no two workers get the same
one) and advances each under the coordinator's lease (and starts predicting its configurations in
this process, :mod:`perflab.study.predicting`), so the study reads and writes of a fleet grow
with the changes, not with workers × studies × polls.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy.engine import Engine

from db import crud
from db.session import new_session
from perflab.study.coordinator import LEASE_S, advance
from perflab.study.predicting import start_predicting
from perflab.study.spec import StudySpecError

logger = logging.getLogger(__name__)

# A study nothing marked as changed is still advanced this often (seconds).
STUDY_RECHECK_S = 15.0


def advance_due_studies(engine: Engine, *, holder: str, should_stop: Callable[[], bool]) -> list[int]:
    """Advance every study due now, one at a time, until none is (or ``should_stop()``); returns the
    ids advanced. A study another process holds the lease of is due again once the lease ends."""
    advanced: list[int] = []
    while not should_stop():
        with new_session(engine) as session:
            study_id = crud.claim_due_study(session, recheck_s=STUDY_RECHECK_S)
        if study_id is None:
            break
        try:
            if advance(engine, study_id, holder=holder) is not None:
                advanced.append(study_id)
                start_predicting(engine, study_id)
            else:  # finished (never due again) or being advanced elsewhere: look again after its lease
                with new_session(engine) as session:
                    crud.wake_study(session, study_id=study_id, delay_s=LEASE_S)
        except StudySpecError as error:
            logger.error("study %s failed: %s", study_id, error)
        except Exception:
            logger.exception("advancing study %s failed", study_id)
    return advanced
