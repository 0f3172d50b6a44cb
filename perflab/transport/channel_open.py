"""Opening an SSH channel within a deadline without leaving a channel the server opens later.

paramiko's ``Transport.open_channel(timeout=...)`` gives up waiting after ``timeout`` and drops the
channel it asked for (paramiko 5.1 holds a connection's channels only weakly): when a busy host answers
later, paramiko logs "Success for unrequested channel" and the session or forward stays open on the
server with nothing to close it, so a host slow to answer now and then gathers idle sessions on a live
connection until sshd's ``MaxSessions`` refuses more.
:func:`open_within` asks in a helper thread that waits for the server's answer up to
:data:`LATE_WAIT_S`, hands the channel to the caller if it comes within the deadline, and closes it at
once if it comes after the caller stopped waiting. (An answer later still is paramiko's case again; the
bound keeps a host that never answers from holding a thread per request.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import paramiko

TIMEOUT_MESSAGE = "Timeout opening channel."
LATE_WAIT_S = 300.0


class _Opening:
    """One channel being opened: what came back, and whether its caller still waits."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.channel: paramiko.Channel | None = None
        self.error: BaseException | None = None
        self.abandoned = False

    def open(self, open_channel: Callable[..., paramiko.Channel]) -> None:
        try:
            channel = open_channel(timeout=LATE_WAIT_S)
        except BaseException as error:  # handed to the caller, who raises it
            with self.lock:
                self.error = error
            self.done.set()
            return
        with self.lock:
            late = self.abandoned
            if not late:
                self.channel = channel
        if late:
            channel.close()
        self.done.set()


def open_within(open_channel: Callable[..., paramiko.Channel], timeout_s: float) -> paramiko.Channel:
    """The channel ``open_channel(timeout=LATE_WAIT_S)`` opens (paramiko's ``open_session`` or
    ``open_channel``, its other arguments bound), if the server opens it within ``timeout_s``; else
    raises :class:`paramiko.SSHException` as paramiko's own timeout does, and the channel is closed as
    soon as the server opens it. What ``open_channel`` raises within the deadline (a refusal, a dropped
    connection) is raised as it is."""
    opening = _Opening()
    threading.Thread(target=opening.open, args=(open_channel,), name="ssh-channel-open", daemon=True).start()
    opening.done.wait(timeout_s)
    with opening.lock:
        if opening.channel is None and opening.error is None:
            opening.abandoned = True
            raise paramiko.SSHException(TIMEOUT_MESSAGE)
        if opening.error is not None:
            raise opening.error
        return opening.channel
