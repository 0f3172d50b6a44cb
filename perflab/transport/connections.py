"""SSH connections: opening them (auth, host keys, jump hosts, retries) and sharing one per host.

One paramiko client per host configuration is kept open with keepalives and reused by every
transport handle and thread (paramiko multiplexes channels over one connection). A dead connection is
replaced on the next use. Only connecting is retried (with backoff): a failed command is never rerun.
Every paramiko/socket failure is turned into a :mod:`perflab.transport.errors` error a user can act on.
"""

from __future__ import annotations

import atexit
import functools
import getpass
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import paramiko

from perflab.inventory import HostConfig
from perflab.transport.channel_open import open_within
from perflab.transport.errors import (
    AuthenticationFailed,
    ConnectionLost,
    HostUnreachable,
    TransportError,
    UnknownHostKey,
)
from perflab.transport.hostkeys import RefuseUnknownKeys, TrustOnFirstUse, changed_key_error, known_hosts_path

_BACKOFF_S = (0.5, 1.5, 3.0)


def login_user(host: HostConfig) -> str:
    return host.user or getpass.getuser()


def _credentials(host: HostConfig) -> dict[str, Any]:
    """paramiko.connect keyword arguments for the host's auth settings (secrets read from env vars)."""
    auth = host.auth
    kwargs: dict[str, Any] = {"allow_agent": auth.agent, "look_for_keys": auth.key_file is None}
    if auth.key_file is not None:
        key_path = os.path.expanduser(auth.key_file)
        if not os.path.isfile(key_path):
            raise AuthenticationFailed(
                host.name,
                f"The key file {auth.key_file} for host '{host.name}' does not exist on this machine.",
                "Fix auth.key_file in hosts.yaml.",
            )
        kwargs["key_filename"] = key_path
    for variable, argument in ((auth.passphrase_env, "passphrase"), (auth.password_env, "password")):
        if variable is None:
            continue
        value = os.environ.get(variable)
        if value is None:
            raise AuthenticationFailed(
                host.name,
                f"Host '{host.name}' reads its {argument} from the environment variable {variable}, "
                f"which is not set.",
                f"Export {variable} before starting perflab.",
            )
        kwargs[argument] = value
    return kwargs


def _auth_summary(host: HostConfig) -> str:
    offered = []
    if host.auth.key_file:
        offered.append(f"key file {host.auth.key_file}")
    else:
        offered.append("the default keys in ~/.ssh")
    if host.auth.agent:
        offered.append("the ssh-agent's keys")
    if host.auth.password_env:
        offered.append(f"the password in ${host.auth.password_env}")
    return ", ".join(offered)


def _unreachable(host: HostConfig, reason: str, via: str | None = None) -> HostUnreachable:
    route = f" through jump host '{via}'" if via else ""
    return HostUnreachable(
        host.name,
        f"Cannot reach host '{host.name}' at {host.address}:{host.port}{route}: {reason}.",
        "Check that the host is up, the address and port in hosts.yaml are right, and sshd is running.",
    )


def _open_via_jump(host: HostConfig, jump_client: paramiko.SSHClient) -> paramiko.Channel:
    assert host.address is not None and host.jump is not None
    jump_transport = jump_client.get_transport()
    if jump_transport is None or not jump_transport.is_active():
        raise _unreachable(host, "the jump host's connection is closed", host.jump)
    try:
        return open_within(
            functools.partial(
                jump_transport.open_channel, "direct-tcpip", (host.address, host.port), ("127.0.0.1", 0)
            ),
            host.connect_timeout_s,
        )
    except paramiko.ChannelException as exc:
        raise _unreachable(
            host, f"the jump host could not open a connection ({exc.text})", host.jump
        ) from None
    except (paramiko.SSHException, OSError, EOFError) as exc:
        raise _unreachable(
            host, f"the jump host failed to forward ({exc or type(exc).__name__})", host.jump
        ) from None


def connect_once(host: HostConfig, sock: paramiko.Channel | None = None) -> paramiko.SSHClient:
    """One connection attempt; raises a :class:`TransportError` subclass on failure."""
    client = paramiko.SSHClient()
    known_hosts = known_hosts_path(host)
    try:
        if known_hosts.is_file():
            client.load_host_keys(str(known_hosts))
        client.set_missing_host_key_policy(
            TrustOnFirstUse(host) if host.trust_on_first_use else RefuseUnknownKeys(host)
        )
        client.connect(
            hostname=host.address or "",
            port=host.port,
            username=login_user(host),
            timeout=host.connect_timeout_s,
            banner_timeout=host.connect_timeout_s,
            auth_timeout=host.connect_timeout_s,
            channel_timeout=host.connect_timeout_s,
            sock=sock,
            **_credentials(host),
        )
    except BaseException as exc:
        client.close()
        raise _translate(host, exc) from None
    transport = client.get_transport()
    if transport is not None and host.keepalive_s:
        transport.set_keepalive(host.keepalive_s)
    return client


def _translate(host: HostConfig, exc: BaseException) -> BaseException:
    """The perflab error for a failed connect (other exceptions pass through unchanged)."""
    if isinstance(exc, TransportError):
        return exc
    if isinstance(exc, paramiko.BadHostKeyException):
        return changed_key_error(host, exc.key, exc.expected_key)
    if isinstance(exc, paramiko.PasswordRequiredException):
        return AuthenticationFailed(
            host.name,
            f"The key file {host.auth.key_file} for host '{host.name}' is encrypted.",
            "Name the variable holding its passphrase with auth.passphrase_env, or load it into ssh-agent.",
        )
    if isinstance(exc, paramiko.AuthenticationException):
        return AuthenticationFailed(
            host.name,
            f"Host '{host.name}' refused the login of user '{login_user(host)}' "
            f"(offered: {_auth_summary(host)}).",
            "Check the user and that the public key is in the host's ~/.ssh/authorized_keys.",
        )
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return _unreachable(host, f"no answer within {host.connect_timeout_s:g} s")
    if isinstance(exc, socket.gaierror):
        return _unreachable(host, f"the name does not resolve ({exc.strerror})")
    if isinstance(exc, (paramiko.ssh_exception.NoValidConnectionsError, ConnectionRefusedError)):
        return _unreachable(host, "connection refused")
    if isinstance(exc, (OSError, EOFError)):
        return _unreachable(host, str(exc) or type(exc).__name__)
    if isinstance(exc, paramiko.SSHException):
        text = str(exc)
        if "authentication" in text.lower():
            return AuthenticationFailed(
                host.name,
                f"Host '{host.name}': no usable credentials ({text}).",
                "Set auth.key_file, enable auth.agent, or name a password variable with auth.password_env.",
            )
        return _unreachable(host, f"the SSH handshake failed ({text})")
    return exc


@dataclass
class _PoolEntry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    clients: list[paramiko.SSHClient] = field(default_factory=list)

    def prune(self) -> None:
        """Drop (and close) connections that died; call with ``lock`` held."""
        for client in [client for client in self.clients if not _is_alive(client)]:
            client.close()
            self.clients.remove(client)


def _is_alive(client: paramiko.SSHClient) -> bool:
    transport = client.get_transport()
    return transport is not None and transport.is_active()


def pool_key(host: HostConfig) -> str:
    jump = host.jump_host
    return host.model_dump_json() + ("|via|" + pool_key(jump) if jump is not None else "")


class ConnectionPool:
    """Live SSH clients per host configuration, shared by threads.

    Usually one connection per host carries every channel. sshd caps the sessions of one connection
    (``MaxSessions``, 10 by default); when a connection refuses another session, the pool opens
    another connection to the host (up to ``MAX_CONNECTIONS_PER_HOST``).
    """

    MAX_CONNECTIONS_PER_HOST = 8

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, _PoolEntry] = {}

    def _entry(self, host: HostConfig) -> _PoolEntry:
        with self._lock:
            return self._entries.setdefault(pool_key(host), _PoolEntry())

    def client(self, host: HostConfig) -> paramiko.SSHClient:
        """The host's first live client, connecting (with retries on unreachable) if there is none."""
        entry = self._entry(host)
        with entry.lock:
            entry.prune()
            if not entry.clients:
                entry.clients.append(self._connect_with_retries(host))
            return entry.clients[0]

    def open_session(self, host: HostConfig) -> paramiko.Channel:
        """A new session channel to ``host``, on another connection if the server refuses more sessions on
        one or does not open it within the host's connect timeout."""
        entry = self._entry(host)
        tried: list[paramiko.SSHClient] = []
        for _ in range(2 * self.MAX_CONNECTIONS_PER_HOST):
            with entry.lock:
                entry.prune()
                untried = [client for client in entry.clients if client not in tried]
                fresh = not untried
                if fresh:
                    if len(entry.clients) >= self.MAX_CONNECTIONS_PER_HOST:
                        raise ConnectionLost(
                            host.name,
                            f"Host '{host.name}' refused another session on each of "
                            f"{self.MAX_CONNECTIONS_PER_HOST} connections (sshd MaxSessions).",
                        )
                    entry.clients.append(self._connect_with_retries(host))
                    untried = entry.clients[-1:]
                client = untried[0]
            tried.append(client)
            link = client.get_transport()
            try:
                assert link is not None
                return open_within(link.open_session, host.connect_timeout_s)
            except paramiko.ChannelException as exc:
                if fresh:
                    raise ConnectionLost(
                        host.name, f"Host '{host.name}' refused to open a session: {exc.text}"
                    ) from None
            except (paramiko.SSHException, EOFError, OSError, AssertionError):
                # A connection that is still up but did not open the channel in time (a busy host) keeps
                # carrying its other sessions and forwards; only a dead one is dropped.
                if not _is_alive(client):
                    self.discard(host, client)
        raise ConnectionLost(host.name, f"The connections to host '{host.name}' keep dropping.")

    def discard(self, host: HostConfig, client: paramiko.SSHClient) -> None:
        """Forget ``client`` (after it failed) so the next use reconnects."""
        entry = self._entry(host)
        with entry.lock:
            if client in entry.clients:
                entry.clients.remove(client)
        client.close()

    def close_all(self) -> None:
        with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
        for entry in entries:
            with entry.lock:
                for client in entry.clients:
                    client.close()
                entry.clients.clear()

    def _connect_with_retries(self, host: HostConfig) -> paramiko.SSHClient:
        for attempt in range(host.connect_attempts):
            try:
                sock = (
                    _open_via_jump(host, self.client(host.jump_host)) if host.jump_host is not None else None
                )
                return connect_once(host, sock)
            except (AuthenticationFailed, UnknownHostKey):
                raise
            except HostUnreachable:
                if attempt + 1 >= host.connect_attempts:
                    raise
                time.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])
        raise AssertionError("unreachable: the loop returns or raises")


POOL = ConnectionPool()
atexit.register(POOL.close_all)
