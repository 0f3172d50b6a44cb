"""Why a run stops before it is done: each exception maps to one final state of the run.

:class:`RunFailed` carries the failure class and message stored on the run (the adapter's classes from
the engine log, ``timeout``, or one of :data:`RUNNER_FAILURE_CLASSES`); :class:`RunCancelled` means a
user asked to cancel; :class:`GpusBusy` means other runs hold the GPUs, so the run goes back to the queue.
"""

from __future__ import annotations

from perflab.containers.failures import CONTAINER_FAILURE_CLASSES

# Failure classes the runner itself assigns (the engine adapters add theirs, e.g. ``oom``), with those
# of engines run from images (pull and container runtime failures).
RUNNER_FAILURE_CLASSES: dict[str, str] = {
    "invalid_config": "the stored config or profiles cannot be run",
    "host_unknown": "the run's host is not in the hosts file",
    "host_unreachable": "the host could not be reached or logged into",
    "gpus_unavailable": "the requested accelerators are missing or used by other processes",
    "dataset_missing": "a profile's dataset could not be found",
    "launch_failed": "the engine process could not be started",
    "engine_died": "the engine exited while it was being benchmarked",
    "bench_failed": "the benchmark itself failed",
    "connection_lost": "the connection to the host dropped during the run",
    "worker_stopped": "the worker shut down while the run was in flight",
    "worker_restarted": "the worker died while the run was in flight",
    "internal_error": "perflab itself failed (a bug; the message names the error)",
    **CONTAINER_FAILURE_CLASSES,
}


class RunFailed(Exception):
    """The run ends ``failed`` with ``failure_class`` and ``message``."""

    def __init__(self, failure_class: str, message: str) -> None:
        super().__init__(message)
        self.failure_class = failure_class
        self.message = message


class RunCancelled(Exception):
    """A user cancelled the run; it ends ``cancelled``."""


class GpusBusy(Exception):
    """The accelerators the run needs are locked by other runs (it waits, or goes back to the queue)."""
