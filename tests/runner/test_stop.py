"""Stopping what a run recorded: retried across a dropped SSH connection; log excerpts."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from perflab.inventory import HostConfig
from perflab.remote import process as rp
from perflab.runner.stop import log_excerpt, stop_recorded
from perflab.transport import open_transport
from perflab.transport.base import Transport
from perflab.transport.errors import ConnectionLost
from tests.fixtures.runs import run_key_pids
from tests.fixtures.sshd import SshServer, TcpProxy

# A process that ignores TERM (it only touches the file named by its argument), so stopping it takes the
# whole grace period and then KILL.
STUBBORN = 'trap "touch $0" TERM; while :; do sleep 0.1; done'


def _stop_while_cut(
    transport: Transport, proxy: TcpProxy, run_key: str, retries: tuple[float, ...], marker: Path
) -> dict[str, str]:
    """Stop a stubborn engine and cut the SSH connection once its TERM has come: inside the stop's grace
    period, however slow the machine is to get there."""
    rp.start_detached(transport, ["sh", "-c", STUBBORN, str(marker)], run_key=run_key, name="engine-0")
    state = {"run_key": run_key, "processes": [{"name": "engine-0"}, {"name": "engine-1"}]}
    stopped = threading.Event()

    def cut_when_termed() -> None:
        while not stopped.wait(0.02):
            if marker.exists():
                proxy.cut()
                return

    cutter = threading.Thread(target=cut_when_termed, daemon=True)
    cutter.start()
    try:
        return stop_recorded(transport, state, grace_s=1.5, retry_delays_s=retries)
    finally:
        stopped.set()
        cutter.join()


def test_a_stop_cut_off_by_a_dropped_connection_is_retried(
    sshd: SshServer, tcp_proxy: TcpProxy, tmp_path: Path
) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts_line(tcp_proxy.port))
    host = sshd.host_config("flaky", port=tcp_proxy.port, known_hosts=str(known), workdir=str(tmp_path / "w"))
    with open_transport(host) as transport:
        with pytest.raises(ConnectionLost):
            _stop_while_cut(transport, tcp_proxy, "run-once", retries=(), marker=tmp_path / "once.term")
        rp.cleanup_leftovers(transport, rp.find_leftovers(transport), grace_s=0.5)

        outcome = _stop_while_cut(
            transport, tcp_proxy, "run-retried", retries=(0.2,), marker=tmp_path / "retried.term"
        )

    # The cut-off first attempt may still finish its KILL on the host before the retry looks.
    assert outcome in ({"engine-0": "kill"}, {"engine-0": "term"})
    assert run_key_pids("run-retried") == [] and run_key_pids("run-once") == []


def test_a_long_log_keeps_its_start_and_its_end(tmp_path: Path) -> None:
    host = HostConfig(name="here", transport="local", workdir=str(tmp_path / "w"))
    with open_transport(host) as transport:
        lines = rp.start_detached(transport, ["seq", "1", "1000"], run_key="run-log", name="engine-0")
        short = rp.start_detached(transport, ["seq", "1", "5"], run_key="run-log", name="engine-1")
        for process in (lines, short):
            while rp.process_state(transport, process).running:
                pass
        state = {"run_key": "run-log", "processes": [{"name": "engine-0"}, {"name": "engine-1"}]}
        excerpt = log_excerpt(transport, state, lines=10)

    assert excerpt == (
        "==> engine-0.log <==\n1\n2\n3\n4\n[... 990 lines omitted ...]\n995\n996\n997\n998\n999\n1000\n"
        "\n==> engine-1.log <==\n1\n2\n3\n4\n5\n"
    )
