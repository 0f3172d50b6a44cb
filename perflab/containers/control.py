"""Engine containers after their start: state, stop and remove, find by label.

Stopping is ``<runtime> stop -t <grace>`` (the image's stop signal, then KILL after the grace) and then
``rm --force``, so no container is left behind; the container's log was already copied to the
replica's log file by its supervising process. A run's containers are found by the label
``perflab.run_key=<run key>`` they were started with (crash recovery too), never by name alone, so a
container of the same name that perflab did not start for this run is left alone.
"""

from __future__ import annotations

from perflab.containers.runtime import LABEL_RUN_KEY, labelled_argv, remove_argv, state_argv, stop_argv
from perflab.transport.base import Transport

COMMAND_TIMEOUT_S = 60.0
KILLED_STATUS = 137


def container_state(transport: Transport, runtime: str, name: str) -> tuple[bool, int | None] | None:
    """``(running, exit code)`` of the container, or None when it does not exist."""
    result = transport.run(state_argv(runtime, name), timeout=COMMAND_TIMEOUT_S)
    if not result.ok:
        return None
    running, _, code = result.stdout.strip().partition(" ")
    return running == "true", int(code) if code.lstrip("-").isdigit() else None


def stop_container(transport: Transport, runtime: str, name: str, grace_s: float) -> str:
    """Stop and remove container ``name``: ``none`` (it was not running), ``term``, ``kill``, or
    ``left: <name>`` when it still exists afterwards."""
    state = container_state(transport, runtime, name)
    outcome = "none"
    if state is not None and state[0]:
        transport.run(stop_argv(runtime, name, grace_s), timeout=grace_s + COMMAND_TIMEOUT_S)
        after = container_state(transport, runtime, name)
        outcome = "kill" if after is not None and after[1] == KILLED_STATUS else "term"
    if state is not None:
        transport.run(remove_argv(runtime, name), timeout=COMMAND_TIMEOUT_S)
        if container_state(transport, runtime, name) is not None:
            return f"left: {name}"
    return outcome


def run_containers(transport: Transport, runtime: str, run_key: str) -> list[str]:
    """The names of every container labelled with ``run_key`` (running or not)."""
    argv = labelled_argv(runtime, LABEL_RUN_KEY, run_key)
    result = transport.run(argv, timeout=COMMAND_TIMEOUT_S, check=True)
    return [line.strip() for line in result.stdout.splitlines() if line.strip()]
