"""Host key checking: refuse unknown keys by default, or trust and record them on first use (opt-in).

Fingerprints are shown the way OpenSSH shows them (``SHA256:<base64>``) so a user can compare them
with ``ssh-keygen -lf`` on the host.
"""

from __future__ import annotations

import base64
import hashlib
import os
import threading
from pathlib import Path

import paramiko

from perflab.inventory import HostConfig
from perflab.transport.errors import UnknownHostKey

_KNOWN_HOSTS_LOCK = threading.Lock()


def fingerprint(key: paramiko.PKey) -> str:
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


def known_hosts_path(host: HostConfig) -> Path:
    return Path(os.path.expanduser(host.known_hosts))


def known_hosts_name(host: HostConfig) -> str:
    """The name a host's key is filed under in known_hosts (``[addr]:port`` for a non-default port)."""
    assert host.address is not None
    return host.address if host.port == 22 else f"[{host.address}]:{host.port}"


def unknown_key_error(host: HostConfig, key: paramiko.PKey) -> UnknownHostKey:
    path = host.known_hosts
    scan = f"ssh-keyscan -p {host.port} {host.address} >> {path}"
    return UnknownHostKey(
        host.name,
        f"Host '{host.name}' ({host.address}:{host.port}) presented a {key.get_name()} key with fingerprint "
        f"{fingerprint(key)} that is not in {path}; perflab refuses unknown host keys.",
        f"Compare the fingerprint with `ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub` on the host, then run "
        f"`{scan}` (or ssh to it once and accept), or set `trust_on_first_use: true` for this host in "
        f"hosts.yaml.",
        fingerprint=fingerprint(key),
        key_type=key.get_name(),
        changed=False,
    )


def changed_key_error(host: HostConfig, presented: paramiko.PKey, expected: paramiko.PKey) -> UnknownHostKey:
    return UnknownHostKey(
        host.name,
        f"The host key of '{host.name}' ({host.address}:{host.port}) CHANGED: {host.known_hosts} records "
        f"{fingerprint(expected)}, the host presented {fingerprint(presented)}. The host may have been "
        f"reinstalled, or someone may be intercepting the connection; perflab refuses to connect.",
        f"If the change is expected, remove the old entry with "
        f"`ssh-keygen -R '{known_hosts_name(host)}' -f {host.known_hosts}` and trust the new key.",
        fingerprint=fingerprint(presented),
        key_type=presented.get_name(),
        changed=True,
    )


class RefuseUnknownKeys(paramiko.MissingHostKeyPolicy):
    """Refuse any key not already in known_hosts, explaining how to trust it."""

    def __init__(self, host: HostConfig) -> None:
        self._host = host

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        raise unknown_key_error(self._host, key)


class TrustOnFirstUse(paramiko.MissingHostKeyPolicy):
    """Accept an unknown key once and append it to the host's known_hosts file."""

    def __init__(self, host: HostConfig) -> None:
        self._host = host

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        client.get_host_keys().add(hostname, key.get_name(), key)
        entry = paramiko.hostkeys.HostKeyEntry([hostname], key)
        path = known_hosts_path(self._host)
        with _KNOWN_HOSTS_LOCK:
            path.parent.mkdir(parents=True, exist_ok=True)
            needs_newline = (
                path.exists() and not path.read_bytes().endswith(b"\n") and path.stat().st_size > 0
            )
            with open(path, "a", encoding="utf-8") as handle:
                os.chmod(path, 0o600)
                handle.write(("\n" if needs_newline else "") + entry.to_line())
