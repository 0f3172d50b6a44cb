"""Why a run stops before it is done: each exception maps to one final state of the run.

:class:`RunFailed` carries the failure class and message stored on the run (the adapter's classes from
the engine log, ``timeout``, or one of :data:`RUNNER_FAILURE_CLASSES`); :class:`RunCancelled` means a
user asked to cancel; :class:`GpusBusy` means other runs hold the GPUs, so the run goes back to the queue.

:data:`INFRASTRUCTURE_FAILURES` are the classes that say nothing about the configuration that was run —
the host, the network, the worker or perflab itself stood in the way — so a study measures the
configuration again instead of counting the run as its result.
"""

from __future__ import annotations

from perflab.containers.failures import CONTAINER_FAILURE_CLASSES
from perflab.transport.errors import CommandTimeout, ConnectionLost, HostUnreachable, TransportError

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
    "host_slow": "the host answered a command perflab runs there too slowly",
    "host_error": "a command perflab runs on the host failed",
    "worker_stopped": "the worker shut down while the run was in flight",
    "worker_restarted": "the worker died while the run was in flight",
    "disk_full": "the disk holding the host's workdir was full",
    "internal_error": "perflab itself failed (a bug; the message names the error)",
    **CONTAINER_FAILURE_CLASSES,
}

# Failures of the infrastructure, not of the engine or its configuration. A ready ``timeout`` is not
# one: perflab cannot tell a slow host from a configuration that starts slowly (a large model, a long
# graph capture), so, like an engine's own failure (oom, unknown argument, crash), it stays a result.
INFRASTRUCTURE_FAILURES: dict[str, str] = {
    "host_unknown": "the host left the hosts file",
    "host_unreachable": "the host could not be reached or logged into",
    "connection_lost": "the connection to the host dropped",
    "host_slow": "the host answered perflab's commands too slowly",
    "host_error": "a command perflab runs on the host failed",
    "gpus_unavailable": "the accelerators were held by processes perflab did not start",
    "port_in_use": "another process held the serving port",
    "launch_failed": "the host could not start the engine process",
    "worker_stopped": "the worker shut down under the run",
    "worker_restarted": "the worker died under the run",
    "disk_full": "the disk holding the host's workdir was full",
    "internal_error": "perflab itself failed",
    "transfer_backend_missing": "the KV transfer library of a disaggregated worker was missing on the host",
    "kv_peer_unreachable": "a disaggregated decode worker could not reach its prefill worker",
    "router_missing": "the router of the disaggregated workers was not installed on the host",
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


def transport_failure(error: TransportError, *, local: bool) -> RunFailed:
    """What a host's trouble under a run says: a command of perflab's that ran past its limit names the
    host as slow (``host_slow``; over SSH a stalled connection looks the same, and the message says so);
    a dropped or refused connection is ``connection_lost``, which a local host (no connection) never
    has; any other failure of perflab's own commands there is ``host_error``."""
    if isinstance(error, CommandTimeout):
        stalled = "" if local else " (or its connection stalled)"
        return RunFailed("host_slow", f"host '{error.host}' is slow{stalled}: {error}")
    if isinstance(error, (ConnectionLost, HostUnreachable)) and not local:
        return RunFailed("connection_lost", str(error))
    return RunFailed("host_error", str(error))
