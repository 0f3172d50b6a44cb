"""Runs: one engine config launched on one host and benchmarked with one or more profiles.

- :func:`submit_run` stores a run (queued for a worker, or claimed for the caller);
- :func:`execute_run` drives a claimed run through launching → ready → benchmarking → done, or to
  failed/cancelled, always stopping what it started (:mod:`perflab.runner.execute`);
- :func:`wait_for_runs` waits until runs finish (studies);
- :func:`stop_recorded` stops what a run recorded in ``run.remote_state`` (the wind-down of every run,
  and crash recovery's).
"""

from perflab.runner.errors import (
    INFRASTRUCTURE_FAILURES,
    RUNNER_FAILURE_CLASSES,
    GpusBusy,
    RunCancelled,
    RunFailed,
)
from perflab.runner.execute import EventHandler, RunEvent, execute_run
from perflab.runner.options import RunnerOptions
from perflab.runner.stop import stop_recorded
from perflab.runner.submit import submit_run, wait_for_runs

__all__ = [
    "INFRASTRUCTURE_FAILURES",
    "RUNNER_FAILURE_CLASSES",
    "EventHandler",
    "GpusBusy",
    "RunCancelled",
    "RunEvent",
    "RunFailed",
    "RunnerOptions",
    "execute_run",
    "stop_recorded",
    "submit_run",
    "wait_for_runs",
]
