"""Reading a file a user names — a benchmark dataset, a tokenizer, an imported result, a study spec,
hosts.yaml — so that no such file can hang the reader or fill its memory.

The file must be a regular file once every symbolic link is followed: a FIFO (which would wait for a
writer), a character device such as ``/dev/zero`` (endless), a directory or a socket is refused with
what it is. It is opened without waiting (``O_NONBLOCK``, so a FIFO put in its place between the check
and the open cannot hold the open either), its size is checked before anything is read, and at most
``max_bytes`` are read whatever the size said (a file growing meanwhile is refused, not read on).

It ships in the agent with the bench (which runs on the hosts), so it keeps to Python 3.9.
"""

from __future__ import annotations

import os
import stat
from typing import Optional

_CHUNK = 1024 * 1024
_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISSOCK, "a socket"),
)


class UserFileError(ValueError):
    """The file cannot be read as a user's input; the message says why (without the path)."""


def size_text(size: int) -> str:
    """``64 MiB``, ``1.5 GiB``, ``300 bytes``."""
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= factor:
            return f"{size / factor:g} {unit}"
    return f"{size} bytes"


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_regular(path: str, max_bytes: Optional[int] = None) -> int:
    """The size of the regular file at ``path``; :class:`UserFileError` when it is something else or
    larger than ``max_bytes`` (:class:`OSError` when it cannot be found)."""
    return _checked_size(os.stat(path), max_bytes)


def _checked_size(info: os.stat_result, max_bytes: Optional[int]) -> int:
    if not stat.S_ISREG(info.st_mode):
        raise UserFileError(f"is {_kind(info.st_mode)}, not a regular file")
    if max_bytes is not None and info.st_size > max_bytes:
        raise UserFileError(
            f"{size_text(info.st_size)} is larger than perflab reads here ({size_text(max_bytes)} at most)"
        )
    return info.st_size


def read_capped(path: str, max_bytes: int) -> bytes:
    """The bytes of the regular file at ``path``, at most ``max_bytes`` of them; :class:`UserFileError`
    for anything else (see the module's docstring), :class:`OSError` when it cannot be opened or read."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        _checked_size(os.fstat(descriptor), max_bytes)
        chunks = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(descriptor, min(_CHUNK, left))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(descriptor)
    if left <= 0:
        raise UserFileError(f"grew past {size_text(max_bytes)} while it was read")
    return b"".join(chunks)
