"""The Transport interface every host is reached through, and the pieces both implementations share.

A command is always an argv (a list of strings), never a shell string: the local transport hands it to
``subprocess`` as is, the SSH transport renders it with ``shlex.join``. The host's ``env`` and
``secrets`` (and, for a simulated host, the simulator's env) are applied to every command; secrets
never on its command line (the SSH transport sends them on standard input, the local one in the
process environment). Remote
paths may start with ``~`` or be relative; both mean "under the login user's home directory".
"""

from __future__ import annotations

import posixpath
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Protocol

from perflab.inventory import HostConfig
from perflab.transport.errors import CommandFailed, CommandTimeout, FileTooLarge, OutputTooLarge

StdinData = str | bytes | None

# Exit statuses shared by both transports for failures before the program starts.
EXIT_CANNOT_CHDIR = 125
EXIT_NOT_EXECUTABLE = 126
EXIT_NOT_FOUND = 127

_TAIL_LINES = 40


@dataclass(frozen=True)
class CommandResult:
    """What a finished command left: its exit status (negative: killed by a signal) and its output."""

    exit_status: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


@dataclass(frozen=True)
class Command:
    """A command ready to start: its argv, the variables it gets — ``secrets`` (the host's ``secrets:``)
    apart from the rest, since they must never travel on a command line — and its working directory."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None
    secrets: dict[str, str] = field(default_factory=dict)


def validate_argv(argv: Sequence[str]) -> list[str]:
    """The argv as a list, refusing what no program can receive (empty argv, non-text, NUL)."""
    if isinstance(argv, (str, bytes)):
        raise TypeError("argv must be a sequence of strings, not a single string")
    args = list(argv)
    if not args:
        raise ValueError("argv must not be empty")
    for arg in args:
        if not isinstance(arg, str):
            raise TypeError(f"argv items must be strings, got {type(arg).__name__}: {arg!r}")
        if "\0" in arg:
            raise ValueError(f"argv item {arg!r} contains a NUL character")
    return args


def env_lines(variables: Mapping[str, str]) -> str:
    """``NAME=value`` lines, one a variable: what the SSH prologue reads from standard input, and the
    ``--env-file`` format of podman and docker (values are single lines, names valid)."""
    return "".join(f"{name}={value}\n" for name, value in variables.items())


def as_bytes(data: StdinData) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    return data.encode("utf-8")


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _decode_line(raw: bytes) -> str:
    return decode(raw).rstrip("\r")


Chunk = tuple[str, bytes]

# What ``run`` keeps of a command's stdout, and of its stderr: past it the command is stopped
# (``OutputTooLarge``). perflab's own commands print kilobytes; a flooding tool is stopped early.
MAX_OUTPUT_BYTES = 16 * 1024 * 1024
# The longest line a stream yields; a longer one comes as several lines of this size.
MAX_LINE_BYTES = 1024 * 1024
# How much of the output's end an ``OutputTooLarge`` (or an SSH ``CommandTimeout``) carries for its message.
_KEPT_BYTES = 2000
# The largest remote file ``read_text`` reads (past it: ``FileTooLarge``). A benchmark's saved result
# with per-request records of a long run is tens of MiB; a host that serves more is not believed.
MAX_FILE_BYTES = 256 * 1024 * 1024


class Readable(Protocol):
    """A binary file open for reading: a local file or an SFTP one."""

    def read(self, size: int, /) -> bytes: ...


def read_bounded(handle: Readable, host: str, path: str, limit: int) -> str:
    """The text of an open file of ``host`` (UTF-8, bad bytes replaced); ``FileTooLarge`` past ``limit``."""
    data = handle.read(limit + 1)
    if len(data) > limit:
        raise FileTooLarge(host, path, limit)
    return decode(data)


class CappedOutput:
    """One output stream of a command being run, kept up to ``MAX_OUTPUT_BYTES``."""

    def __init__(self, host_name: str, argv: Sequence[str], limit: int = MAX_OUTPUT_BYTES) -> None:
        self._host_name = host_name
        self._argv = argv
        self._limit = limit
        self.data = bytearray()

    def add(self, chunk: bytes) -> None:
        """Keep ``chunk``; raise ``OutputTooLarge`` (the caller stops the command) past the limit."""
        self.data += chunk
        if len(self.data) > self._limit:
            raise OutputTooLarge(self._host_name, self._argv, self._limit, self.tail())

    def tail(self) -> str:
        """The end of what was kept, for a message."""
        return decode(bytes(self.data[-_KEPT_BYTES:]))


class CommandStream(ABC):
    """The merged stdout/stderr lines of a running command; ``exit_status`` is set once it is drained.

    Lines of stdout and stderr are split separately (a line is never cut by the other stream), then
    yielded in arrival order. Iterating past the deadline stops the command and raises
    :class:`CommandTimeout`. Leaving a ``with`` block early (or calling :meth:`close`) stops it too.
    """

    def __init__(self, host_name: str, argv: Sequence[str], timeout: float) -> None:
        self.host_name = host_name
        self.argv = list(argv)
        self.timeout = timeout
        self.exit_status: int | None = None
        self._deadline = time.monotonic() + timeout
        self._partial: dict[str, bytes] = {}
        self._lines: deque[str] = deque()
        self._eof = False
        self._tail: deque[str] = deque(maxlen=_TAIL_LINES)

    @property
    def tail(self) -> list[str]:
        """The last lines yielded so far."""
        return list(self._tail)

    def remaining(self) -> float:
        return self._deadline - time.monotonic()

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        while True:
            if self._lines:
                line = self._lines.popleft()
                self._tail.append(line)
                return line
            if self._eof:
                if self.exit_status is None:
                    self.exit_status = self._finish()
                raise StopIteration
            if self.remaining() <= 0:
                self._timed_out()
            chunks = self._read(min(self.remaining(), 1.0))
            if chunks is None:
                continue
            if not chunks:
                self._eof = True
                self._lines.extend(_decode_line(rest) for rest in self._partial.values() if rest)
                self._partial.clear()
            for source, data in chunks:
                *complete, partial = (self._partial.get(source, b"") + data).split(b"\n")
                self._lines.extend(_decode_line(line) for line in complete)
                while len(partial) > MAX_LINE_BYTES:
                    self._lines.append(_decode_line(partial[:MAX_LINE_BYTES]))
                    partial = partial[MAX_LINE_BYTES:]
                self._partial[source] = partial

    def wait(self) -> int:
        """Drain the remaining output and return the exit status."""
        for _ in self:
            pass
        assert self.exit_status is not None
        return self.exit_status

    def close(self) -> None:
        """Stop the command if it still runs."""
        if self.exit_status is None:
            self.exit_status = self._terminate()

    def __enter__(self) -> CommandStream:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _timed_out(self) -> None:
        self.exit_status = self._terminate()
        raise CommandTimeout(self.host_name, self.argv, self.timeout, "\n".join(self._tail))

    @abstractmethod
    def _read(self, timeout: float) -> list[Chunk] | None:
        """New output as ``(source, bytes)`` chunks, ``[]`` at the end of all output, ``None`` if nothing
        came in time."""

    @abstractmethod
    def _finish(self) -> int:
        """The exit status once the output ended (waiting up to the deadline)."""

    @abstractmethod
    def _terminate(self) -> int:
        """Stop the command (TERM, then KILL after a short grace); return its exit status."""


class Transport(ABC):
    """Run commands and move files on one host. Obtain one with :func:`perflab.transport.open_transport`."""

    kind: str = "abstract"

    def __init__(self, host: HostConfig) -> None:
        self.host = host
        self.secret_env: dict[str, str] = {}
        self.extra_env: dict[str, str] = {}

    # Commands -------------------------------------------------------------------------------------

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: StdinData = None,
        check: bool = False,
    ) -> CommandResult:
        """Run ``argv`` to completion (or raise :class:`CommandTimeout` after stopping it); with
        ``check``, a non-zero exit status raises :class:`CommandFailed`."""
        result = self._run(self.prepare(argv, env, cwd), timeout=timeout, stdin=as_bytes(stdin))
        if check and not result.ok:
            raise CommandFailed(self.host.name, argv, result.exit_status, result.stderr)
        return result

    def stream(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> CommandStream:
        """Start ``argv`` and iterate over its output lines (stdout and stderr merged)."""
        return self._stream(self.prepare(argv, env, cwd), timeout=timeout)

    def prepare(self, argv: Sequence[str], env: Mapping[str, str] | None, cwd: str | None) -> Command:
        """The command as it starts on the host: the argv checked, every variable it gets (the host's
        secrets apart), the absolute working directory."""
        merged = self.command_env(env)
        secrets = {name: value for name, value in merged.items() if name in self.secret_env}
        plain = {name: value for name, value in merged.items() if name not in secrets}
        return Command(validate_argv(argv), plain, self.resolve_path(cwd) if cwd else None, secrets)

    @abstractmethod
    def _run(self, command: Command, *, timeout: float, stdin: bytes | None) -> CommandResult:
        """Run a prepared command to completion."""

    @abstractmethod
    def _stream(self, command: Command, *, timeout: float) -> CommandStream:
        """Start a prepared command with its output merged into one stream."""

    # Files ----------------------------------------------------------------------------------------

    @abstractmethod
    def upload(self, local: str | Path, remote: str, *, mode: int | None = None) -> None:
        """Copy a local file to ``remote`` (parents created, replaced atomically)."""

    @abstractmethod
    def download(self, remote: str, local: str | Path) -> None:
        """Copy ``remote`` to a local file (parents created)."""

    @abstractmethod
    def read_text(self, remote: str, *, limit: int = MAX_FILE_BYTES) -> str:
        """The content of a remote text file (UTF-8, bad bytes replaced); FileNotFoundError if it does
        not exist, ``FileTooLarge`` when it holds more than ``limit`` bytes."""

    @abstractmethod
    def write_text(self, remote: str, text: str, *, mode: int | None = None) -> None:
        """Write a remote text file (parents created, replaced atomically)."""

    def write_files(self, files: Mapping[str, tuple[str, int]]) -> None:
        """Write several text files: ``{remote path: (text, mode)}``."""
        for remote, (text, mode) in files.items():
            self.write_text(remote, text, mode=mode)

    # Network and lifecycle ------------------------------------------------------------------------

    @abstractmethod
    def forward(self, remote_port: int) -> AbstractContextManager[int]:
        """A context manager yielding a local port that reaches ``127.0.0.1:remote_port`` on the host."""

    @abstractmethod
    def home(self) -> str:
        """The login user's home directory on the host (absolute)."""

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release this handle (pooled connections stay open for reuse)."""

    def __enter__(self) -> Transport:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # Shared helpers -------------------------------------------------------------------------------

    def command_env(self, env: Mapping[str, str] | None) -> dict[str, str]:
        """The variables set for a command: host env and secrets, then simulator env, then the call's env."""
        merged = {**self.host.env, **self.secret_env, **self.extra_env, **(env or {})}
        for name, value in merged.items():
            if not name or "=" in name or "\0" in name or "\0" in value:
                raise ValueError(f"invalid environment variable {name!r}")
            if name in self.secret_env and "\n" in value:
                raise ValueError(f"the secret {name} must be a single line")
        return merged

    def resolve_path(self, path: str) -> str:
        """An absolute host path: ``~``, ``~/x`` and relative paths are taken from the home directory."""
        if path == "~":
            return self.home()
        if path.startswith("~/"):
            return posixpath.join(self.home(), path[2:])
        if posixpath.isabs(path):
            return posixpath.normpath(path)
        return posixpath.join(self.home(), path)

    @property
    def workdir(self) -> str:
        """perflab's directory on the host (absolute)."""
        return self.resolve_path(self.host.workdir)
