"""Running the simulated server: binding, readiness lines, signals, clean shutdown.

:func:`serve_until_stopped` is shared by ``python -m perflab sim serve`` and the engine shims. It
binds the port (an ``OSError`` such as ``[Errno 98] address already in use`` propagates to the
caller, which reports it the engine's way), prints uvicorn's start-up lines — ``Application startup
complete.`` is the readiness line of vLLM and trtllm-serve — and serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
import socket
import sys
from typing import Callable, Optional, TextIO

from perflab.sim.api import OpenAIApp
from perflab.sim.httpserver import start_http_server


class Console:
    """Line-oriented log output, flushed per line so log files follow in real time."""

    def __init__(self, prefix: str = "", stream: Optional[TextIO] = None) -> None:
        self.prefix = prefix
        self._stream = stream

    def line(self, text: str) -> None:
        stream = self._stream or sys.stdout
        stream.write(f"{self.prefix}{text}\n")
        stream.flush()


def raise_open_file_limit() -> None:
    """Allow as many open connections as the hard limit permits (thousands of streams need it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft != resource.RLIM_INFINITY and soft < target:  # never lower a limit already higher
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def install_stop_signals(loop: asyncio.AbstractEventLoop) -> asyncio.Event:
    """An event set by SIGTERM or SIGINT."""
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return stop


async def serve_until_stopped(
    app: OpenAIApp,
    host: str,
    port: int,
    console: Console,
    stop: asyncio.Event,
    server_header: str = "uvicorn",
    on_ready: Optional[Callable[[int], None]] = None,
    sock: Optional[socket.socket] = None,
    announce: bool = True,
) -> None:
    """Serve ``app`` on ``host:port`` (or the pre-bound ``sock``) until ``stop`` is set.

    With ``announce`` the uvicorn start-up and shutdown lines are printed.
    """
    raise_open_file_limit()
    server = await start_http_server(app.handle, host, port, server_header, sock)
    bound_port = server.port
    pid = os.getpid()
    say = console.line if announce else (lambda text: None)
    say(f"INFO:     Started server process [{pid}]")
    say("INFO:     Waiting for application startup.")
    say("INFO:     Application startup complete.")
    say(f"INFO:     Uvicorn running on http://{host}:{bound_port} (Press CTRL+C to quit)")
    if on_ready is not None:
        on_ready(bound_port)
    await stop.wait()
    say("INFO:     Shutting down")
    await server.close()
    say("INFO:     Waiting for application shutdown.")
    say("INFO:     Application shutdown complete.")
    say(f"INFO:     Finished server process [{pid}]")
