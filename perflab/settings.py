"""Where perflab finds its files and how long runs and workers wait, each read from one environment
variable with a default that suits a real deployment.

- ``PERFLAB_HOSTS``: the hosts file (default ``<repo>/hosts.yaml``); owned by
  :func:`perflab.inventory.default_inventory_path`.
- ``PERFLAB_DATABASE_URL``: the database; :func:`db.session.database_url` owns it and
  :func:`open_database` connects to it (schema brought up to date) for ``run`` and ``worker`` (the
  commands with ``--url`` use :mod:`perflab.cli_database`).
- ``PERFLAB_READY_TIMEOUT_S``: how long an engine may take to become ready (default 20 min for real
  engines, 5 min on simulated hosts).
- ``PERFLAB_APP_WORKER``: ``0`` stops the web app from starting its in-process worker (teams that run
  ``python -m perflab worker`` processes instead).
- ``PERFLAB_WORKER_STALE_S``: a worker whose heartbeat is older than this is taken for dead (default 60 s).
- ``PERFLAB_STUDY_RETRY_DELAYS_S``: comma-separated seconds a study waits before measuring again a
  configuration whose run the infrastructure failed, one per retry (default ``30,120``: three attempts).
- ``PERFLAB_APP_WORKDIR``: perflab's directory on the app's machine, where a benchmark forwarded from a
  host without a usable Python keeps its run directory (default ``~/.perflab/app``).
- ``PERFLAB_DATASET_DIRS``: directories of the app's machine (separated by ``:``) whose files benchmark
  profiles may name as datasets, for every host (default none: only stored datasets and a host's
  ``dataset_dirs``); see :mod:`perflab.dataset_dirs`.
- ``PERFLAB_SPOOL_DIR``: where a run keeps its results while the database cannot take them, until they
  are stored (default ``<repo>/var/spool``); see :mod:`perflab.runner.spool`.
- ``PERFLAB_APP_URL``: the web app's address as its users open it, for the links commands print
  (``perflab run`` prints the run page's); unset, the address the app serving the same SQLite
  database recorded, else the port of the app's ``.streamlit/config.toml`` on localhost
  (:mod:`perflab.app_address`).
- ``PERFLAB_HUB_CACHE``: where datasets fetched from the Hugging Face hub are kept on the app's machine
  (default ``~/.cache/perflab/hub``); a declared dataset location (:mod:`perflab.hub`).
"""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from db.session import REPO_ROOT, database_url, describe, get_engine, upgrade
from perflab import app_address

READY_TIMEOUT_ENV = "PERFLAB_READY_TIMEOUT_S"
APP_WORKER_ENV = "PERFLAB_APP_WORKER"
WORKER_STALE_ENV = "PERFLAB_WORKER_STALE_S"
APP_WORKDIR_ENV = "PERFLAB_APP_WORKDIR"
DATASET_DIRS_ENV = "PERFLAB_DATASET_DIRS"
SPOOL_DIR_ENV = "PERFLAB_SPOOL_DIR"
STUDY_RETRY_ENV = "PERFLAB_STUDY_RETRY_DELAYS_S"
HUB_CACHE_ENV = "PERFLAB_HUB_CACHE"
APP_URL_ENV = "PERFLAB_APP_URL"

REAL_READY_TIMEOUT_S = 20 * 60.0
SIMULATED_READY_TIMEOUT_S = 5 * 60.0
DEFAULT_WORKER_STALE_S = 60.0
DEFAULT_APP_WORKDIR = "~/.perflab/app"
DEFAULT_STUDY_RETRY_DELAYS_S: tuple[float, ...] = (30.0, 120.0)
DEFAULT_HUB_CACHE = "~/.cache/perflab/hub"


class SettingError(ValueError):
    """An environment variable holds a value perflab cannot use."""


def _positive_seconds(name: str, default: float) -> float:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise SettingError(f"{name}={text!r}: expected a number of seconds") from None
    if value <= 0:
        raise SettingError(f"{name}={text!r}: must be > 0")
    return value


def ready_timeout_s(*, simulated: bool) -> float:
    """Seconds an engine may take from launch to ready before the run fails with ``timeout``."""
    return _positive_seconds(
        READY_TIMEOUT_ENV, SIMULATED_READY_TIMEOUT_S if simulated else REAL_READY_TIMEOUT_S
    )


def app_worker_enabled() -> bool:
    """Whether the web app starts its in-process worker (``PERFLAB_APP_WORKER`` is not ``0``)."""
    return os.environ.get(APP_WORKER_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def worker_stale_s() -> float:
    """Seconds without a heartbeat after which a worker is taken for dead."""
    return _positive_seconds(WORKER_STALE_ENV, DEFAULT_WORKER_STALE_S)


def study_retry_delays_s() -> tuple[float, ...]:
    """Seconds before each new attempt at a study configuration the infrastructure kept from being
    measured (``PERFLAB_STUDY_RETRY_DELAYS_S``; empty items are not allowed, ``0`` retries at once)."""
    text = os.environ.get(STUDY_RETRY_ENV, "").strip()
    if not text:
        return DEFAULT_STUDY_RETRY_DELAYS_S
    try:
        delays = tuple(float(item) for item in text.split(","))
    except ValueError:
        raise SettingError(f"{STUDY_RETRY_ENV}={text!r}: expected seconds separated by commas") from None
    if any(delay < 0 for delay in delays):
        raise SettingError(f"{STUDY_RETRY_ENV}={text!r}: delays must be >= 0")
    return delays


def check() -> None:
    """Read every setting that has a format once; :class:`SettingError` names the first bad one."""
    ready_timeout_s(simulated=False)
    worker_stale_s()
    study_retry_delays_s()
    app_url()


def app_workdir() -> str:
    """perflab's directory on the app's machine: ``$PERFLAB_APP_WORKDIR`` or ``~/.perflab/app``."""
    return os.environ.get(APP_WORKDIR_ENV, "").strip() or DEFAULT_APP_WORKDIR


def open_database() -> Engine:
    """The configured database with its schema up to date; :class:`SettingError` says why not."""
    try:
        engine = get_engine()
        upgrade(engine)
    except (sa.exc.SQLAlchemyError, ImportError) as exc:
        reason = str(exc).splitlines()[0]
        raise SettingError(f"cannot use the database {describe()}: {reason}") from None
    return engine


def dataset_dirs() -> list[Path]:
    """The directories ``PERFLAB_DATASET_DIRS`` declares (``:``-separated, ``~`` expanded)."""
    text = os.environ.get(DATASET_DIRS_ENV, "")
    return [Path(part.strip()).expanduser() for part in text.split(os.pathsep) if part.strip()]


def spool_dir() -> Path:
    """Where runs keep writes the database could not take: ``$PERFLAB_SPOOL_DIR`` or ``<repo>/var/spool``."""
    text = os.environ.get(SPOOL_DIR_ENV, "").strip()
    return Path(text).expanduser() if text else REPO_ROOT / "var" / "spool"


def hub_cache_dir() -> Path:
    """Where hub datasets are cached: ``$PERFLAB_HUB_CACHE`` or ``~/.cache/perflab/hub``."""
    return Path(os.environ.get(HUB_CACHE_ENV, "").strip() or DEFAULT_HUB_CACHE).expanduser()


def app_url() -> str:
    """The web app's base address, no slash: ``PERFLAB_APP_URL``, else the address the app serving
    this database recorded while it runs, else the one its settings file gives
    (:mod:`perflab.app_address`)."""
    value = os.environ.get(APP_URL_ENV, "").strip()
    if not value:
        return app_address.recorded(database_url()) or app_address.configured()
    if not value.startswith(("http://", "https://")):
        raise SettingError(f"{APP_URL_ENV}={value!r}: expected an http:// or https:// address")
    return value.rstrip("/")


def run_page_url(run_id: int) -> str:
    """The address of run ``run_id``'s page in the web app."""
    return f"{app_url()}/run?run={run_id}"
