"""SSH-only behaviour against a real sshd: host keys, auth failures, reachability, reuse, drops, jumps."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import httpx
import paramiko
import pytest

from perflab.inventory import AuthConfig
from perflab.transport import (
    AuthenticationFailed,
    ConnectionLost,
    HostUnreachable,
    SSHTransport,
    UnknownHostKey,
    open_transport,
)
from perflab.transport.connections import POOL
from perflab.transport.ssh import render_command
from tests.fixtures.polling import wait_until
from tests.fixtures.sshd import MAX_SESSIONS, SshServer, TcpProxy, free_port, keygen


def ssh_keygen_fingerprint(public_key: Path) -> str:
    out = subprocess.run(["ssh-keygen", "-lf", str(public_key)], capture_output=True, text=True, check=True)
    return out.stdout.split()[1]


def test_unknown_host_key_is_refused_with_its_fingerprint(sshd: SshServer, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    host = sshd.host_config("fresh", known_hosts=str(empty))
    with pytest.raises(UnknownHostKey) as caught:
        open_transport(host)
    error = caught.value
    assert error.fingerprint == ssh_keygen_fingerprint(sshd.host_key.with_suffix(".pub"))
    assert error.fingerprint in str(error) and "trust_on_first_use" in str(error)
    assert not error.changed
    assert not empty.exists(), "a refused key must not be saved"


def test_changed_host_key_is_refused(sshd: SshServer, tmp_path: Path) -> None:
    other = keygen(tmp_path / "other_key")
    public = other.with_suffix(".pub").read_text().split()
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} {public[0]} {public[1]}\n")
    with pytest.raises(UnknownHostKey) as caught:
        open_transport(sshd.host_config("changed", known_hosts=str(known)))
    assert caught.value.changed
    assert "CHANGED" in str(caught.value) and "ssh-keygen -R" in str(caught.value)


def test_trust_on_first_use_saves_the_key_once(sshd: SshServer, tmp_path: Path) -> None:
    known = tmp_path / "sub" / "known_hosts"
    host = sshd.host_config("tofu", known_hosts=str(known), trust_on_first_use=True)
    with open_transport(host) as transport:
        assert transport.run(["true"], timeout=20).ok
    assert known.read_text().split()[1:] == sshd.known_hosts_line().split()[1:]
    strict = sshd.host_config("tofu-strict", known_hosts=str(known))
    with open_transport(strict) as transport:
        assert transport.run(["echo", "known now"], timeout=20).stdout == "known now\n"
    assert len(known.read_text().splitlines()) == 1


def test_wrong_key_is_refused(sshd: SshServer, tmp_path: Path) -> None:
    wrong = keygen(tmp_path / "wrong_key")
    host = sshd.host_config("wrong-key", auth=AuthConfig(key_file=str(wrong), agent=False))
    with pytest.raises(AuthenticationFailed) as caught:
        open_transport(host)
    assert "refused the login of user" in str(caught.value) and str(wrong) in str(caught.value)


def test_missing_key_file_and_unset_password_variable(sshd: SshServer, tmp_path: Path, monkeypatch) -> None:
    missing = sshd.host_config("no-key", auth=AuthConfig(key_file=str(tmp_path / "absent"), agent=False))
    with pytest.raises(AuthenticationFailed, match="does not exist"):
        open_transport(missing)
    monkeypatch.delenv("PERFLAB_TEST_PASSWORD", raising=False)
    by_password = sshd.host_config("pw", auth=AuthConfig(password_env="PERFLAB_TEST_PASSWORD", agent=False))
    with pytest.raises(AuthenticationFailed, match="PERFLAB_TEST_PASSWORD, which is not set"):
        open_transport(by_password)


def test_password_login_is_refused_by_a_key_only_server(sshd: SshServer, monkeypatch) -> None:
    monkeypatch.setenv("PERFLAB_TEST_PASSWORD", "not-stored-anywhere")
    host = sshd.host_config("pw-set", auth=AuthConfig(password_env="PERFLAB_TEST_PASSWORD", agent=False))
    with pytest.raises(AuthenticationFailed):
        open_transport(host)


def test_unreachable_port(sshd: SshServer) -> None:
    host = sshd.host_config("nobody-home", port=free_port(), connect_attempts=2)
    with pytest.raises(HostUnreachable) as caught:
        open_transport(host)
    assert "connection refused" in str(caught.value) and "nobody-home" in str(caught.value)


def test_a_port_that_is_not_ssh(sshd: SshServer) -> None:
    import socket

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def answer_garbage() -> None:
        conn, _ = server.accept()
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        conn.close()

    threading.Thread(target=answer_garbage, daemon=True).start()
    host = sshd.host_config("not-ssh", port=port, connect_timeout_s=3)
    with pytest.raises(HostUnreachable, match="handshake"):
        open_transport(host)
    server.close()


def test_one_connection_is_shared_by_threads(sshd: SshServer) -> None:
    host = sshd.host_config("shared")
    first = open_transport(host)
    second = open_transport(host)
    assert isinstance(first, SSHTransport) and isinstance(second, SSHTransport)
    assert POOL.client(host) is POOL.client(host)
    results: list[str] = []
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            transport = first if index % 2 else second
            out = transport.run([sys.executable, "-c", f"print({index} * {index})"], timeout=30).stdout
            results.append(out.strip())
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert sorted(results, key=int) == [str(i * i) for i in range(8)]


def test_connection_dropped_mid_command(sshd: SshServer, tcp_proxy: TcpProxy, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts_line(tcp_proxy.port))
    host = sshd.host_config("dropped", port=tcp_proxy.port, known_hosts=str(known))
    transport = open_transport(host)
    with (
        pytest.raises(ConnectionLost, match="dropped while 'sh' ran"),
        transport.stream(["sh", "-c", "echo started; sleep 5"], timeout=60) as stream,
    ):
        for line in stream:
            assert line == "started"
            tcp_proxy.cut()
    with pytest.raises(ConnectionLost):
        _cut_during_run(transport, tcp_proxy)
    assert transport.run(["echo", "reconnected"], timeout=20).stdout == "reconnected\n"


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_forward_outlives_the_connection_it_began_on(
    sshd: SshServer, tcp_proxy: TcpProxy, tmp_path: Path, http_server: int
) -> None:
    """A run's forward to its engine (its health and /metrics) stays usable after the SSH connection
    under it drops: the next HTTP connection gets its channel on the host's new connection."""
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts_line(tcp_proxy.port))
    host = sshd.host_config("forwarded", port=tcp_proxy.port, known_hosts=str(known))
    with open_transport(host) as transport, transport.forward(http_server) as local_port:
        url = f"http://127.0.0.1:{local_port}/metrics"
        assert httpx.get(url, timeout=10).text == "hello from /metrics"
        tcp_proxy.cut()
        assert httpx.get(url, timeout=10).text == "hello from /metrics"
        assert tcp_proxy.accepted == 2  # the second answer came over a new SSH connection


def test_a_connection_slow_to_open_a_session_keeps_its_running_commands(
    sshd: SshServer, tcp_proxy: TcpProxy, tmp_path: Path
) -> None:
    """A host too busy to open a channel within the connect timeout is not a dropped connection: the
    new command runs on another connection, and the command already running on the slow one goes on to
    its end once the host answers again."""
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts_line(tcp_proxy.port))
    host = sshd.host_config("busy-host", port=tcp_proxy.port, known_hosts=str(known), connect_timeout_s=2)
    transport = open_transport(host)
    with transport.stream(["sh", "-c", "echo started; sleep 4; echo finished"], timeout=60) as stream:
        lines = iter(stream)
        assert next(lines) == "started"
        tcp_proxy.stall()
        try:
            assert (
                transport.run(["echo", "on another connection"], timeout=30).stdout
                == "on another connection\n"
            )
        finally:
            tcp_proxy.resume()
        assert list(lines) == ["finished"]
    assert stream.exit_status == 0
    assert tcp_proxy.accepted == 2


def _sessions_open(link: paramiko.Transport, count: int) -> bool:
    """Whether the host opens ``count`` more sessions on ``link`` at once (sshd refuses past MaxSessions)."""
    opened: list[paramiko.Channel] = []
    try:
        for _ in range(count):
            opened.append(link.open_session(timeout=10))
    except paramiko.ChannelException:
        return False
    finally:
        for chan in opened:
            chan.close()
    return True


def test_a_session_a_busy_host_opens_after_perflab_stopped_waiting_is_closed(
    sshd: SshServer, tcp_proxy: TcpProxy, tmp_path: Path
) -> None:
    """A host that answers a session request only after the connect timeout: the command runs on another
    connection, and the session the host opens late on the slow one is closed. paramiko forgets a channel
    whose opening timed out, so the host would keep that session open on a live connection, one fewer of
    sshd's MaxSessions for every later command."""
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts_line(tcp_proxy.port))
    # the connect timeout also bounds the other connection's handshake, which a loaded machine slows
    host = sshd.host_config("late-session", port=tcp_proxy.port, known_hosts=str(known), connect_timeout_s=5)
    transport = open_transport(host)
    assert transport.run(["true"], timeout=30).ok
    slow = POOL.client(host).get_transport()
    assert slow is not None
    tcp_proxy.stall()
    try:
        assert transport.run(["echo", "elsewhere"], timeout=30).stdout == "elsewhere\n"
    finally:
        tcp_proxy.resume()
    assert tcp_proxy.accepted == 2 and slow.is_active()
    # the late session's close (and each check's own closes) reach the host a moment after they are sent
    wait_until(
        lambda: _sessions_open(slow, MAX_SESSIONS),
        interval_s=0.5,
        failure="sshd did not open every session on the slow connection",
    )


def _cut_during_run(transport: SSHTransport, proxy: TcpProxy) -> None:
    timer = threading.Timer(0.5, proxy.cut)
    timer.start()
    try:
        transport.run(["sleep", "5"], timeout=60)
    finally:
        timer.cancel()


def test_jump_host(sshd: SshServer) -> None:
    bastion = sshd.host_config("bastion")
    target = sshd.host_config("behind", jump="bastion").with_jump_host(bastion)
    with open_transport(target) as transport:
        assert transport.run(["echo", "via jump"], timeout=20).stdout == "via jump\n"
    assert POOL.client(target) is not POOL.client(bastion)


def test_rendered_command_is_one_quoted_argv() -> None:
    command = render_command(["echo", "a b", "$(id)"], {"K": "v w"}, "/tmp/x y")
    assert command.startswith("sh -c ")
    assert "'$(id)'" in command and "'K=v w'" in command and "'/tmp/x y'" in command


def test_more_concurrent_commands_than_sshd_sessions_per_connection(sshd: SshServer) -> None:
    """sshd allows 10 sessions per connection by default; the pool opens another connection for more."""
    host = sshd.host_config("busy")
    transport = open_transport(host)
    streams = [transport.stream(["sh", "-c", f"sleep 1; echo {index}"], timeout=60) for index in range(14)]
    outputs = [list(stream) for stream in streams]
    assert outputs == [[str(index)] for index in range(14)]
    assert all(stream.exit_status == 0 for stream in streams)


def test_pid_line_is_found_after_login_shell_noise() -> None:
    from perflab.transport.ssh import _PidFilter

    pids = _PidFilter()
    passed = pids.feed(b"pyenv: cannot rehash\nPERFLAB_") + pids.feed(b"PID=4242\nreal stderr") + pids.flush()
    assert pids.pid == 4242 and passed == b"pyenv: cannot rehash\nreal stderr"
    plain = _PidFilter()
    assert plain.feed(b"no pid here\n") == b"no pid here\n" and plain.pid is None
