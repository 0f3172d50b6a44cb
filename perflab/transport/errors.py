"""Errors raised by transports, each with a message a user can act on.

Every error names the host; :class:`UnknownHostKey` also carries the key's fingerprint and says how to
trust it. The Hosts page and the CLI show ``str(error)`` as is.
"""

from __future__ import annotations

from collections.abc import Sequence


def command_name(argv: Sequence[str]) -> str:
    """How a message names a command: its program, or the name a ``sh -c SCRIPT NAME …`` script runs
    under (perflab's own scripts are named so: ``perflab-leftovers``)."""
    if len(argv) > 3 and argv[0] == "sh" and argv[1] == "-c":
        return argv[3]
    return argv[0] if argv else "?"


class TransportError(Exception):
    """Base class: something went wrong talking to a host."""

    kind = "error"

    def __init__(self, host: str, message: str, hint: str | None = None) -> None:
        self.host = host
        self.message = message
        self.hint = hint
        super().__init__(f"{message} {hint}" if hint else message)


class HostUnreachable(TransportError):
    """No SSH session could be opened: refused, timed out, unknown name, or not an SSH server."""

    kind = "unreachable"


class AuthenticationFailed(TransportError):
    """The host refused every credential offered (or a credential could not be read)."""

    kind = "auth"


class UnknownHostKey(TransportError):
    """The host's key is not in known_hosts (or differs from the one recorded there)."""

    kind = "host_key"

    def __init__(
        self, host: str, message: str, hint: str | None, *, fingerprint: str, key_type: str, changed: bool
    ) -> None:
        super().__init__(host, message, hint)
        self.fingerprint = fingerprint
        self.key_type = key_type
        self.changed = changed


class CommandTimeout(TransportError):
    """A command ran past its timeout; it was stopped."""

    kind = "timeout"

    def __init__(self, host: str, argv: Sequence[str], timeout: float, output_tail: str = "") -> None:
        self.argv = list(argv)
        self.timeout = timeout
        self.output_tail = output_tail
        super().__init__(
            host, f"'{command_name(argv)}' on host '{host}' ran longer than {timeout:g} s and was stopped."
        )


class OutputTooLarge(TransportError):
    """A command printed more than a transport keeps; it was stopped. ``kept`` is its output's end."""

    kind = "output_too_large"

    def __init__(self, host: str, argv: Sequence[str], limit: int, kept: str = "") -> None:
        self.argv = list(argv)
        self.limit = limit
        self.kept = kept
        super().__init__(
            host,
            f"'{argv[0]}' on host '{host}' printed more than {limit // (1024 * 1024)} MiB and was stopped.",
        )


class FileTooLarge(TransportError):
    """A remote file is larger than a transport reads into memory; nothing of it was kept."""

    kind = "file_too_large"

    def __init__(self, host: str, path: str, limit: int) -> None:
        self.path = path
        self.limit = limit
        super().__init__(
            host, f"'{path}' on host '{host}' is larger than {limit // (1024 * 1024)} MiB and was not read."
        )


class ConnectionLost(TransportError):
    """The connection dropped while a command ran or a file moved; the outcome is unknown."""

    kind = "connection_lost"


class CommandFailed(TransportError):
    """A command that had to succeed exited with a non-zero status."""

    kind = "command_failed"

    def __init__(self, host: str, argv: Sequence[str], exit_status: int, stderr: str) -> None:
        self.argv = list(argv)
        self.exit_status = exit_status
        self.stderr = stderr
        detail = stderr.strip().splitlines()[-1] if stderr.strip() else "no error output"
        super().__init__(
            host, f"'{argv[0]}' on host '{host}' failed with exit status {exit_status}: {detail}"
        )
