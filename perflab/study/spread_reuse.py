"""Reusing a spread measured by an earlier study, only where it describes the same measurement.

A study that has measured configurations on two launches or more offers its own spread (today's, never
one it reused itself) for later studies: the CV of one launch's value, its degrees of freedom, when it
was measured and on what (:func:`spread_facts`: the model, the engine and its version, the tuning
profile as resolved, the runs per launch, and the hosts). A new study is offered the latest such spread
whose facts match its own and whose hosts share one of its hosts (:func:`earlier_spread`); it then uses
it only while its own launches agree with it (:func:`perflab.study.noise.study_spread`), and not at all
once its runs show another engine version (:func:`reused_spread`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlmodel import Session

from db import crud
from db.models import Run
from perflab.study.noise import ReusedSpread, StudySpread
from perflab.study.spec import StudySpec

# ``study.state`` keys: the spread a study was offered when created, and the one it offers later studies.
PRIOR_SPREAD = "prior_spread"
OFFERED_SPREAD = "reusable_spread"


def spread_facts(spec: StudySpec) -> dict[str, str]:
    """What a spread was measured on, beside the hosts and engine version: model, engine, tuning
    profile (a digest of its resolved fields) and runs per launch."""
    profile = json.dumps(spec.tuning().model_dump(mode="json"), sort_keys=True)
    return {
        "model": spec.model,
        "engine": str(spec.baseline.get("engine")),
        "profile": f"{spec.tuning().name}:{hashlib.sha256(profile.encode()).hexdigest()[:12]}",
        "repeats": str(spec.repeats),
    }


def engine_version(runs: Sequence[Run]) -> str | None:
    """The engine version the study's runs reported (the latest that did), or None."""
    versions = [(run.environment or {}).get("engine_version") for run in runs]
    return next((str(version) for version in reversed(versions) if version), None)


def offered_spread(
    study_id: int, spec: StudySpec, spread: StudySpread, runs: Sequence[Run]
) -> dict[str, Any] | None:
    """What the study offers later studies: its own measured spread with its facts (None before it has
    measured anything twice)."""
    if spread.measured_cv_pct is None or spread.measured_df <= 0:
        return None
    finished = [run.finished_at for run in runs if run.finished_at is not None]
    facts = {
        **spread_facts(spec),
        "hosts": ",".join(sorted(spec.hosts)),
        "engine_version": engine_version(runs) or "unknown",
    }
    return ReusedSpread(
        cv_pct=spread.measured_cv_pct,
        df=spread.measured_df,
        study_id=study_id,
        measured_at=max(finished).isoformat() if finished else None,
        matched=tuple(sorted(facts.items())),
    ).to_dict()


def earlier_spread(session: Session, spec: StudySpec) -> dict[str, Any] | None:
    """The spread offered by the latest earlier study measured on the same model, engine, tuning profile
    and runs per launch, on one of the same hosts (None when there is none)."""
    facts = spread_facts(spec)
    for study in sorted(crud.list_studies(session), key=lambda item: item.id, reverse=True):
        offered = (study.state or {}).get(OFFERED_SPREAD)
        if not isinstance(offered, dict):
            continue
        matched = offered.get("matched") or {}
        hosts = set(str(matched.get("hosts", "")).split(","))
        if all(matched.get(key) == value for key, value in facts.items()) and hosts & set(spec.hosts):
            return offered
    return None


def reused_spread(state: Mapping[str, Any], runs: Sequence[Run]) -> tuple[ReusedSpread | None, str | None]:
    """The spread the study was offered, and why it may not be used at all (another engine version
    than the one its runs report), or None."""
    stored = state.get(PRIOR_SPREAD)
    if not isinstance(stored, dict) or "cv_pct" not in stored:
        return None, None
    reused = ReusedSpread.from_dict(stored)
    then = dict(reused.matched).get("engine_version", "unknown")
    now = engine_version(runs)
    if now is not None and then not in ("unknown", now):
        return reused, f"measured on engine version {then}, these runs use {now}"
    return reused, None
