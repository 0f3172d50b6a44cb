"""A run's database writes kept in a local file while the database cannot take them.

When a write of a run fails because the database is unwritable or unreachable (a full or read-only
disk, a locked SQLite file, a stopped PostgreSQL server), the run's store keeps that write and every
later one, in order, in ``<spool dir>/run-<id>.jsonl`` (one JSON object a line: the store method and
its arguments, already masked and JSON-safe) instead of losing them. :func:`replay` writes a spool
to the database once it takes writes again — each write is dropped from the file as soon as it is
stored, so a replay cut short goes on where it stopped — and :func:`replay_all` does it for every
spool (the worker calls it on every poll). The spool directory is ``PERFLAB_SPOOL_DIR``, default
``<repo>/var/spool`` (see :mod:`perflab.settings`). A write the spool's disk cannot take either (full,
read-only) raises :class:`SpoolUnwritable` and leaves the file as it was (no torn line); a torn line
found anyway (a crash mid-write) is skipped with a warning.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Session

from db import crud
from db.crud import IllegalTransition
from db.session import new_session
from perflab.settings import spool_dir

logger = logging.getLogger(__name__)

_FILE = re.compile(r"^run-(\d+)\.jsonl$")
# SQLSTATEs of PostgreSQL that mean "no writes now" though the server answers: a read-only transaction
# (a standby, default_transaction_read_only), privileges revoked, a full disk, out of memory, too many
# connections, the server shutting down or in recovery.
_UNAVAILABLE_SQLSTATES = frozenset({"25006", "42501", "53100", "53200", "53300", "57P01", "57P02", "57P03"})


class SpoolUnwritable(OSError):
    """The spool file could not take a write; the message names the file and the system's reason."""


def unavailable(error: BaseException) -> bool:
    """Whether a database error means "the database cannot take writes now" (unwritable, unreachable,
    read-only, privileges revoked) rather than a bug in what is written."""
    if isinstance(error, (sa.exc.OperationalError, sa.exc.InterfaceError)):
        return True
    sqlstate = getattr(getattr(error, "orig", None), "sqlstate", None)
    return isinstance(error, sa.exc.DBAPIError) and sqlstate in _UNAVAILABLE_SQLSTATES


def first_line(error: BaseException) -> str:
    """The driver's own first line of a database error (``attempt to write a readonly database``)."""
    text = str(getattr(error, "orig", None) or error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def spool_path(run_id: int) -> Path:
    return spool_dir() / f"run-{run_id}.jsonl"


def append(run_id: int, operation: str, arguments: Mapping[str, Any]) -> Path:
    """Add one write to the run's spool (created mode 0600: it may hold results and commands)."""
    path = spool_path(run_id)
    line = json.dumps({"op": operation, "args": dict(arguments)}, separators=(",", ":")) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError as error:
        raise SpoolUnwritable(f"the spool {path} cannot be written ({error.strerror or error})") from None
    # Unbuffered writes on the descriptor: nothing is left to flush (and fail) when it is closed.
    try:
        size = os.fstat(descriptor).st_size
        data = line.encode("utf-8")
        written = 0
        while written < len(data):
            written += os.write(descriptor, data[written:])
        os.fsync(descriptor)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.ftruncate(descriptor, size)  # no torn line: the file ends with its last whole write
        raise SpoolUnwritable(f"the spool {path} cannot be written ({error.strerror or error})") from None
    finally:
        os.close(descriptor)
    return path


def pending(run_id: int) -> list[dict[str, Any]]:
    """The writes still waiting in the run's spool (empty when there is none)."""
    try:
        text = spool_path(run_id).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            logger.warning("run %s: line %d of its spool is torn and skipped", run_id, number)
            continue
        entries.append(entry)
    return entries


def _rewrite(path: Path, entries: list[dict[str, Any]]) -> None:
    if not entries:
        path.unlink(missing_ok=True)
        return
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as tmp:
        tmp.write("".join(json.dumps(entry, separators=(",", ":")) + "\n" for entry in entries))
    os.replace(tmp.name, path)


# The writes a run's store makes, by name: each is called as ``write(session, run_id=…, **arguments)``.
WRITES: dict[str, Callable[..., object]] = {
    "set_status": crud.set_run_status,
    "update": crud.update_run,
    "heartbeat": crud.heartbeat_run,
    "add_result": crud.add_profile_result,
    "add_samples": crud.add_samples,
    "release_gpus": crud.release_gpus,
}


def apply(session: Session, run_id: int, operation: str, arguments: Mapping[str, Any]) -> Any:
    """Make one of the run's writes (:data:`WRITES`) in ``session``."""
    return WRITES[operation](session, run_id=run_id, **arguments)


def replay(engine: Engine, run_id: int) -> bool:
    """Store the run's spooled writes in order; True once none is left. A database still unavailable
    stops the replay (False) with the rest kept for the next try."""
    path = spool_path(run_id)
    entries = pending(run_id)
    while entries:
        entry = entries[0]
        try:
            with new_session(engine) as session:
                apply(session, run_id, entry["op"], entry["args"])
        except sa.exc.DBAPIError as exc:
            if not unavailable(exc):
                raise
            return False
        except IllegalTransition as exc:  # finished elsewhere meanwhile: that end stays
            logger.warning("run %s: spooled status not applied: %s", run_id, exc)
        entries = entries[1:]
        _rewrite(path, entries)
    path.unlink(missing_ok=True)
    return True


def replay_all(engine: Engine) -> list[int]:
    """Replay every spool in the spool directory; the run ids fully stored now."""
    directory = spool_dir()
    stored = []
    for path in sorted(directory.glob("run-*.jsonl")) if directory.is_dir() else []:
        match = _FILE.match(path.name)
        if match and replay(engine, int(match.group(1))):
            logger.info("run %s: results kept while the database was unavailable are stored", match.group(1))
            stored.append(int(match.group(1)))
    return stored
