"""The queue's executor: :class:`Worker` claims queued runs, locks GPUs per host, runs them in
parallel threads and recovers runs that dead workers left in flight; :func:`start_app_worker` gives
the web app its one in-process worker."""

from perflab.lazy_exports import lazy_exports

__getattr__ = lazy_exports(
    __name__,
    {
        "perflab.worker.app": ("start_app_worker",),
        "perflab.worker.recovery": ("RESTART_MESSAGE", "recover"),
        "perflab.worker.worker": ("Worker", "default_worker_id"),
    },
)
