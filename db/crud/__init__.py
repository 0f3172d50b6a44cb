"""Keyword-only crud functions taking a :class:`sqlmodel.Session`.

Functions that write commit their own short transaction (and first commit whatever the session
had pending); on SQLite that transaction begins with ``BEGIN IMMEDIATE``. Functions that read
never commit. Objects returned stay usable after the session closes when it was made by
:func:`db.session.new_session` / :func:`db.session.session_scope`.
"""

from db.crud.datasets import content_hash, create_dataset, delete_dataset, get_dataset, list_datasets
from db.crud.engine_configs import get_engine_config, upsert_engine_config
from db.crud.errors import IllegalTransition, NotFound
from db.crud.hosts import get_host, list_hosts, record_probe, upsert_host
from db.crud.queue import (
    acquire_gpus,
    claim_next_run,
    gpu_locks,
    recent_gpu_users,
    in_flight_runs,
    list_workers,
    queued_host_names,
    register_worker,
    release_gpus,
    stale_workers,
    worker_heartbeat,
)
from db.crud.results import (
    add_profile_result,
    add_samples,
    count_samples,
    first_results,
    headline_values,
    list_profile_results,
    list_request_records,
    list_samples,
)
from db.crud.run_list import SORT_KEYS, RunPage, RunRow, RunSummary, list_runs, run_filter_choices
from db.crud.runs import (
    ALLOWED_TRANSITIONS,
    create_run,
    delete_run,
    get_run,
    get_runs,
    heartbeat_run,
    request_cancel,
    require_run,
    set_run_status,
    summarize_knobs,
    update_run,
)
from db.crud.studies import (
    add_candidate,
    change_study,
    create_study,
    delete_study,
    get_study,
    list_candidates,
    list_studies,
    update_candidate,
    update_study,
)

__all__ = [
    "ALLOWED_TRANSITIONS",
    "SORT_KEYS",
    "IllegalTransition",
    "NotFound",
    "RunPage",
    "RunRow",
    "RunSummary",
    "acquire_gpus",
    "add_candidate",
    "add_profile_result",
    "add_samples",
    "change_study",
    "claim_next_run",
    "content_hash",
    "count_samples",
    "create_dataset",
    "create_run",
    "create_study",
    "delete_dataset",
    "delete_run",
    "delete_study",
    "first_results",
    "get_dataset",
    "get_engine_config",
    "get_host",
    "get_run",
    "get_runs",
    "get_study",
    "gpu_locks",
    "recent_gpu_users",
    "headline_values",
    "heartbeat_run",
    "in_flight_runs",
    "list_candidates",
    "list_datasets",
    "list_hosts",
    "list_profile_results",
    "list_request_records",
    "list_runs",
    "list_samples",
    "list_studies",
    "list_workers",
    "queued_host_names",
    "record_probe",
    "register_worker",
    "release_gpus",
    "request_cancel",
    "require_run",
    "run_filter_choices",
    "set_run_status",
    "stale_workers",
    "summarize_knobs",
    "update_candidate",
    "update_run",
    "update_study",
    "upsert_engine_config",
    "upsert_host",
    "worker_heartbeat",
]
