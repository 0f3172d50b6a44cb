"""Kernel receive timestamps (Linux ``SO_TIMESTAMPNS``) for the bench's sockets.

With ``SO_TIMESTAMPNS`` on, every ``recvmsg`` on a TCP socket carries, as ancillary data, the
``CLOCK_REALTIME`` instant at which the kernel received the data it returns. That instant does not
move when the bench process runs late, so a read stamped this way is timed by the machine, not by
the client's CPU. ``arrival`` converts it to ``time.perf_counter()`` seconds, the clock of every
other time the bench records, through the two clocks' offset read as a tight pair: a ``perf_counter``
on each side of ``time.time()``, read again when the process was preempted between them (the pair
further apart than ``PAIR_SPREAD_S``), so a loaded machine does not shift the converted instant.

Which instant TCP reports when one read returns bytes that arrived at different times: the kernel
walks the receive queue and keeps the timestamp of the last segment it copies from, and segments
that were merged in the receive queue (TCP coalesces an arriving segment into the queued one
before it whenever it can) carry the newest one's timestamp. So a read is stamped with the arrival
of its newest bytes, and bytes earlier in the same read arrived at that instant or before it.
Reading in smaller pieces does not recover the older instants: once merged, they are gone. On
loopback the stamp is taken while the sender's ``send`` runs (the loopback device clears the
sender's timestamp and the receive path stamps the packet afresh), i.e. when the server wrote.

The bench therefore gives every event of a read its timestamp (an upper bound, never early) and
counts the token chunks that shared a read with a later token chunk of the same response: those
are the only ones whose time may be late, and only by the time the client left them unread.
Elsewhere (no Linux, TLS, a socket that refuses the option, data without a stamp) reads are
stamped in user space, see ``clock``.
"""

from __future__ import annotations

import socket
import struct
import sys
import time
from typing import List, Optional, Tuple

# SO_TIMESTAMPNS (SO_TIMESTAMPNS_OLD: struct timespec of two native longs); the socket module does
# not export it. Its SCM message type has the same number.
SO_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct("@ll")
ANCILLARY_SIZE = socket.CMSG_SPACE(_TIMESPEC.size) if sys.platform.startswith("linux") else 0

SOURCE_KERNEL = "kernel"

# Three clock reads take about a microsecond; a pair further apart than this straddled a preemption.
PAIR_SPREAD_S = 20e-6
PAIR_TRIES = 5

Ancillary = List[Tuple[int, int, bytes]]


def enable(sock: socket.socket) -> bool:
    """Ask the kernel to timestamp received data on ``sock``; False where that is unavailable."""
    if not ANCILLARY_SIZE:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def hold_timestamping() -> Optional[socket.socket]:
    """A socket that only asks for receive timestamps, to be closed when the run is over.

    The kernel switches receive timestamping on, from deferred work, when the first socket of the
    system asks for it, and packets that arrive before that carry no stamp; asking once up front,
    and keeping it asked while connections come and go, gives the first responses stamps too.
    """
    if not ANCILLARY_SIZE:
        return None
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if enable(sock):
        return sock
    sock.close()
    return None


def arrival(ancillary: Ancillary) -> Optional[float]:
    """The kernel receive time of a read, in ``perf_counter`` seconds; None when it carried none."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            seconds, nanoseconds = _TIMESPEC.unpack_from(data)
            now, realtime_offset = _clock_pair()
            return min(seconds + nanoseconds * 1e-9 - realtime_offset, now)
    return None


def _clock_pair() -> Tuple[float, float]:
    """(``perf_counter`` now, ``time.time()`` − ``perf_counter()``) from the tightest of up to
    ``PAIR_TRIES`` back-to-back readings; the first within ``PAIR_SPREAD_S`` ends the search."""
    best_spread, best = float("inf"), (0.0, 0.0)
    for _ in range(PAIR_TRIES):
        before = time.perf_counter()
        realtime = time.time()
        after = time.perf_counter()
        if after - before < best_spread:
            best_spread, best = after - before, (after, realtime - (before + after) / 2)
        if best_spread <= PAIR_SPREAD_S:
            break
    return best
