"""The web app's in-process worker: exactly one per server process.

The app calls :func:`start_app_worker` from an ``st.cache_resource`` function, so every page and
browser shares the one worker; a second call returns the same worker. ``PERFLAB_APP_WORKER=0`` turns
it off for teams that run standalone ``python -m perflab worker`` processes.
"""

from __future__ import annotations

import atexit
import threading

from sqlalchemy.engine import Engine

from perflab import settings
from perflab.worker.worker import Worker, default_worker_id

_lock = threading.Lock()
_worker: Worker | None = None


def start_app_worker(engine: Engine) -> Worker | None:
    """The app's running worker (started on first call), or None when ``PERFLAB_APP_WORKER=0``."""
    global _worker
    if not settings.app_worker_enabled():
        return None
    with _lock:
        if _worker is None:
            _worker = Worker(engine, worker_id=default_worker_id("app"))
            _worker.start()
            atexit.register(_worker.stop)
        return _worker
