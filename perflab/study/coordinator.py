"""Executing studies: a reconciler between a study's plan and its runs in the database.

:func:`advance` reads a study, its runs and their results, asks
:func:`~perflab.study.study_plan.plan_study` what the stages' strategies decide, and makes the database
agree:

- every reached candidate has a ``studycandidate`` row with its configuration, run, value, decision
  and note; once the stages are decided, two ``validation`` rows point at the baseline's and the
  winner's runs;
- every configuration the plan wants gets one run (on the study host with the fewest unfinished runs),
  carrying the tuning profile first and then every validation profile, so each distinct configuration
  is launched exactly once: the study decides on the tuning result while the same launch goes on with
  the validation profiles (a study that measures noise launches a configuration again with the tuning
  profile only). As soon as a configuration can no longer become the final winner its run
  drops the validation profiles it has not started;
- the study moves ``queued → running → done`` (or ``failed`` when the baseline fails, ``incomplete``
  when the infrastructure kept candidates from being measured even after the retries: the unmeasured
  candidates and why are in ``state["unmeasured"]``, and no serve command is recommended over them),
  and its recommended serve command is stored. :func:`measure_missing` sends an incomplete study back
  to ``running`` with fresh attempts for the unmeasured candidates.

It keeps no state outside the database, so it is safe to call again at any time, after a restart, or
from several workers (a short lease in ``study.state`` lets one of them advance a study at a time).
Pausing stops queuing new runs (decisions are still recorded); cancelling cancels the study's queued and
running runs. :func:`advance_studies` is what a worker calls on every poll.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

from db import crud
from db.crud.studies import FINISHED_STUDY_STATUSES
from db.models import Run, Study, utcnow
from db.session import new_session
from perflab.cost.prices import PriceBook, unpriced
from perflab.engines.config import EngineConfig
from perflab.env_policy import env_problems
from perflab.inventory import Inventory
from perflab.profiles import BenchmarkProfile
from perflab.redact import check_config
from perflab.runner.datasets import dataset_problem
from perflab.runner.submit import submit_run
from perflab.study.configs import serve_command
from perflab.study.decide import recommendation
from perflab.study.hosts import ENGINE_VERSIONS, check_hosts, host_facts, next_host, shared_versions
from perflab.study.installed import installed_problems
from perflab.study.measure import MEASURE_FROM_RUN, RunOutcome, study_runs, unfinished
from perflab.study.progress import STAGE_STATE, StudyProgress, load_progress
from perflab.study.search_stage import screening_profile
from perflab.study.spec import StudySpec, StudySpecError
from perflab.study.spread_reuse import OFFERED_SPREAD, PRIOR_SPREAD, earlier_spread, offered_spread
from perflab.study.strategy import StrategyFor
from perflab.study.study_plan import stored_records, strategy_of
from perflab.study.types import UNMEASURED, CandidatePlan, StudyPlan

logger = logging.getLogger(__name__)

ACTIVE_STUDY_STATUSES: tuple[str, ...] = ("queued", "running", "paused")
LEASE_S = 10.0
VALIDATION_STAGE = "Validation"


class StudyStateError(ValueError):
    """A change a study's status does not allow (pausing a finished study, …)."""


def default_holder() -> str:
    """This process and thread, as the holder of a study's lease."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


# ----- creating ---------------------------------------------------------------------------------------


def create_study(
    engine: Engine, spec: StudySpec, *, inventory: Inventory, queued_by: str | None = None
) -> Study:
    """Store a queued study after checking its hosts (known, one accelerator type).

    Raises :class:`~perflab.study.hosts.StudyHostError` naming the host, or
    :class:`~perflab.study.spec.StudySpecError` when the baseline does not fit the hosts' nodes, sets
    a variable a host does not allow, a profile names a dataset not sendable to a host, or a
    configuration is one a host's installed engine refuses (:mod:`perflab.study.installed`).
    """
    with new_session(engine) as session:
        facts = [host_facts(session, inventory, name) for name in spec.hosts]
        accelerator, count = check_hosts(facts)
        gpus_per_node = spec.gpus_per_node or count
        gpus = spec.budget(gpus_per_node)
        try:
            check_config(spec.baseline_config(gpus_per_node, gpus))
        except ValueError as error:
            raise StudySpecError([f"baseline: {error}"]) from None
        hosts = [inventory.get(name) for name in spec.hosts]
        refused = [f"env: {why}" for host in hosts for _, why in env_problems(spec.env_settings(), host)]
        refused += [
            problem
            for profile in (spec.tuning(), *spec.validation())
            for host in hosts
            if (problem := dataset_problem(engine, profile, host))
        ]
        if spec.objective == "cost_per_mtok":
            refused += unpriced(PriceBook.from_inventory(inventory), spec.hosts, accelerator)
        refused += installed_problems(session, spec, gpus_per_node=gpus_per_node, gpus=gpus)
        if refused:
            raise StudySpecError(refused)
        study = crud.create_study(session, name=spec.name, spec=spec.stored(), queued_by=queued_by)
        return crud.update_study(
            session,
            study_id=study.id,
            state={
                "accelerator": accelerator,
                ENGINE_VERSIONS: shared_versions(facts),
                "gpus_per_node": gpus_per_node,
                "gpus": gpus,
                PRIOR_SPREAD: earlier_spread(session, spec),
                "phase": "queued",
            },
        )


# ----- the lease and status writes --------------------------------------------------------------------


def _take_lease(session: Session, study_id: int, holder: str) -> bool:
    taken = False

    def decide(study: Study) -> dict[str, Any] | None:
        nonlocal taken
        state = dict(study.state or {})
        lease = state.get("lease")
        now = utcnow()
        if lease and lease.get("holder") != holder and datetime.fromisoformat(lease["until"]) > now:
            return None
        taken = True
        state["lease"] = {"holder": holder, "until": (now + timedelta(seconds=LEASE_S)).isoformat()}
        return {"state": state}

    crud.change_study(session, study_id=study_id, decide=decide)
    return taken


def _without_lease(study: Study) -> dict[str, Any]:
    """The study's state less its lease (an advance that ends gives the lease back with its write)."""
    return {key: value for key, value in (study.state or {}).items() if key != "lease"}


def _release_lease(session: Session, study_id: int, holder: str) -> None:
    def decide(study: Study) -> dict[str, Any] | None:
        if ((study.state or {}).get("lease") or {}).get("holder") != holder:
            return None
        return {"state": _without_lease(study)}

    crud.change_study(session, study_id=study_id, decide=decide)


# ----- advancing --------------------------------------------------------------------------------------


def _candidate_status(candidate: CandidatePlan, outcome: RunOutcome | None) -> str:
    if candidate.error is not None:
        return "invalid"
    if candidate.decision in ("reused", UNMEASURED):
        return candidate.decision
    if candidate.retrying:
        return "retrying"
    return outcome.run.status if outcome is not None else "waiting"


def _row(progress: StudyProgress, candidate: CandidatePlan, **overrides: Any) -> dict[str, Any]:
    outcome = progress.outcome(candidate)
    measurement = candidate.measurement
    row = {
        "stage_index": candidate.stage_index,
        "stage_name": candidate.stage_name,
        "label": candidate.label,
        "config": candidate.config.model_dump(mode="json") if candidate.config else dict(candidate.changes),
        "config_fingerprint": candidate.fingerprint,
        "run_id": outcome.run.id if outcome is not None else None,
        "role": candidate.role,
        "status": _candidate_status(candidate, outcome),
        "objective_value": measurement.value if measurement is not None else None,
        "decision": candidate.decision,
        "note": candidate.note,
    }
    row.update(overrides)
    return row


def desired_rows(progress: StudyProgress) -> list[dict[str, Any]]:
    """The ``studycandidate`` rows the plan calls for, in stage and position order."""
    plan = progress.plan
    rows = [_row(progress, candidate) for candidate in plan.candidates()]
    if plan.status in ("validating", "done") and progress.spec.validation_profiles:
        index = len(progress.spec.stages) + 1
        for label, candidate in (("Baseline", plan.baseline), ("Optimized", plan.best)):
            validated = _validation_run(progress, candidate.fingerprint)
            rows.append(
                _row(
                    progress,
                    candidate,
                    **({"run_id": validated.id} if validated is not None else {}),
                    stage_index=index,
                    stage_name=VALIDATION_STAGE,
                    label=label,
                    role="validation",
                    decision=None,
                    note=f"validation profiles on the {label.lower()} configuration ({candidate.label})",
                )
            )
    return rows


def _sync_candidates(session: Session, study_id: int, rows: Sequence[dict[str, Any]]) -> None:
    existing: dict[int, list[Any]] = {}
    for stored in crud.list_candidates(session, study_id=study_id):
        existing.setdefault(stored.stage_index, []).append(stored)
    seen: dict[int, int] = {}
    for row in rows:
        stage_index = row["stage_index"]
        position = seen.get(stage_index, 0)
        seen[stage_index] = position + 1
        have = existing.get(stage_index, [])
        if position < len(have):
            stored = have[position]
            changed = {key: value for key, value in row.items() if getattr(stored, key) != value}
            changed.pop("stage_index", None)
            if changed:
                crud.update_candidate(session, candidate_id=stored.id, **changed)
        else:
            fields = {
                key: value for key, value in row.items() if key not in ("stage_index", "stage_name", "config")
            }
            crud.add_candidate(
                session,
                study_id=study_id,
                stage_index=stage_index,
                stage_name=row["stage_name"],
                config=row["config"],
                **fields,
            )


def _label_of(plan: StudyPlan, fingerprint: str) -> str:
    for candidate in plan.candidates():
        if candidate.fingerprint == fingerprint:
            if candidate.label == candidate.stage_name:
                return candidate.label
            return f"{candidate.stage_name} · {candidate.label}"
    return fingerprint


def _validation_run(progress: StudyProgress, fingerprint: str | None) -> Run | None:
    """The configuration's latest run that carries the validation profiles and has not failed or been
    cancelled: another launch of it needs only the tuning profile."""
    wanted = {profile.name for profile in progress.spec.validation()}
    return next(
        (
            run
            for run in reversed(progress.runs)
            if run.config_fingerprint == fingerprint
            and run.status not in ("failed", "cancelled")
            and any(profile.get("name") in wanted for profile in run.profiles)
        ),
        None,
    )


def _profiles_of(progress: StudyProgress, config: EngineConfig) -> list[BenchmarkProfile]:
    """A run's profiles: the tuning profile, then the validation profiles; a configuration its stage
    screens first starts with the screening profile, one its stage measures again (a search
    finalist) or launched again after a launch that carries the validation profiles runs the tuning
    profile only, and a validation launch (the baseline or winner whose launches dropped them) runs
    the validation profiles alone."""
    spec, plan = progress.spec, progress.plan
    fingerprint = config.fingerprint()
    if fingerprint in plan.validate:
        return spec.validation()
    if fingerprint in plan.tuning_only or _validation_run(progress, fingerprint) is not None:
        return spec.tuning_runs()
    profiles = [*spec.tuning_runs(), *spec.validation()]
    fraction = plan.screen.get(fingerprint)
    if fraction is not None:
        return [screening_profile(spec.tuning(), fraction), *profiles]
    return profiles


def _queue_runs(engine: Engine, progress: StudyProgress) -> list[Run]:
    spec, study = progress.spec, progress.study
    queued = []
    runs = list(progress.runs)
    for config in progress.plan.wanted:
        run = submit_run(
            engine,
            host_name=next_host(spec.hosts, runs),
            config=config,
            profiles=_profiles_of(progress, config),
            queued_by=study.queued_by or f"study {study.id}",
            label=f"{study.name} · {_label_of(progress.plan, config.fingerprint())}"
            + (" · validation" if config.fingerprint() in progress.plan.validate else ""),
            study_id=study.id,
        )
        runs.append(run)
        queued.append(run)
    return queued


def _trim_screened(session: Session, progress: StudyProgress) -> None:
    """A configuration its stage drops (a screening that was not promising) ends after its first
    profile."""
    dropped = progress.plan.drop
    for run in unfinished(progress.runs):
        if run.config_fingerprint in dropped and len(run.profiles) > 1:
            crud.update_run(session, run_id=run.id, profiles=run.profiles[:1])


def _store_stage_state(session: Session, progress: StudyProgress) -> None:
    """Keep what the stages' strategies remember (a search's trials, new proposals included; a stage's
    decisions the moment they are made) and the plan's own record (the decided stages, the
    confirmation) in ``study.state``."""
    stored = stored_records(progress.plan)
    if not stored or stored == (progress.study.state or {}).get(STAGE_STATE):
        return

    def decide(study: Study) -> dict[str, Any]:
        return {"state": {**(study.state or {}), STAGE_STATE: stored}}

    crud.change_study(session, study_id=progress.study.id, decide=decide)


def _trim_validation(session: Session, progress: StudyProgress) -> None:
    """Drop the validation profiles of runs whose configuration can no longer win."""
    validation = {profile.name for profile in progress.spec.validation()}
    if not validation:
        return
    for run in unfinished(progress.runs):
        kept = [profile for profile in run.profiles if profile.get("name") not in validation]
        if run.config_fingerprint not in progress.plan.may_win and len(kept) < len(run.profiles):
            crud.update_run(session, run_id=run.id, profiles=kept)


def _phase(plan: StudyPlan, stages: int) -> str:
    if plan.status == "incomplete":
        return f"incomplete: {len(plan.unmeasured())} candidate(s) could not be measured"
    if plan.status != "running":
        return plan.status  # failed, validating, done
    if not plan.stages:
        return "measuring the baseline"
    if plan.confirmation is not None and not plan.confirmation.measured:
        return plan.confirmation.note
    current = plan.stages[-1]
    return f"stage {current.index} of {stages}: {current.name}"


def _verdicts(progress: StudyProgress) -> list[dict[str, Any]]:
    """Every verdict of the plan: stage, candidate, decision, gain, interval, confidence and n."""
    return [
        {
            "stage": candidate.stage_name,
            "label": candidate.label,
            "decision": candidate.decision,
            **candidate.verdict.to_dict(),
        }
        for candidate in progress.plan.candidates()
        if candidate.verdict is not None
    ]


def _confirmation(plan: StudyPlan) -> dict[str, Any] | None:
    """The confirmation of the kept path on fresh launches: whether it held, at what level, and why."""
    confirmation = plan.confirmation
    if confirmation is None:
        return None
    closing = confirmation.closing
    return {
        "confirmed": confirmation.confirmed,
        "alpha": confirmation.alpha,
        "note": confirmation.note,
        "closing": closing.to_dict() if closing is not None else None,
    }


def _state(progress: StudyProgress) -> dict[str, Any]:
    plan = progress.plan
    spread = progress.spread
    return {
        "spread": asdict(spread) if spread is not None else None,
        "study_spread": progress.study_spread.to_dict(),
        OFFERED_SPREAD: offered_spread(
            progress.study.id, progress.spec, progress.study_spread, progress.runs
        ),
        "detectable_gain_pct": progress.detectable_gain_pct,
        "detectable_gains": {str(index): gain for index, gain in progress.detectable_gains().items()},
        "confirmation": _confirmation(plan),
        "verdicts": _verdicts(progress),
        "recommendation_verdict": found.to_dict()
        if (found := recommendation(plan, progress.rules))
        else None,
        "phase": _phase(plan, len(progress.spec.stages)),
        "best": plan.best.label,
        "best_value": plan.best.value,
        "baseline_value": plan.baseline.value,
        "failure": plan.failure,
        "unmeasured": [
            {"stage": candidate.stage_name, "label": candidate.label, "reason": candidate.note}
            for candidate in plan.unmeasured()
        ],
    }


def _finish(session: Session, progress: StudyProgress) -> Study:
    plan = progress.plan

    def decide(study: Study) -> dict[str, Any]:
        state = _without_lease(study)
        fields: dict[str, Any] = {"state": {**state, **_state(progress)}}
        if study.status in FINISHED_STUDY_STATUSES:
            return {"state": state}
        if plan.status == "done":
            fields["status"] = "done"
        elif plan.status in ("failed", "incomplete"):
            fields["status"] = plan.status
        elif study.status == "queued":
            fields["status"] = "running"
        if plan.status == "done" and plan.best.config is not None and plan.recommends:
            fields["recommended_command"] = serve_command(plan.best.config)
        return fields

    return crud.change_study(session, study_id=progress.study.id, decide=decide)


def advance(
    engine: Engine, study_id: int, *, holder: str | None = None, strategy_for: StrategyFor = strategy_of
) -> StudyPlan | None:
    """Bring study ``study_id``'s candidates and runs in line with its plan (each stage asked through
    ``strategy_for``); returns the plan, or None when the study is finished or another process is
    advancing it right now."""
    holder = holder or default_holder()
    with new_session(engine) as session:
        study = crud.get_study(session, study_id=study_id)
        if study is None:
            raise crud.NotFound("study", study_id)
        if study.status in FINISHED_STUDY_STATUSES or not _take_lease(session, study_id, holder):
            return None
        try:
            progress = load_progress(session, study_id=study_id, strategy_for=strategy_for, propose=True)
            _store_stage_state(session, progress)
            if progress.study.status in ("queued", "running") and progress.plan.wanted:
                _queue_runs(engine, progress)
                session.rollback()  # end the read snapshot so the new runs are seen
                progress = load_progress(session, study_id=study_id, strategy_for=strategy_for, propose=True)
            _sync_candidates(session, study_id, desired_rows(progress))
            _trim_validation(session, progress)
            _trim_screened(session, progress)
        except StudySpecError as error:
            failure = str(error)

            def failed(stored: Study) -> dict[str, Any]:
                return {"status": "failed", "state": {**_without_lease(stored), "failure": failure}}

            crud.change_study(session, study_id=study_id, decide=failed)
            raise
        except BaseException:
            session.rollback()
            _release_lease(session, study_id, holder)
            raise
        _finish(session, progress)  # also gives the lease back
        return progress.plan


def advance_studies(engine: Engine, *, holder: str | None = None) -> int:
    """Advance every queued, running or paused study (a worker calls this on each poll); returns how
    many were advanced. A study whose stored spec is unusable is failed; other errors are logged."""
    with new_session(engine) as session:
        ids = [study.id for study in crud.list_studies(session) if study.status in ACTIVE_STUDY_STATUSES]
    advanced = 0
    for study_id in ids:
        try:
            if advance(engine, study_id, holder=holder) is not None:
                advanced += 1
        except StudySpecError as error:
            logger.error("study %s failed: %s", study_id, error)
        except Exception:
            logger.exception("advancing study %s failed", study_id)
    return advanced


# ----- pause, resume, cancel --------------------------------------------------------------------------


def _change_status(engine: Engine, study_id: int, allowed: Sequence[str], status: str, verb: str) -> Study:
    def decide(study: Study) -> dict[str, Any]:
        if study.status not in allowed:
            raise StudyStateError(
                f"study {study_id} is {study.status}; only a {' or '.join(allowed)} study can be {verb}"
            )
        return {"status": status}

    with new_session(engine) as session:  # change_study raises NotFound and rolls back on errors
        return crud.change_study(session, study_id=study_id, decide=decide)


def pause_study(engine: Engine, study_id: int) -> Study:
    """Stop queuing new runs (runs already queued or running go on; decisions are still recorded)."""
    return _change_status(engine, study_id, ("queued", "running"), "paused", "paused")


def resume_study(engine: Engine, study_id: int) -> Study:
    """Let a paused study queue runs again."""
    return _change_status(engine, study_id, ("paused",), "running", "resumed")


def measure_missing(engine: Engine, study_id: int) -> Study:
    """Send an incomplete study back to ``running``: every candidate the infrastructure kept from being
    measured gets new attempts (runs so far no longer count), and the study goes on from there."""

    def decide(study: Study) -> dict[str, Any]:
        if study.status != "incomplete":
            raise StudyStateError(
                f"study {study_id} is {study.status}; only an incomplete study has missing candidates"
            )
        last_run = max((run.id for run in study_runs(session, study_id=study_id)), default=0)
        phase = "measuring the missing candidates"
        state = {**(study.state or {}), MEASURE_FROM_RUN: last_run, "phase": phase}
        return {"status": "running", "state": state, "finished_at": None}

    with new_session(engine) as session:
        return crud.change_study(session, study_id=study_id, decide=decide)


def cancel_study(engine: Engine, study_id: int) -> Study:
    """Cancel the study and its queued and in-flight runs."""
    study = _change_status(engine, study_id, ACTIVE_STUDY_STATUSES, "cancelled", "cancelled")
    with new_session(engine) as session:
        for run in unfinished(study_runs(session, study_id=study_id)):
            crud.request_cancel(session, run_id=run.id)
    return study
