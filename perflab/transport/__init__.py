"""How perflab reaches a host: one Transport interface, an SSH and a local implementation.

``open_transport(host)`` picks the implementation from the host's ``transport`` field; for a host whose
entry says ``simulate:``, it also installs the simulator's shims on the host (once per content) and
applies their environment to every command, so the rest of perflab cannot tell the difference.
"""

from __future__ import annotations

from perflab.inventory import HostConfig
from perflab.secrets import SecretUnavailable, host_secret_env
from perflab.transport.base import CommandResult, CommandStream, Transport
from perflab.transport.connections import POOL
from perflab.transport.errors import (
    AuthenticationFailed,
    CommandFailed,
    CommandTimeout,
    ConnectionLost,
    FileTooLarge,
    HostUnreachable,
    OutputTooLarge,
    TransportError,
    UnknownHostKey,
)
from perflab.transport.local import LocalTransport
from perflab.transport.ssh import SSHTransport

__all__ = [
    "AuthenticationFailed",
    "CommandFailed",
    "CommandResult",
    "CommandStream",
    "CommandTimeout",
    "ConnectionLost",
    "FileTooLarge",
    "HostUnreachable",
    "LocalTransport",
    "OutputTooLarge",
    "SSHTransport",
    "Transport",
    "TransportError",
    "UnknownHostKey",
    "close_all",
    "open_transport",
]


def open_transport(host: HostConfig) -> Transport:
    """A ready transport for ``host`` (its ``secrets:`` read, SSH connection opened, simulator shims
    installed if simulated); :class:`AuthenticationFailed` when a secret cannot be read."""
    try:
        secret_env = host_secret_env(host)
    except SecretUnavailable as exc:
        raise AuthenticationFailed(host.name, str(exc), "Fix the host's secrets: in hosts.yaml.") from None
    transport: Transport
    if host.transport == "local":
        transport = LocalTransport(host)
    else:
        ssh = SSHTransport(host)
        ssh.connect()
        transport = ssh
    transport.secret_env = secret_env
    if host.simulated:
        from perflab.simhost import prepare_host

        transport.extra_env = prepare_host(transport, host)
    return transport


def close_all() -> None:
    """Close every pooled SSH connection (at shutdown, or to force fresh connections)."""
    POOL.close_all()
