"""The SSH transport (paramiko): commands on exec channels, files over SFTP, port forwards.

Every command string is ``shlex.join`` of an argv that starts a tiny fixed ``sh`` prologue: it reports
the command's pid on stderr (stripped before the caller sees it), exports the host's secrets it reads
from standard input, changes to ``cwd``, and ``exec``s ``env -- K=V ... argv``. sshd servers usually
refuse ``AcceptEnv``, so ordinary variables travel as ``env`` arguments; secrets never do (any user of
the host can read command lines), they come first on the command's standard input. The pid lets a
timeout stop the remote command instead of leaving it running.
"""

from __future__ import annotations

import contextlib
import posixpath
import re
import select
import shlex
import stat
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

import paramiko

from perflab.inventory import HostConfig
from perflab.transport.base import (
    MAX_FILE_BYTES,
    CappedOutput,
    Chunk,
    Command,
    CommandResult,
    CommandStream,
    Transport,
    decode,
    env_lines,
    read_bounded,
)
from perflab.transport.connections import POOL, ConnectionPool
from perflab.transport.errors import CommandTimeout, ConnectionLost, OutputTooLarge
from perflab.transport.forward import PortForward

# Reports the pid, exports the first $2 lines of standard input (NAME=value each: the host's secrets,
# so they are never on a command line; `read` takes stdin byte by byte, the rest stays for the command),
# changes to $1 when given, and becomes the command.
_PROLOGUE = (
    'printf "PERFLAB_PID=%s\\n" "$$" >&2; n=$2; '
    'while [ "$n" -gt 0 ]; do IFS= read -r line || exit 124; export "$line" || exit 124; n=$((n - 1)); done; '
    'if [ -n "$1" ]; then cd -- "$1" || exit 125; fi; shift 2; exec "$@"'
)

# TERM the command (its process group when it leads one), KILL it if it is still there after 2 s.
_STOP_SCRIPT = (
    'kill -TERM -- "-$1" 2>/dev/null || kill -TERM "$1" 2>/dev/null || exit 0; '
    "n=0; "
    'while kill -0 "$1" 2>/dev/null; do '
    'n=$((n + 1)); if [ "$n" -gt 20 ]; then kill -KILL -- "-$1" 2>/dev/null || kill -KILL "$1"; exit 0; fi; '
    "sleep 0.1; "
    "done"
)

_PID_LINE = re.compile(rb"PERFLAB_PID=(\d+)")
_CHUNK = 65536
# How long a finished command's output may still arrive after its exit status, without end-of-file.
_EOF_GRACE_S = 2.0
# A request every SSH server answers (OpenSSH with a failure reply): its answer proves the connection alive.
_LIVENESS_REQUEST = "keepalive@openssh.com"
_STOP_TIMEOUT_S = 10.0
_Writer = Callable[[paramiko.SFTPClient, str], None]


def _text_writer(text: str) -> _Writer:
    payload = text.encode("utf-8")

    def write(sftp: paramiko.SFTPClient, temp: str) -> None:
        with sftp.open(temp, "wb") as handle:
            handle.write(payload)

    return write


def render_command(argv: Sequence[str], env: Mapping[str, str], cwd: str | None, secrets: int = 0) -> str:
    """The exact command string sent to sshd for ``argv`` (quoted with ``shlex.join``); ``secrets``: how
    many ``NAME=value`` lines (:func:`~perflab.transport.base.env_lines`) come first on its standard input."""
    inner = list(argv)
    if env:
        inner = ["env", "--", *(f"{name}={value}" for name, value in env.items()), *inner]
    return shlex.join(["sh", "-c", _PROLOGUE, "perflab", cwd or "", str(secrets), *inner])


class _PidFilter:
    """Takes the prologue's ``PERFLAB_PID=<pid>`` line out of a stderr byte stream.

    It is usually the first line, but a login shell's start-up files may print before it; lines are held
    back until the pid line is found (or 64 KiB passed without it), then everything flows through.
    """

    _LIMIT = 1 << 16

    def __init__(self) -> None:
        self.pid: int | None = None
        self._held = b""
        self._searching = True

    def feed(self, data: bytes) -> bytes:
        if not self._searching:
            return data
        self._held += data
        end = self._held.rfind(b"\n") + 1
        passed = []
        for line in self._held[:end].splitlines(keepends=True):
            match = _PID_LINE.fullmatch(line.rstrip(b"\n")) if self._searching else None
            if match is not None:
                self.pid = int(match.group(1))
                self._searching = False
            else:
                passed.append(line)
        self._held = self._held[end:]
        if not self._searching or len(self._held) > self._LIMIT:
            self._searching = False
            passed.append(self.flush())
        return b"".join(passed)

    def flush(self) -> bytes:
        """Bytes held back waiting for the end of a line (at the end of the stream)."""
        held, self._held = self._held, b""
        return held


def _answers(connection: paramiko.Transport) -> bool:
    """Whether ``connection`` is alive: the server answers a request on it. paramiko closes a dropped
    connection's channels before it marks the connection inactive, so a channel closed without a status
    cannot tell alone; the request returns once the answer came or the connection ended."""
    if connection.is_active():
        with contextlib.suppress(paramiko.SSHException, EOFError, OSError):
            connection.global_request(_LIVENESS_REQUEST, wait=True)
    return connection.is_active()


class _RemoteCommand:
    """One exec channel running one command, with the means to stop it and to tell a lost connection."""

    def __init__(self, transport: SSHTransport, argv: Sequence[str], chan: paramiko.Channel) -> None:
        self.transport = transport
        self.argv = list(argv)
        self.chan = chan
        self.pids = _PidFilter()

    def wait_readable(self, timeout: float) -> None:
        if not (self.chan.recv_ready() or self.chan.recv_stderr_ready() or self.chan.closed):
            select.select([self.chan], [], [], max(timeout, 0.0))

    def exit_status(self) -> int:
        """The exit status after the channel reported it; ConnectionLost if the connection dropped (a
        channel closed without a status, on a connection that does not answer)."""
        status = self.chan.exit_status
        if status == -1 and not _answers(self.chan.get_transport()):
            raise ConnectionLost(
                self.transport.host.name,
                f"The connection to host '{self.transport.host.name}' dropped while '{self.argv[0]}' ran; "
                f"its outcome is unknown.",
            )
        return status

    def stop(self) -> int:
        """Stop the remote command (TERM, then KILL) and close the channel; -1 is its exit status."""
        if self.pids.pid is not None and self.chan.get_transport().is_active():
            with contextlib.suppress(ConnectionLost, CommandTimeout):
                self.transport.exec_raw(
                    shlex.join(["sh", "-c", _STOP_SCRIPT, "perflab", str(self.pids.pid)]), _STOP_TIMEOUT_S
                )
        self.chan.close()
        return -1


class _SSHStream(CommandStream):
    def __init__(self, host_name: str, argv: Sequence[str], timeout: float, command: _RemoteCommand) -> None:
        super().__init__(host_name, argv, timeout)
        self._command = command

    def _read(self, timeout: float) -> list[Chunk] | None:
        chan = self._command.chan
        self._command.wait_readable(timeout)
        chunks: list[Chunk] = []
        while chan.recv_ready():
            chunks.append(("out", chan.recv(_CHUNK)))
        while chan.recv_stderr_ready():
            chunks.append(("err", self._command.pids.feed(chan.recv_stderr(_CHUNK))))
        chunks = [(source, data) for source, data in chunks if data]
        if chunks:
            return chunks
        if chan.closed or chan.eof_received:
            held = self._command.pids.flush()
            return [("err", held)] if held else []
        return None

    def _finish(self) -> int:
        if not self._command.chan.status_event.wait(max(self.remaining(), 0.0)):
            self._timed_out()
        status = self._command.exit_status()
        self._command.chan.close()
        return status

    def _terminate(self) -> int:
        return self._command.stop()


class SSHTransport(Transport):
    """Reaches a host over SSH; connections come from a shared pool (one per host, with keepalive)."""

    kind = "ssh"

    def __init__(self, host: HostConfig, pool: ConnectionPool = POOL) -> None:
        super().__init__(host)
        self._pool = pool
        self._home: str | None = None

    # Connection -----------------------------------------------------------------------------------

    def connect(self) -> None:
        """Open (or reuse) the connection now, raising the connect errors early."""
        self._pool.client(self.host)

    def _session(self) -> paramiko.Channel:
        """A new session channel (the pool reconnects if the connection turns out dead)."""
        return self._pool.open_session(self.host)

    def exec_raw(self, command: str, timeout: float) -> CommandResult:
        """Run an already-quoted command string (internal: the fixed stop script)."""
        chan = self._session()
        chan.exec_command(command)
        chan.shutdown_write()
        return self._collect(_RemoteCommand(self, ["sh"], chan), timeout, strip_pid=False)

    def _exec(self, command: Command) -> _RemoteCommand:
        chan = self._session()
        try:
            chan.exec_command(render_command(command.argv, command.env, command.cwd, len(command.secrets)))
            if command.secrets:
                chan.sendall(env_lines(command.secrets).encode("utf-8"))
        except (paramiko.SSHException, EOFError, OSError) as exc:
            chan.close()
            raise ConnectionLost(
                self.host.name, f"Host '{self.host.name}' did not start '{command.argv[0]}': {exc}"
            ) from None
        return _RemoteCommand(self, command.argv, chan)

    # Commands -------------------------------------------------------------------------------------

    def _run(self, command: Command, *, timeout: float, stdin: bytes | None) -> CommandResult:
        remote = self._exec(command)
        try:
            if stdin:
                remote.chan.sendall(stdin)
            remote.chan.shutdown_write()
        except (OSError, EOFError, paramiko.SSHException):
            pass
        return self._collect(remote, timeout, strip_pid=True)

    def _collect(self, command: _RemoteCommand, timeout: float, *, strip_pid: bool) -> CommandResult:
        chan = command.chan
        deadline = time.monotonic() + timeout
        out = CappedOutput(self.host.name, command.argv)
        err = CappedOutput(self.host.name, command.argv)
        exited_at: float | None = None
        try:
            while True:
                while chan.recv_ready():
                    out.add(chan.recv(_CHUNK))
                while chan.recv_stderr_ready():
                    chunk = chan.recv_stderr(_CHUNK)
                    err.add(command.pids.feed(chunk) if strip_pid else chunk)
                if chan.exit_status_ready() and exited_at is None:
                    exited_at = time.monotonic()
                # sshd may send the exit status before the last of the output: the output is complete
                # at end-of-file (or, for a child still holding the stream, a short grace after exit)
                if exited_at is not None and not chan.recv_ready() and not chan.recv_stderr_ready():
                    late = time.monotonic() - exited_at > _EOF_GRACE_S
                    if chan.eof_received or chan.closed or late:
                        break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    command.stop()
                    raise CommandTimeout(self.host.name, command.argv, timeout, err.tail())
                command.wait_readable(min(remaining, 1.0))
        except OutputTooLarge:
            command.stop()
            raise
        err.add(command.pids.flush())
        status = command.exit_status()
        chan.close()
        return CommandResult(status, decode(bytes(out.data)), decode(bytes(err.data)))

    def _stream(self, command: Command, *, timeout: float) -> CommandStream:
        remote = self._exec(command)
        remote.chan.shutdown_write()
        return _SSHStream(self.host.name, command.argv, timeout, remote)

    # Files ----------------------------------------------------------------------------------------

    def _sftp(self) -> paramiko.SFTPClient:
        chan = self._session()
        try:
            chan.invoke_subsystem("sftp")
            return paramiko.SFTPClient(chan)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            chan.close()
            raise ConnectionLost(
                self.host.name,
                f"Host '{self.host.name}' refused an SFTP session ({exc}); perflab needs sshd's sftp "
                "Subsystem to move files.",
            ) from None

    def home(self) -> str:
        if self._home is None:
            with self._sftp() as sftp:
                self._home = sftp.normalize(".")
        return self._home

    def _makedirs(self, sftp: paramiko.SFTPClient, directory: str) -> None:
        missing: list[str] = []
        current = directory
        while current not in ("", "/"):
            try:
                if stat.S_ISDIR(sftp.stat(current).st_mode or 0):
                    break
                raise NotADirectoryError(f"{current} on host '{self.host.name}' is not a directory")
            except FileNotFoundError:
                missing.append(current)
                current = posixpath.dirname(current)
        for path in reversed(missing):
            try:
                sftp.mkdir(path)
            except OSError:
                if not stat.S_ISDIR(sftp.stat(path).st_mode or 0):
                    raise

    def _put(self, items: Sequence[tuple[str, int, _Writer]]) -> None:
        """Write each (remote path, mode, writer) through a temporary name, all in one SFTP session."""
        target = ""
        try:
            with self._sftp() as sftp:
                for remote, mode, write in items:
                    target = self.resolve_path(remote)
                    temp = f"{target}.{uuid.uuid4().hex[:8]}.part"
                    self._makedirs(sftp, posixpath.dirname(target))
                    # The mode is set before any byte is written: a 0600 file is never readable by others.
                    sftp.open(temp, "wb").close()
                    sftp.chmod(temp, mode)
                    write(sftp, temp)
                    sftp.posix_rename(temp, target)
        except (EOFError, paramiko.SSHException) as exc:
            raise ConnectionLost(
                self.host.name, f"Writing {target} on host '{self.host.name}' failed: {exc}"
            ) from None

    def upload(self, local: str | Path, remote: str, *, mode: int | None = None) -> None:
        file_mode = mode if mode is not None else (Path(local).stat().st_mode & 0o777)
        self._put([(remote, file_mode, lambda sftp, temp: sftp.put(str(local), temp))])

    def write_text(self, remote: str, text: str, *, mode: int | None = None) -> None:
        self.write_files({remote: (text, mode if mode is not None else 0o644)})

    def write_files(self, files: Mapping[str, tuple[str, int]]) -> None:
        self._put([(remote, mode, _text_writer(text)) for remote, (text, mode) in files.items()])

    def download(self, remote: str, local: str | Path) -> None:
        destination = Path(local)
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            with self._sftp() as sftp:
                sftp.get(self.resolve_path(remote), str(destination))
        except (EOFError, paramiko.SSHException) as exc:
            raise ConnectionLost(
                self.host.name, f"Reading {remote} from host '{self.host.name}' failed: {exc}"
            ) from None

    def read_text(self, remote: str, *, limit: int = MAX_FILE_BYTES) -> str:
        try:
            with self._sftp() as sftp, sftp.open(self.resolve_path(remote), "rb") as handle:
                return read_bounded(handle, self.host.name, remote, limit)
        except (EOFError, paramiko.SSHException) as exc:
            raise ConnectionLost(
                self.host.name, f"Reading {remote} from host '{self.host.name}' failed: {exc}"
            ) from None

    # Network --------------------------------------------------------------------------------------

    def forward(self, remote_port: int) -> AbstractContextManager[int]:
        self._live_link()  # connect now: an unreachable host fails here, not on the forward's first use
        return PortForward(self._live_link, remote_port)

    def _live_link(self) -> paramiko.Transport:
        """The host's live SSH connection (a new one when the last has dropped)."""
        link = self._pool.client(self.host).get_transport()
        assert link is not None
        return link
