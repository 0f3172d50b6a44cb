"""The local transport: commands as subprocesses of the app, files by copy, forwards are the port itself.

Each command runs in its own session (process group), so a timeout stops the command and everything
it started, as does output past ``MAX_OUTPUT_BYTES`` (``run`` reads both pipes as they fill and keeps
at most that much of each). A program that cannot be started is reported the way a shell reports it
(exit status 127 "not found", 126 "not executable", 125 "cannot change directory") so callers see the
same results as over SSH.
"""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import IO

from perflab.transport.base import (
    EXIT_CANNOT_CHDIR,
    EXIT_NOT_EXECUTABLE,
    EXIT_NOT_FOUND,
    MAX_FILE_BYTES,
    CappedOutput,
    Chunk,
    Command,
    CommandResult,
    CommandStream,
    Transport,
    decode,
    read_bounded,
)
from perflab.transport.errors import CommandTimeout

_KILL_GRACE_S = 2.0


def _stop_group(proc: subprocess.Popen[bytes]) -> int:
    """TERM the command's process group, then KILL what is left of it; return the command's exit status."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=_KILL_GRACE_S)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    return proc.wait()


def _communicate(
    proc: subprocess.Popen[bytes], stdin: bytes | None, deadline: float, out: CappedOutput, err: CappedOutput
) -> bool:
    """Write ``stdin``, read both pipes until they close (keeping at most each ``CappedOutput``'s
    limit) and wait for the command to exit; False if the deadline passed first."""
    assert proc.stdout is not None and proc.stderr is not None
    outputs = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    pending = memoryview(stdin or b"")
    with selectors.DefaultSelector() as selector:
        for fd in outputs:
            selector.register(fd, selectors.EVENT_READ)
        if proc.stdin is not None:
            if pending:
                os.set_blocking(proc.stdin.fileno(), False)
                selector.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
            else:
                proc.stdin.close()
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            for key, _ in selector.select(min(remaining, 1.0)):
                if key.fd in outputs:
                    data = os.read(key.fd, 65536)
                    if data:
                        outputs[key.fd].add(data)
                    else:
                        selector.unregister(key.fd)
                    continue
                try:
                    pending = pending[os.write(key.fd, pending[:65536]) :]
                except BrokenPipeError:
                    pending = pending[:0]
                if not pending:
                    selector.unregister(key.fd)
                    proc.stdin.close()  # type: ignore[union-attr]
    try:
        proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
    except subprocess.TimeoutExpired:
        return False
    return True


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None and not pipe.closed:
            with contextlib.suppress(OSError):
                pipe.close()


class _LocalStream(CommandStream):
    def __init__(
        self, host_name: str, argv: Sequence[str], timeout: float, proc: subprocess.Popen[bytes]
    ) -> None:
        super().__init__(host_name, argv, timeout)
        self._proc = proc
        assert proc.stdout is not None
        self._fd = proc.stdout.fileno()

    def _read(self, timeout: float) -> list[Chunk] | None:
        ready, _, _ = select.select([self._fd], [], [], max(timeout, 0.0))
        if not ready:
            return None
        data = os.read(self._fd, 65536)
        return [("out", data)] if data else []

    def _finish(self) -> int:
        try:
            code = self._proc.wait(timeout=max(self.remaining(), 0.0))
        except subprocess.TimeoutExpired:
            self._timed_out()
        self._close_pipe()
        return code

    def _terminate(self) -> int:
        status = _stop_group(self._proc)
        self._close_pipe()
        return status

    def _close_pipe(self) -> None:
        if self._proc.stdout is not None and not self._proc.stdout.closed:
            self._proc.stdout.close()


class _FailedStart(CommandStream):
    """The stream of a program that could not be started: one error line, then its shell-like status."""

    def __init__(self, host_name: str, argv: Sequence[str], timeout: float, failure: CommandResult) -> None:
        super().__init__(host_name, argv, timeout)
        self._message = failure.stderr.encode("utf-8")
        self._status = failure.exit_status

    def _read(self, timeout: float) -> list[Chunk] | None:
        message, self._message = self._message, b""
        return [("err", message)] if message else []

    def _finish(self) -> int:
        return self._status

    def _terminate(self) -> int:
        return self._status


class LocalTransport(Transport):
    """Runs everything on the app's own machine."""

    kind = "local"

    def home(self) -> str:
        return str(Path.home())

    def _start(
        self, command: Command, *, merge_stderr: bool, with_stdin: bool
    ) -> subprocess.Popen[bytes] | CommandResult:
        if command.cwd is not None and not os.path.isdir(command.cwd):
            return CommandResult(
                EXIT_CANNOT_CHDIR, "", f"cannot change directory to {command.cwd}: no such directory\n"
            )
        program = command.argv[0]
        try:
            return subprocess.Popen(
                command.argv,
                stdin=subprocess.PIPE if with_stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                env={**os.environ, **command.env, **command.secrets},
                cwd=command.cwd,
                start_new_session=True,
            )
        except FileNotFoundError:
            return CommandResult(EXIT_NOT_FOUND, "", f"{program}: not found\n")
        except PermissionError:
            return CommandResult(EXIT_NOT_EXECUTABLE, "", f"{program}: permission denied\n")

    def _run(self, command: Command, *, timeout: float, stdin: bytes | None) -> CommandResult:
        started = self._start(command, merge_stderr=False, with_stdin=stdin is not None)
        if isinstance(started, CommandResult):
            return started
        deadline = time.monotonic() + timeout
        out, err = CappedOutput(self.host.name, command.argv), CappedOutput(self.host.name, command.argv)
        finished = False
        try:
            finished = _communicate(started, stdin, deadline, out, err)
        finally:  # timed out, OutputTooLarge, or the caller interrupted: the command must not stay
            if not finished:
                _stop_group(started)
            _close_pipes(started)
        if not finished:
            raise CommandTimeout(self.host.name, command.argv, timeout)
        return CommandResult(started.returncode, decode(bytes(out.data)), decode(bytes(err.data)))

    def _stream(self, command: Command, *, timeout: float) -> CommandStream:
        started = self._start(command, merge_stderr=True, with_stdin=False)
        if isinstance(started, CommandResult):
            return _FailedStart(self.host.name, command.argv, timeout, started)
        return _LocalStream(self.host.name, command.argv, timeout, started)

    def _replace(self, remote: str, mode: int, write: Callable[[IO[bytes]], object]) -> None:
        """Write ``remote`` through a temporary file beside it (parents created), then rename it over."""
        target = Path(self.resolve_path(remote))
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", delete=False) as tmp:
            write(tmp)
        os.chmod(tmp.name, mode)
        os.replace(tmp.name, target)

    def upload(self, local: str | Path, remote: str, *, mode: int | None = None) -> None:
        file_mode = mode if mode is not None else (os.stat(local).st_mode & 0o777)
        with open(local, "rb") as source:
            self._replace(remote, file_mode, lambda tmp: shutil.copyfileobj(source, tmp))

    def download(self, remote: str, local: str | Path) -> None:
        destination = Path(local)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.resolve_path(remote), destination)

    def read_text(self, remote: str, *, limit: int = MAX_FILE_BYTES) -> str:
        with open(self.resolve_path(remote), "rb") as handle:
            return read_bounded(handle, self.host.name, remote, limit)

    def write_text(self, remote: str, text: str, *, mode: int | None = None) -> None:
        payload = text.encode("utf-8")
        self._replace(remote, mode if mode is not None else 0o644, lambda tmp: tmp.write(payload))

    def forward(self, remote_port: int) -> AbstractContextManager[int]:
        return _same_port(remote_port)


@contextmanager
def _same_port(port: int) -> Iterator[int]:
    yield port
