"""Creating runs (for the CLI, the UI and studies) and waiting for them to finish.

:func:`submit_run` validates the config against its engine — one-word values against the registries of the
host's probed engine version where an earlier check cached them, perflab's tables where that version is
unknown or theirs, else left to the engine's own check before launch — (refuses one carrying a secret) and
stores the run with its profiles: ``queued`` for a worker to claim, or ``launching`` already claimed by
``worker_id`` for a caller that executes it itself. A replicated config's summary ends with the seeds' "×N".
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from sqlalchemy.engine import Engine

from db import crud
from db.models import FINISHED_RUN_STATUSES, Run
from db.session import new_session
from perflab.dataset_dirs import DatasetNotDeclared
from perflab.engines import EngineConfig
from perflab.engines.preflight import default_cache, host_adapter
from perflab.env_policy import check_env
from perflab.inventory import HostConfig
from perflab.profiles import BenchmarkProfile
from perflab.redact import check_config
from perflab.runner.bench_record import profile_json
from perflab.runner.datasets import dataset_problem


def _probed_version(engine: Engine, host_name: str, engine_name: str) -> str | None:
    """The version of ``engine_name`` the last probe of ``host_name`` found (None: never probed)."""
    with new_session(engine) as session:
        row = crud.get_host(session, name=host_name)
    engines = ((row.last_probe if row is not None else None) or {}).get("engines") or {}
    version = engines.get(engine_name)
    return str(version) if version is not None else None


def submit_run(
    engine: Engine,
    *,
    host_name: str,
    config: EngineConfig,
    profiles: Sequence[BenchmarkProfile],
    worker_id: str | None = None,
    queued_by: str | None = None,
    label: str | None = None,
    study_id: int | None = None,
    host: HostConfig | None = None,
) -> Run:
    """Store a run of ``config`` on ``host_name`` with ``profiles`` (queued, or launching for
    ``worker_id``). Raises :class:`perflab.engines.EngineConfigError` for a config its engine refuses
    or that carries a secret (:class:`perflab.redact.SecretInConfig`), and ValueError without profiles.
    Given the host's entry, it also refuses a variable the host does not allow
    (:class:`perflab.env_policy.EnvNotAllowed`) and a dataset that is neither stored nor a file under a
    dataset directory declared for the host (:class:`perflab.dataset_dirs.DatasetNotDeclared`, a
    ValueError); the runner checks both again before it launches or sends anything."""
    version = _probed_version(engine, host_name, config.engine)
    host_adapter(
        config.engine, host=host_name, version=version, cache=default_cache(), image=config.image
    ).validate(config)
    check_config(config)
    if not profiles:
        raise ValueError("a run needs at least one benchmark profile")
    if host is not None:
        check_env(config, host)
        problems = [problem for profile in profiles if (problem := dataset_problem(engine, profile, host))]
        if problems:
            raise DatasetNotDeclared(problems[0])
    with new_session(engine) as session:
        return crud.create_run(
            session,
            config=config,
            host_name=host_name,
            profiles=[profile_json(profile) for profile in profiles],
            status="queued" if worker_id is None else "launching",
            worker_id=worker_id,
            queued_by=queued_by,
            label=label,
            study_id=study_id,
        )


def wait_for_runs(
    engine: Engine, run_ids: Sequence[int], *, timeout_s: float, poll_s: float = 1.0
) -> list[Run]:
    """The runs once all are finished (done, failed or cancelled); TimeoutError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        with new_session(engine) as session:
            runs = crud.get_runs(session, run_ids=run_ids)
        if all(run.status in FINISHED_RUN_STATUSES for run in runs):
            return runs
        if time.monotonic() > deadline:
            waiting = ", ".join(
                f"{run.id} ({run.status})" for run in runs if run.status not in FINISHED_RUN_STATUSES
            )
            raise TimeoutError(f"runs still unfinished after {timeout_s:g} s: {waiting}")
        time.sleep(poll_s)
