"""Stopping everything a run started on its host, from what ``run.remote_state`` recorded.

The runner calls this when a run ends (always), and the worker calls it for runs left in flight by a
worker that died: the record names the host, the run key and every process the run meant to start,
written before each started — the engines, and the benchmark in flight (on the host, or on the app's
machine when it was forwarded) — so nothing can be left behind unseen. The benchmark is stopped
first, so it writes its partial result while its engines still answer. An engine run from an image
is stopped through its runtime (``stop -t <grace>``, then ``rm``) before its supervising process; the
run's containers are those labelled with its run key (a container of the same name that perflab did
not start for this run is left alone), and the file that gave a container the host's secrets goes
too. Transient SSH failures while stopping are retried with backoff.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from perflab.containers import control
from perflab.containers.launch import env_file_path
from perflab.remote import process as rp
from perflab.runner.bench_record import recorded_bench, store_in_flight
from perflab.runner.store import RunStore
from perflab.transport.base import Transport
from perflab.transport.retry import RETRY_DELAYS_S, retrying

HEAD_SHARE = 40
EXCERPT_TIMEOUT_S = 30.0
# excerpt LOG HEAD TAIL: the whole log if short, else its first HEAD and last TAIL lines.
EXCERPT_SCRIPT = r"""
[ -f "$1" ] || exit 0
total=$(wc -l < "$1")
if [ "$total" -le $(($2 + $3)) ]; then cat -- "$1"; exit 0; fi
head -n "$2" -- "$1"
echo "[... $((total - $2 - $3)) lines omitted ...]"
tail -n "$3" -- "$1"
"""


def recorded_processes(transport: Transport, remote_state: Mapping[str, Any]) -> list[rp.RemoteProcess]:
    """The processes of the record that were actually started (their pid file exists)."""
    run_key = remote_state["run_key"]
    found = []
    for entry in remote_state.get("processes", []):
        try:
            found.append(rp.load_process(transport, run_key, entry["name"]))
        except FileNotFoundError:
            continue
    return found


def _outcome(stopped: rp.StopResult) -> str:
    return stopped.outcome if stopped.clean else f"left: {' '.join(map(str, stopped.left))}"


def _stop_once(transport: Transport, remote_state: Mapping[str, Any], grace_s: float) -> dict[str, str]:
    outcomes = {}
    bench = recorded_bench(transport, remote_state)
    if bench is not None:
        stopped = rp.stop(bench.transport, bench.process, grace_s)
        if stopped.outcome != "none":
            outcomes[bench.process.name] = _outcome(stopped)
    outcomes.update(_stop_containers(transport, remote_state, grace_s))
    for process in recorded_processes(transport, remote_state):
        stopped = _outcome(rp.stop(transport, process, grace_s))
        if process.name not in outcomes or stopped.startswith("left"):
            outcomes[process.name] = stopped
    return outcomes


def _stop_containers(transport: Transport, remote_state: Mapping[str, Any], grace_s: float) -> dict[str, str]:
    """Stop and remove the containers labelled with the run key: ``{process name: outcome}`` (the
    container's name when the record does not name it); the recorded ones' secrets files go too."""
    runtime = remote_state.get("container_runtime")
    if runtime is None:
        return {}
    recorded = {
        entry["container"]: entry["name"]
        for entry in remote_state.get("processes", [])
        if entry.get("container")
    }
    outcomes = {
        recorded.get(container, container): control.stop_container(transport, runtime, container, grace_s)
        for container in control.run_containers(transport, runtime, remote_state["run_key"])
    }
    for container in recorded:
        transport.run(["rm", "-f", "--", env_file_path(remote_state["run_dir"], container)], timeout=30.0)
    return outcomes


def stop_recorded(
    transport: Transport,
    remote_state: Mapping[str, Any],
    *,
    grace_s: float,
    retry_delays_s: Sequence[float] = RETRY_DELAYS_S,
) -> dict[str, str]:
    """Stop every recorded process; returns ``{name: outcome}`` (``none``, ``term``, ``kill`` or
    ``left: <pids>`` when some survived even KILL; the benchmark only when it still ran). Stopping is
    idempotent, so a dropped connection or a timeout is retried after each of ``retry_delays_s`` (the
    SSH pool reconnects) before it raises."""
    return retrying(lambda: _stop_once(transport, remote_state, grace_s), retry_delays_s)


def _excerpt(transport: Transport, process: rp.RemoteProcess, lines: int) -> str:
    head = lines * HEAD_SHARE // 100
    result = transport.run(
        ["sh", "-c", EXCERPT_SCRIPT, "perflab-log-excerpt", process.log_path, str(head), str(lines - head)],
        timeout=EXCERPT_TIMEOUT_S,
    )
    return result.stdout if result.ok else ""


def log_excerpt(transport: Transport, remote_state: Mapping[str, Any], *, lines: int) -> str | None:
    """About ``lines`` lines of each recorded process's log: its start-up (the first 40%) and its end,
    with a marker for what lies between; headed by the process name when there are several."""
    processes = recorded_processes(transport, remote_state)
    if not processes:
        return None
    if len(processes) == 1:
        return _excerpt(transport, processes[0], lines)
    return "\n".join(
        f"==> {process.name}.log <==\n{_excerpt(transport, process, lines)}" for process in processes
    )


def wind_down(
    transport: Transport,
    store: RunStore,
    remote_state: dict[str, Any],
    *,
    grace_s: float,
    log_lines: int,
    retry_delays_s: Sequence[float] = RETRY_DELAYS_S,
) -> str | None:
    """The end of a run on its host: stop everything recorded (outcomes in ``remote_state["stopped"]``;
    retried after each of ``retry_delays_s`` while the connection is lost), store the result the
    benchmark in flight left, and return the engine log excerpt."""
    remote_state["stopped"] = stop_recorded(
        transport, remote_state, grace_s=grace_s, retry_delays_s=retry_delays_s
    )
    store_in_flight(transport, store, remote_state, store.load().profiles)
    return log_excerpt(transport, remote_state, lines=log_lines)
