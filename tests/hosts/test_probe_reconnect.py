"""A probe only reads, so a connection that drops while one of its tools runs is opened again and the
tool asked again: a blip on the way to a host does not fail a run before anything started there. A host
that cannot be reached is still a transport error."""

from __future__ import annotations

import shlex
import threading
import time
from pathlib import Path

import pytest

from perflab.inventory import HostConfig
from perflab.probe import probe_accelerators
from perflab.transport import HostUnreachable, open_transport
from tests.fixtures.sshd import SshServer, TcpProxy
from tests.hosts.test_probe_host import DATA, SYSTEM_PATH, tool

pytestmark = pytest.mark.timeout(120)


def _proxied_host(sshd: SshServer, proxy: TcpProxy, tmp_path: Path, bin_dir: Path) -> HostConfig:
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts_line(proxy.port))
    return sshd.host_config(
        "blip",
        port=proxy.port,
        known_hosts=str(known),
        workdir=str(tmp_path / "work"),
        env={"PATH": f"{bin_dir}:{SYSTEM_PATH}"},
    )


def _cut_once_started(calls: Path, cut: Path, proxy: TcpProxy, done: threading.Event) -> None:
    """Cut every connection through ``proxy`` as soon as the tool wrote its first call (it waits for
    the cut), then say so in ``cut``."""
    while not done.is_set():
        if calls.exists() and calls.read_text():
            proxy.cut()
            cut.touch()
            return
        time.sleep(0.01)


def test_a_connection_dropped_while_nvidia_smi_runs_is_opened_again_and_the_query_asked_again(
    sshd: SshServer, tcp_proxy: TcpProxy, tmp_path: Path
) -> None:
    bin_dir, calls, cut = tmp_path / "bin", tmp_path / "calls", tmp_path / "cut"
    recorded = shlex.quote(str(DATA / "nvidia-smi" / "h100x8-busy.csv"))
    # The first call answers only once its connection was cut (or after 30 s); the next at once.
    tool(
        bin_dir,
        "nvidia-smi",
        f"echo call >> {shlex.quote(str(calls))}\n"
        f'if [ "$(wc -l < {shlex.quote(str(calls))})" -eq 1 ]; then\n'
        f"  for _ in $(seq 600); do [ -e {shlex.quote(str(cut))} ] && break; sleep 0.05; done\n"
        f"fi\ncat {recorded}",
    )
    done = threading.Event()
    cutter = threading.Thread(target=_cut_once_started, args=(calls, cut, tcp_proxy, done), daemon=True)
    with open_transport(_proxied_host(sshd, tcp_proxy, tmp_path, bin_dir)) as transport:
        cutter.start()
        try:
            accelerators = probe_accelerators(transport)
        finally:
            done.set()
            cutter.join(timeout=5)

    assert len(accelerators) == 8 and accelerators[0].utilization_pct == 100
    assert calls.read_text().splitlines() == ["call", "call"]  # the first was cut, the second answered


def test_a_host_that_cannot_be_reached_is_still_a_transport_error(
    sshd: SshServer, tcp_proxy: TcpProxy, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    tool(bin_dir, "nvidia-smi", f"cat {shlex.quote(str(DATA / 'nvidia-smi' / 'h100x8-busy.csv'))}")
    with open_transport(_proxied_host(sshd, tcp_proxy, tmp_path, bin_dir)) as transport:
        assert len(probe_accelerators(transport)) == 8
        tcp_proxy.go_down()
        with pytest.raises(HostUnreachable, match="blip"):
            probe_accelerators(transport)
