"""The queue's executor: :class:`Worker` claims queued runs, locks GPUs per host, runs them in
parallel threads and recovers runs that dead workers left in flight; :func:`start_app_worker` gives
the web app its one in-process worker."""

from perflab.worker.app import start_app_worker
from perflab.worker.recovery import RESTART_MESSAGE, recover
from perflab.worker.worker import Worker, default_worker_id

__all__ = ["RESTART_MESSAGE", "Worker", "default_worker_id", "recover", "start_app_worker"]
