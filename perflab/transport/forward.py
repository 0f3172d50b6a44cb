"""Local port forwarding over an SSH connection (what ``ssh -L`` does).

``PortForward`` listens on ``127.0.0.1:<free port>`` of the app machine; each accepted connection gets
a ``direct-tcpip`` channel to ``127.0.0.1:<remote_port>`` on the host, on the host's live SSH connection
of the moment (``link()``, which reconnects after a drop), and a thread copying bytes both ways. A
connection that gets no channel (the port refuses, the host is unreachable) is closed at once, and the
listener goes on: a forward outlives the SSH connection it began on, as a run's sampling of its engines
must. Leaving the ``with`` block closes the listener and every open connection.
"""

from __future__ import annotations

import contextlib
import functools
import select
import socket
import threading
from collections.abc import Callable
from types import TracebackType

import paramiko

from perflab.transport.channel_open import open_within
from perflab.transport.errors import TransportError

_CHUNK = 65536
_POLL_S = 0.5
_OPEN_TIMEOUT_S = 10.0  # for the host to open a forwarded connection's channel


class PortForward:
    """Context manager: ``with PortForward(link, 8000) as local_port: ...``."""

    def __init__(self, link: Callable[[], paramiko.Transport], remote_port: int) -> None:
        self._link = link
        self._remote_port = remote_port
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._server: socket.socket | None = None

    def __enter__(self) -> int:
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(_POLL_S)
        port = int(self._server.getsockname()[1])
        acceptor = threading.Thread(target=self._accept_loop, name=f"forward-{port}", daemon=True)
        acceptor.start()
        self._threads.append(acceptor)
        return port

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.close()
        with self._lock:
            for conn in list(self._open):
                conn.close()
        for thread in list(self._threads):
            thread.join(timeout=2 * _POLL_S + 1)

    def _accept_loop(self) -> None:
        assert self._server is not None
        while not self._stop.is_set():
            try:
                conn, peer = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                direct = functools.partial(
                    self._link().open_channel, "direct-tcpip", ("127.0.0.1", self._remote_port), peer
                )
                chan = open_within(direct, _OPEN_TIMEOUT_S)
            except (paramiko.SSHException, OSError, EOFError, TransportError):
                conn.close()
                continue
            with self._lock:
                self._open.add(conn)
            pump = threading.Thread(target=self._pump, args=(conn, chan), daemon=True)
            pump.start()
            self._threads.append(pump)

    def _pump(self, conn: socket.socket, chan: paramiko.Channel) -> None:
        try:
            while not self._stop.is_set():
                readable, _, _ = select.select([conn, chan], [], [], _POLL_S)
                if conn in readable:
                    data = conn.recv(_CHUNK)
                    if not data:
                        break
                    chan.sendall(data)
                if chan in readable:
                    data = chan.recv(_CHUNK)
                    if not data:
                        break
                    conn.sendall(data)
        except (OSError, EOFError, paramiko.SSHException):
            pass
        finally:
            # Closing a channel sends a message: on a connection that already dropped paramiko raises.
            with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
                chan.close()
            with self._lock:
                self._open.discard(conn)
            conn.close()
