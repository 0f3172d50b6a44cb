"""Where perflab finds its files and how long runs and workers wait, each read from one environment
variable with a default that suits a real deployment.

- ``PERFLAB_HOSTS``: the hosts file (default ``<repo>/hosts.yaml``).
- ``PERFLAB_DATABASE_URL``: the database; :func:`db.session.database_url` owns it and
  :func:`open_database` connects to it (schema brought up to date) for the command-line tools.
- ``PERFLAB_READY_TIMEOUT_S``: how long an engine may take to become ready (default 20 min for real
  engines, 5 min on simulated hosts).
- ``PERFLAB_APP_WORKER``: ``0`` stops the web app from starting its in-process worker (teams that run
  ``python -m perflab worker`` processes instead).
- ``PERFLAB_WORKER_STALE_S``: a worker whose heartbeat is older than this is taken for dead (default 60 s).
"""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from db.session import describe, get_engine, upgrade

REPO_ROOT = Path(__file__).resolve().parents[1]
HOSTS_ENV = "PERFLAB_HOSTS"
READY_TIMEOUT_ENV = "PERFLAB_READY_TIMEOUT_S"
APP_WORKER_ENV = "PERFLAB_APP_WORKER"
WORKER_STALE_ENV = "PERFLAB_WORKER_STALE_S"

REAL_READY_TIMEOUT_S = 20 * 60.0
SIMULATED_READY_TIMEOUT_S = 5 * 60.0
DEFAULT_WORKER_STALE_S = 60.0


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


def hosts_path() -> Path:
    """The hosts file: ``$PERFLAB_HOSTS`` or ``hosts.yaml`` at the repository root."""
    configured = os.environ.get(HOSTS_ENV, "").strip()
    return Path(configured).expanduser() if configured else REPO_ROOT / "hosts.yaml"


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


def open_database() -> Engine:
    """The configured database with its schema up to date; :class:`SettingError` says why not."""
    try:
        engine = get_engine()
        upgrade(engine)
    except (sa.exc.SQLAlchemyError, ImportError) as exc:
        reason = str(exc).splitlines()[0]
        raise SettingError(f"cannot use the database {describe()}: {reason}") from None
    return engine
