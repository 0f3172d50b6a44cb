"""Runs: one engine config launched on one host and benchmarked with one or more profiles.

- :func:`submit_run` stores a run (queued for a worker, or claimed for the caller);
- :func:`execute_run` drives a claimed run through launching → ready → benchmarking → done, or to
  failed/cancelled, always stopping what it started (:mod:`perflab.runner.execute`);
- :func:`wait_for_runs` waits until runs finish (studies);
- :func:`stop_recorded` stops what a run recorded in ``run.remote_state`` (the wind-down of every run,
  and crash recovery's).
"""

from perflab.lazy_exports import lazy_exports

__getattr__ = lazy_exports(
    __name__,
    {
        "perflab.runner.errors": (
            "INFRASTRUCTURE_FAILURES",
            "RUNNER_FAILURE_CLASSES",
            "GpusBusy",
            "RunCancelled",
            "RunFailed",
        ),
        "perflab.runner.execute": ("EventHandler", "RunEvent", "execute_run"),
        "perflab.runner.options": ("RunnerOptions",),
        "perflab.runner.stop": ("stop_recorded",),
        "perflab.runner.submit": ("submit_run", "wait_for_runs"),
    },
)
